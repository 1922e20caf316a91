// GGUF model files served as a user serves them: `conveyor serve --config FILE` whose model.path
// is a file written by llama.cpp's own converter and quantizer (tests/fixtures/gguf_models/, made
// by tools/fixtures/make_gguf_models.py), one of each kind: a float file and a Q8_0 file with a
// SentencePiece vocabulary, a Q4_0 file with a byte-level (Qwen2) vocabulary, a Q4_K_M file with
// a byte-level (Llama 3) vocabulary. Checked through the server's HTTP API over a real socket:
// the model's name, greedy tokens against llama.cpp's own and against `conveyor generate`,
// /tokenize against the tokenizers library, the start-up line, chat with the file's template or
// the config's, and files that cannot be served stopping the start with the file and the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;
using ids = std::vector<int32_t>;

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

json read_json(const std::string& relative) {
  return json::parse(read_file(CONVEYOR_SOURCE_DIR "/" + relative));
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary};
  out << bytes;
}

// A folder under /tmp for the test's config files and broken model files, removed at the end.
class scratch_dir {
 public:
  scratch_dir() {
    char path[] = "/tmp/conveyor-gguf-e2e-XXXXXX";
    if (::mkdtemp(path) != nullptr) path_ = path;
  }
  ~scratch_dir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A config file serving `model` (a path relative to the source tree, the server's working
// directory) on one CPU executor with 4 slots; `model_lines` go into [model].
std::string write_config(const scratch_dir& dir, const std::string& model,
                         const std::string& model_lines = "") {
  const auto path = dir.file("conveyor.toml");
  write_file(path, "[[executors]]\ndevice = \"cpu\"\nthreads = 1\nslots = 4\n\n[model]\npath = \"" +
                       model + "\"\n" + model_lines + "\n[metrics]\ninterval_s = 0\n");
  return path;
}

json post(conveyor_process& server, const std::string& target, const json& body) {
  auto reply = server.request("POST", target, body.dump());
  if (!reply) {
    ADD_FAILURE() << "POST " << target << " got no answer";
    return json{};
  }
  EXPECT_EQ(reply->status, 200u) << target << " " << body.dump() << ": " << reply->body;
  return reply->json();
}

// The text the server's detokenizer gives `tokens` (the text a completion of them shows).
std::string text_of(conveyor_process& server, const ids& tokens) {
  return post(server, "/detokenize", {{"tokens", tokens}}).value("prompt", "<no text>");
}

// A greedy completion of 16 tokens of `prompt` (token ids, or text with BOS), end tokens ignored
// so that every run has 16 tokens as the references do.
std::string greedy_text(conveyor_process& server, const json& prompt) {
  const auto reply =
      post(server, "/v1/completions",
           {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(reply["usage"]["completion_tokens"], 16) << reply.dump();
  return reply["choices"][0]["text"].get<std::string>();
}

// Teacher-forced by `generated` after `prompt` (echo with log-probabilities, nothing generated):
// for each generated token, how far its log-probability lies below the best token's at that step
// (0 where it is the server's greedy choice). A difference of log-probabilities at one step is the
// difference of the two logits (same normalizer).
std::vector<double> gaps_below_best(conveyor_process& server, const ids& prompt,
                                    const ids& generated) {
  ids all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const auto reply = post(
      server, "/v1/completions",
      {{"prompt", all}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}, {"temperature", 0}});
  std::vector<double> gaps;
  const auto& lp = reply["choices"][0]["logprobs"];
  for (size_t k = prompt.size(); k < all.size(); ++k) {
    double best = -1e30;
    for (const auto& [text, value] : lp["top_logprobs"][k].items())
      best = std::max(best, double(value));
    gaps.push_back(best - lp["token_logprobs"][k].get<double>());
  }
  return gaps;
}

struct gguf_case {
  std::string stem;          // the file's stem, e.g. "qwen2.Q4_0"
  std::string main_type;     // the tensor type holding most of its bytes
  std::string architecture;  // general.architecture
  std::string vocabulary;  // tests/fixtures/gguf_tokenizers/NAME.json: the tokenizers library's ids
  float relative_tolerance;  // 0 for a float file, else as tests/model/gguf_model_test.cpp's
  std::string file() const { return "tests/fixtures/gguf_models/" + stem + ".gguf"; }
};

std::string case_name(const ::testing::TestParamInfo<gguf_case>& info) {
  std::string name = info.param.stem;
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

class e2e_gguf_file : public ::testing::TestWithParam<gguf_case> {};

// The main types are those of the tensors holding most bytes as the gguf package lists the files
// (qwen2.Q4_0: Q4_0 87552 bytes, the Q8_0 classifier 87040; Q4_K_M: Q4_K 571392, Q6_K 403200).
// Tolerances of the near-ties as the model test states them: 3 % of a row's largest |logit| for
// blocks of 32 (the 8-bit activations of Q8_0/Q4_0 products), 5 % for the K-quants' blocks of
// 256.
INSTANTIATE_TEST_SUITE_P(
    gguf, e2e_gguf_file,
    ::testing::Values(gguf_case{"llama_spm.f32", "F32", "llama", "llama_spm", 0.0f},
                      gguf_case{"llama_spm.q8_0", "Q8_0", "llama", "llama_spm", 0.03f},
                      gguf_case{"qwen2.Q4_0", "Q4_0", "qwen2", "qwen2", 0.03f},
                      gguf_case{"llama3_q4k.Q4_K_M", "Q4_K", "llama", "llama3", 0.05f}),
    case_name);

// The start-up line names the file, its architecture, its main tensor type, the load times and
// the peak resident memory; /v1/models names the file's stem.
TEST_P(e2e_gguf_file, starts_with_the_files_line_and_serves_it_under_its_stem) {
  const auto& c = GetParam();
  scratch_dir dir;
  conveyor_process server{{"--config", write_config(dir, c.file())}};
  ASSERT_TRUE(server.ok()) << server.error();
  const std::regex loaded{"loaded " + std::regex_replace(c.file(), std::regex{R"(\.)"}, R"(\.)") +
                          R"( \(gguf )" + c.architecture +
                          R"(\): [0-9]+ parameters, [0-9.]+ MiB, )" + "most in " + c.main_type +
                          R"(; opened in [0-9]+ ms, read and packed in [0-9]+ ms; )" +
                          R"(peak resident memory [0-9]+ MiB)"};
  EXPECT_TRUE(std::regex_search(server.log(), loaded)) << server.log();
  EXPECT_NE(server.log().find("tokenizer: " + c.file()), std::string::npos)
      << "the file's own vocabulary is the tokenizer: " << server.log();

  auto models = server.request("GET", "/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->json()["data"][0]["id"], c.stem);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Greedy tokens over HTTP against llama.cpp's (llama-server's greedy tokens for the same file,
// "llama_cpp_generated" of the fixture), each prompt sent as token ids (no BOS added, as the
// references ran them). The server's tokens are read back by teacher-forcing: the prompt and the
// reference's 16 tokens scored with echo, each reference token's log-probability against the best
// one at its step.
// - The float file: every reference token is the server's greedy choice (gap 0), and the
//   free-running completion's text is the references' text. transformers' and llama.cpp's tokens
//   are the same there (checked).
// - Quantized files: llama.cpp rounds its activations differently (see the model test), so a step
//   may differ where the two best logits are close: every reference token is the greedy choice or
//   within the type's tolerance of it, the row's largest |logit| taken from transformers' stored
//   logits of that prompt. How many free-running completions equal llama.cpp's text is printed,
//   not asserted.
TEST_P(e2e_gguf_file, greedy_tokens_are_llama_cpps_or_near_ties_of_them) {
  const auto& c = GetParam();
  const auto ref = read_json("tests/fixtures/gguf_models/" + c.stem + ".expected.json");
  const auto prompts = ref["prompts"].get<std::vector<ids>>();
  const auto llama_cpp = ref["llama_cpp_generated"].get<std::vector<ids>>();
  const auto transformers = ref["generated"].get<std::vector<ids>>();
  ASSERT_EQ(prompts.size(), llama_cpp.size());
  const auto vocab = ref["vocab_size"].get<size_t>();
  const auto steps = ref["logit_steps"].size();
  const auto logits = read_file(CONVEYOR_SOURCE_DIR "/tests/fixtures/gguf_models/" +
                                ref["logits_file"].get<std::string>());
  ASSERT_EQ(logits.size(), prompts.size() * steps * vocab * sizeof(float));

  scratch_dir dir;
  conveyor_process server{{"--config", write_config(dir, c.file())}};
  ASSERT_TRUE(server.ok()) << server.error();
  int equal_texts = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto text = greedy_text(server, prompts[p]);
    const auto gaps = gaps_below_best(server, prompts[p], llama_cpp[p]);
    ASSERT_EQ(gaps.size(), llama_cpp[p].size());
    if (text == text_of(server, llama_cpp[p])) ++equal_texts;
    if (c.relative_tolerance == 0.0f) {
      EXPECT_EQ(llama_cpp[p], transformers[p]) << "the references of a float file agree";
      EXPECT_EQ(text, text_of(server, llama_cpp[p])) << "prompt " << p;
      for (size_t s = 0; s < gaps.size(); ++s)
        EXPECT_EQ(gaps[s], 0.0) << "prompt " << p << " step " << s << ": llama.cpp's token "
                                << llama_cpp[p][s] << " is not the server's greedy choice";
      continue;
    }
    float largest = 1.0f;
    for (size_t k = 0; k < steps * vocab; ++k) {
      float v;
      std::memcpy(&v, logits.data() + ((p * steps * vocab) + k) * sizeof(float), sizeof v);
      largest = std::max(largest, std::fabs(v));
    }
    const double tolerance = double(c.relative_tolerance * largest);
    for (size_t s = 0; s < gaps.size(); ++s)
      EXPECT_LE(gaps[s], tolerance) << "prompt " << p << " step " << s << ": llama.cpp's token "
                                    << llama_cpp[p][s] << " is not a near-tie of the server's";
  }
  std::printf("%s: %d of %zu greedy completions equal llama.cpp's text\n", c.stem.c_str(),
              equal_texts, prompts.size());
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// The server's greedy completion of a text prompt equals `conveyor generate` on the same file
// (same text; this is Conveyor against itself, not against a reference), and the ids generate
// prints are the server's greedy choice at every step when the server scores them.
TEST_P(e2e_gguf_file, greedy_completion_equals_conveyor_generate) {
  const auto& c = GetParam();
  const std::string prompt = "Once upon a time";
  scratch_dir dir;
  const auto err = dir.file("generate.err");
  auto run =
      run_shell(shell_quote(conveyor_program()) + " generate --model " CONVEYOR_SOURCE_DIR "/" +
                c.file() + " --prompt " + shell_quote(prompt) +
                " --max-tokens 16 --temperature 0 --ignore-eos --show-tokens "
                "--log-level warn 2>" +
                shell_quote(err));
  const auto log = read_file(err);
  ASSERT_EQ(run.status, 0) << run.out << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex{"(^|\n)tokens: ([0-9 ]+)\n"})) << log;
  ids generated;
  std::istringstream words{m[2].str()};
  for (int32_t id; words >> id;) generated.push_back(id);
  ASSERT_EQ(generated.size(), 16u) << log;

  conveyor_process server{{"--config", write_config(dir, c.file())}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto text = greedy_text(server, prompt);
  EXPECT_EQ(run.out, prompt + text + "\n");
  const auto prompt_ids = post(server, "/tokenize", {{"prompt", prompt}})["tokens"].get<ids>();
  const auto gaps = gaps_below_best(server, prompt_ids, generated);
  for (size_t s = 0; s < gaps.size(); ++s)
    EXPECT_EQ(gaps[s], 0.0) << "step " << s << ": generate's token " << generated[s];
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// /tokenize gives the ids of the tokenizers library for every fifth corpus string (references in
// tests/fixtures/gguf_tokenizers/: the tokenizers library on tests/fixtures/tokenizers/corpus.json
// with the tokenizer the model's vocabulary was converted from). The byte-level model files carry
// that vocabulary padded, plus <|endoftext|> as a control token (matched in text, as the
// reference's vocabulary does not): the strings that write it are left out. The converter wrote
// llama_spm's model files from tokenizer.json without SentencePiece merge scores (all -1000), so
// they are not the reference's tokenizer: those are served with model.tokenizer the vocabulary
// file the converter wrote from the same tokenizer with its scores (512 tokens, as the model).
TEST_P(e2e_gguf_file, tokenize_gives_the_tokenizers_librarys_ids) {
  const auto& c = GetParam();
  const auto corpus =
      read_json("tests/fixtures/tokenizers/corpus.json")["strings"].get<std::vector<std::string>>();
  const auto doc = read_json("tests/fixtures/gguf_tokenizers/" + c.vocabulary + ".json");
  const auto refs = doc.contains("expected") ? read_json(doc["expected"].get<std::string>()) : doc;
  const auto plain = refs["ids"].get<std::vector<ids>>();
  ASSERT_EQ(plain.size(), corpus.size());
  scratch_dir dir;
  const bool scoreless = c.vocabulary == "llama_spm";
  const auto vocabulary =
      scoreless ? "tests/fixtures/gguf_tokenizers/" + c.vocabulary + ".gguf" : c.file();
  conveyor_process server{
      {"--config",
       write_config(dir, c.file(), scoreless ? "tokenizer = \"" + vocabulary + "\"\n" : "")}};
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_NE(server.log().find("tokenizer: " + vocabulary), std::string::npos) << server.log();
  size_t failures = 0, checked = 0;
  for (size_t i = 0; i < corpus.size(); i += 5) {
    if (!scoreless && corpus[i].find("<|endoftext|>") != std::string::npos) continue;
    ++checked;
    const auto got =
        post(server, "/tokenize", {{"prompt", corpus[i]}, {"add_special_tokens", false}});
    if (got["tokens"] != json(plain[i]) && ++failures <= 5)
      ADD_FAILURE() << "string " << i << " '" << corpus[i] << "': " << got["tokens"].dump()
                    << " != " << json(plain[i]).dump();
    if (refs.contains("ids_special")) {
      const auto special = post(server, "/tokenize", {{"prompt", corpus[i]}});
      if (special["tokens"] != refs["ids_special"][i] && ++failures <= 5)
        ADD_FAILURE() << "string " << i << " with BOS: " << special["tokens"].dump();
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << checked << " strings";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

const json conversation = json::array({{{"role", "user"}, {"content", "Once upon"}},
                                       {{"role", "assistant"}, {"content", " a time"}},
                                       {{"role", "user"}, {"content", " there was"}}});

// Greedy chat text equals the greedy completion of the conversation as jinja2 renders the
// template (written out here: both templates are small), without BOS (neither template writes
// one).
void expect_chat_equals_completion_of(conveyor_process& server, const std::string& rendered) {
  const auto chat = post(
      server, "/v1/chat/completions",
      {{"messages", conversation}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true}});
  const auto completion = post(server, "/v1/completions",
                               {{"prompt", rendered},
                                {"add_special_tokens", false},
                                {"max_tokens", 16},
                                {"temperature", 0},
                                {"ignore_eos", true}});
  EXPECT_EQ(chat["choices"][0]["message"]["content"], completion["choices"][0]["text"]);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], completion["usage"]["prompt_tokens"]);
  EXPECT_EQ(chat["usage"]["completion_tokens"], 16);
}

// llama_spm's files carry tokenizer.chat_template (the converter copied the tokenizer fixture's
// template, which concatenates the contents): chat uses it.
TEST(e2e_gguf_chat, uses_the_files_chat_template) {
  scratch_dir dir;
  conveyor_process server{
      {"--config", write_config(dir, "tests/fixtures/gguf_models/llama_spm.q8_0.gguf")}};
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_NE(server.log().find("chat template: tests/fixtures/gguf_models/llama_spm.q8_0.gguf: "
                              "tokenizer.chat_template"),
            std::string::npos)
      << server.log();
  expect_chat_equals_completion_of(server, "Once upon a time there was");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// No model fixture of a byte-level vocabulary carries a template: the config's model.chat_template
// gives qwen2's its one, and without one chat is refused with 400 saying so.
TEST(e2e_gguf_chat, uses_the_configs_template_for_a_file_without_one) {
  scratch_dir dir;
  const std::string chatml =
      "{% for m in messages %}<|im_start|>{{ m['role'] }}\\n{{ m['content'] }}<|im_end|>\\n"
      "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}";
  conveyor_process server{
      {"--config", write_config(dir, "tests/fixtures/gguf_models/qwen2.Q4_0.gguf",
                                "chat_template = \"" + chatml + "\"\n")}};
  ASSERT_TRUE(server.ok()) << server.error();
  expect_chat_equals_completion_of(
      server,
      "<|im_start|>user\nOnce upon<|im_end|>\n<|im_start|>assistant\n a time<|im_end|>\n"
      "<|im_start|>user\n there was<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(server.stop(), 0) << server.log();

  conveyor_process without{
      {"--config", write_config(dir, "tests/fixtures/gguf_models/qwen2.Q4_0.gguf")}};
  ASSERT_TRUE(without.ok()) << without.error();
  auto refused = without.request("POST", "/v1/chat/completions",
                                 json{{"messages", conversation}, {"max_tokens", 4}}.dump());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400u) << refused->body;
  EXPECT_NE(refused->body.find("template"), std::string::npos) << refused->body;
  EXPECT_EQ(without.stop(), 0) << without.log();
}

// `conveyor serve --config FILE` on a model file it cannot serve: the exit status and stderr.
command_result serve_refused(const std::string& config) {
  return run_shell(shell_quote(conveyor_program()) + " serve --host 127.0.0.1 --port 0 --config " +
                   shell_quote(config) + " 2>&1 >/dev/null");
}

// The offset of the type number of tensor `name` in the tensor descriptions of GGUF `bytes`
// (name as u64 length + bytes, then u32 n_dims, n_dims u64 dims, u32 type); npos if absent.
size_t type_offset(const std::string& bytes, const std::string& name) {
  for (size_t pos = bytes.find(name); pos != std::string::npos; pos = bytes.find(name, pos + 1)) {
    uint64_t length;
    if (pos < 8) continue;
    std::memcpy(&length, bytes.data() + pos - 8, 8);
    if (length != name.size()) continue;
    uint32_t dims;
    std::memcpy(&dims, bytes.data() + pos + name.size(), 4);
    if (dims < 1 || dims > 4) continue;
    return pos + name.size() + 4 + 8 * dims;
  }
  return std::string::npos;
}

// Files that are not servable stop the start (non-zero exit) with a message on stderr naming the
// file and what is wrong: a truncated copy, a file that is not GGUF, a tensor of a type Conveyor
// has no kernel for (IQ4_NL: the same 18-byte blocks of 32 as Q4_0, so the file stays consistent
// and only the loader can refuse it).
TEST(e2e_gguf_refused, truncated_non_gguf_and_unsupported_type_files_stop_the_start) {
  scratch_dir dir;
  const auto original =
      read_file(CONVEYOR_SOURCE_DIR "/tests/fixtures/gguf_models/qwen2.Q4_0.gguf");
  ASSERT_GT(original.size(), 100000u);

  const auto truncated = dir.file("truncated.gguf");
  write_file(truncated, original.substr(0, original.size() - 1000));
  auto run = serve_refused(write_config(dir, truncated));
  EXPECT_NE(run.status, 0) << run.out;
  EXPECT_NE(run.out.find(truncated + ": "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("truncated"), std::string::npos) << run.out;

  const auto not_gguf = dir.file("not_gguf.gguf");
  write_file(not_gguf, "this is a text file, not a model\n");
  run = serve_refused(write_config(dir, not_gguf));
  EXPECT_NE(run.status, 0) << run.out;
  EXPECT_NE(run.out.find(not_gguf + ": "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("GGUF"), std::string::npos) << run.out;

  auto patched = original;
  const auto at = type_offset(patched, "blk.1.ffn_up.weight");
  ASSERT_NE(at, std::string::npos);
  uint32_t type;
  std::memcpy(&type, patched.data() + at, 4);
  ASSERT_EQ(type, 2u) << "Q4_0";
  type = 20;  // IQ4_NL
  std::memcpy(patched.data() + at, &type, 4);
  const auto unsupported = dir.file("iq4_nl.gguf");
  write_file(unsupported, patched);
  run = serve_refused(write_config(dir, unsupported));
  EXPECT_NE(run.status, 0) << run.out;
  EXPECT_NE(run.out.find(unsupported + ": "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("blk.1.ffn_up.weight"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("IQ4_NL"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace conveyor::e2e
