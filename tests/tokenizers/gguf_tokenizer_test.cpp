// GGUF vocabularies written by llama.cpp's own converter (tools/fixtures/make_gguf_tokenizers.py
// -> tests/fixtures/gguf_tokenizers/) against the tokenizers library's ids on every corpus string
// (which llama.cpp's own tokenizer gives too: the generator checks), the bytes of every token
// against llama.cpp's pieces and decoding against the tokenizer.json of the same vocabulary, the
// metadata read back as the gguf package reads it, the special tokens and chat templates the
// server takes from the file, and refusals naming the key.
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/temp_dir.hpp"
#include "tokenizers/detokenizer.hpp"
#include "tokenizers/gguf_tokenizer.hpp"
#include "tokenizers/tokenizer.hpp"
#include "tokenizers/tokenizer_config.hpp"

namespace conveyor::tokenizers {

namespace {

using test::escaped;

using ids = std::vector<int32_t>;
using json = nlohmann::ordered_json;  // keys in the file's order

const std::string source = std::string{CONVEYOR_SOURCE_DIR} + "/";
const std::string fixtures = source + "tests/fixtures/gguf_tokenizers/";

json read_json(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

const std::vector<std::string>& corpus() {
  static const auto strings = read_json(source + "tests/fixtures/tokenizers/corpus.json")["strings"]
                                  .get<std::vector<std::string>>();
  return strings;
}

std::string render(const ids& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

/// What a fixture's json says: the metadata as the gguf package read it, the reference ids, and
/// the tokenizer.json tokenizer (already checked against the tokenizers library by
/// hf_tokenizer_test) over the same vocabulary, for the bytes of each token.
struct fixture {
  json metadata;
  std::vector<ids> plain;
  /// llama.cpp's piece of each id (llama_token_to_piece, special tokens as nothing).
  std::vector<std::string> pieces;
  std::string same_vocabulary;
};

fixture read_fixture(const std::string& name) {
  auto doc = read_json(fixtures + name + ".json");
  fixture f;
  f.metadata = doc["metadata"];
  for (const auto& hex : doc["pieces"]) {
    const auto text = hex.get<std::string>();
    std::string bytes;
    for (size_t i = 0; i + 1 < text.size(); i += 2)
      bytes += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
    f.pieces.push_back(std::move(bytes));
  }
  if (doc.contains("expected")) {
    f.plain = read_json(source + doc["expected"].get<std::string>())["ids"].get<std::vector<ids>>();
  } else {
    f.plain = doc["ids"].get<std::vector<ids>>();
  }
  // llama_spm's references are llama_legacy's (the same SentencePiece model); the byte-level
  // ones share llama3's vocabulary.
  f.same_vocabulary = source + "tests/fixtures/tokenizers/" +
                      (name == "llama_spm" ? "llama_legacy" : "llama3") + "/tokenizer.json";
  return f;
}

/// The chat templates of a fixture's metadata: tokenizer.chat_template as "default" first, then
/// tokenizer.chat_template.NAME as NAME in the file's order.
std::vector<std::pair<std::string, std::string>> templates_of(const json& metadata) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string key = "tokenizer.chat_template";
  for (const auto& [k, v] : metadata.items()) {
    if (k == key) out.emplace(out.begin(), "default", v.get<std::string>());
    if (k.rfind(key + ".", 0) == 0)
      out.emplace_back(k.substr(key.size() + 1), v.get<std::string>());
  }
  return out;
}

class gguf_fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = load_tokenizer(fixtures + GetParam() + ".gguf");
    ASSERT_TRUE(loaded) << message_of(loaded.error());
    tok = *loaded;
    ref = read_fixture(GetParam());
    ASSERT_EQ(ref.plain.size(), corpus().size());
  }
  std::shared_ptr<const tokenizer> tok;
  fixture ref;
};

}  // namespace

TEST_P(gguf_fixture, ids_equal_the_reference_for_every_string) {
  const auto bos = ref.metadata["tokenizer.ggml.bos_token_id"].get<int32_t>();
  ASSERT_TRUE(ref.metadata["tokenizer.ggml.add_bos_token"].get<bool>());
  size_t failures = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto& text = corpus()[i];
    const auto plain = *tok->encode(text, false);
    const auto special = *tok->encode(text, true);
    ids want_special{bos};
    want_special.insert(want_special.end(), ref.plain[i].begin(), ref.plain[i].end());
    if (plain != ref.plain[i] || special != want_special) {
      if (++failures <= 5)
        ADD_FAILURE() << GetParam() << " string " << i << " \"" << escaped(text) << "\"\n  got "
                      << render(plain) << "\n want " << render(ref.plain[i]) << "\n  got+ "
                      << render(special);
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << corpus().size() << " strings";
}

TEST_P(gguf_fixture, token_bytes_equal_llama_cpps_pieces) {
  ASSERT_EQ(ref.pieces.size(), static_cast<size_t>(tok->vocab_size()));
  size_t failures = 0;
  size_t empty = 0;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    empty += ref.pieces[static_cast<size_t>(id)].empty();
    if (tok->token_bytes(id) != ref.pieces[static_cast<size_t>(id)] && ++failures <= 5)
      ADD_FAILURE() << GetParam() << " id " << id << " got \"" << escaped(tok->token_bytes(id))
                    << "\" want \"" << escaped(ref.pieces[static_cast<size_t>(id)]) << "\"";
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_LT(empty, 8u);  // the control tokens only
}

TEST_P(gguf_fixture, token_bytes_and_decoding_equal_the_tokenizer_json_of_the_same_vocabulary) {
  auto other = load_tokenizer(ref.same_vocabulary);
  ASSERT_TRUE(other) << message_of(other.error());
  const auto& hf = **other;
  ASSERT_EQ(tok->vocab_size(), hf.vocab_size());
  EXPECT_EQ(tok->bos_id(), hf.bos_id());
  EXPECT_EQ(tok->decode_strips_leading_space(), hf.decode_strips_leading_space());
  size_t byte_tokens = 0;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    EXPECT_EQ(tok->token_bytes(id), hf.token_bytes(id)) << "id " << id;
    EXPECT_EQ(tok->is_byte_fallback(id), hf.is_byte_fallback(id)) << "id " << id;
    byte_tokens += tok->is_byte_fallback(id);
  }
  EXPECT_EQ(byte_tokens, GetParam() == "llama_spm" ? 256u : 0u);
  size_t failures = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto got = decode_prompt(*tok, ref.plain[i]);
    const auto want = decode_prompt(hf, ref.plain[i]);
    if (got != want && ++failures <= 5)
      ADD_FAILURE() << GetParam() << " string " << i << "\n  got \"" << escaped(got)
                    << "\"\n want \"" << escaped(want) << "\"";
  }
  EXPECT_EQ(failures, 0u);
}

TEST_P(gguf_fixture, metadata_reads_back_as_the_gguf_package_reads_it) {
  auto file = gguf::gguf_file::open(fixtures + GetParam() + ".gguf");
  ASSERT_TRUE(file) << message_of(file.error());
  auto vocab = read_gguf_vocabulary(**file);
  ASSERT_TRUE(vocab) << message_of(vocab.error());
  const auto& m = ref.metadata;
  EXPECT_EQ(vocab->model, m["tokenizer.ggml.model"].get<std::string>());
  EXPECT_EQ(vocab->pre, m["tokenizer.ggml.pre"].get<std::string>());
  const auto list = [&](const char* key, const auto& got) {
    const auto& want = m[key];
    ASSERT_EQ(got.size(), want["size"].get<size_t>()) << key;
    const auto& first = want["first"];
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(got[i], first[i]) << key << " " << i;
    const auto& last = want["last"];
    for (size_t i = 0; i < last.size(); ++i)
      EXPECT_EQ(got[got.size() - last.size() + i], last[i]) << key << " last " << i;
  };
  list("tokenizer.ggml.tokens", vocab->tokens);
  list("tokenizer.ggml.token_type", vocab->token_types);
  if (m.contains("tokenizer.ggml.scores"))
    list("tokenizer.ggml.scores", vocab->scores);
  else
    EXPECT_TRUE(vocab->scores.empty());
  if (m.contains("tokenizer.ggml.merges"))
    list("tokenizer.ggml.merges", vocab->merges);
  else
    EXPECT_TRUE(vocab->merges.empty());
  const auto id = [&](const char* key, const std::optional<int64_t>& got) {
    if (m.contains(key))
      EXPECT_EQ(got, m[key].get<int64_t>()) << key;
    else
      EXPECT_FALSE(got) << key;
  };
  id("tokenizer.ggml.bos_token_id", vocab->bos_id);
  id("tokenizer.ggml.eos_token_id", vocab->eos_id);
  id("tokenizer.ggml.unknown_token_id", vocab->unk_id);
  id("tokenizer.ggml.padding_token_id", vocab->padding_id);
  EXPECT_EQ(vocab->add_bos, m["tokenizer.ggml.add_bos_token"].get<bool>());
  EXPECT_EQ(vocab->add_eos, m["tokenizer.ggml.add_eos_token"].get<bool>());
  EXPECT_EQ(vocab->chat_templates, templates_of(m));
}

TEST_P(gguf_fixture, the_server_finds_bos_eos_and_chat_templates_in_the_file) {
  const auto path = fixtures + GetParam() + ".gguf";
  auto config = tokenizer_config_beside(path);
  ASSERT_TRUE(config) << message_of(config.error());
  ASSERT_TRUE(*config);
  const auto& m = ref.metadata;
  const auto& tokens = m["tokenizer.ggml.tokens"]["first"];
  EXPECT_EQ((*config)->bos_token, tokens[m["tokenizer.ggml.bos_token_id"].get<size_t>()]);
  EXPECT_EQ((*config)->eos_token,
            tok->eos_id() < 8 ? tokens[size_t(tok->eos_id())] : json("<|eot_id|>"));
  EXPECT_EQ((*config)->add_bos_token, true);
  auto templates = chat_templates_beside(path);
  ASSERT_TRUE(templates) << message_of(templates.error());
  EXPECT_EQ(templates->templates, templates_of(m));
  EXPECT_EQ(templates->origin.empty(), templates->templates.empty());
  EXPECT_EQ(templates->origin.find(path), templates->origin.empty() ? std::string::npos : 0);
}

TEST_P(gguf_fixture, threads_share_one_tokenizer) {
  std::vector<std::vector<ids>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < corpus().size(); i += 2)
        results[t].push_back(*tok->encode(corpus()[i], false));
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t)
    for (size_t k = 0; k < results[t].size(); ++k)
      ASSERT_EQ(results[t][k], ref.plain[t + 2 * k]) << "thread " << t << " string " << t + 2 * k;
}

TEST(gguf_fixtures, cover_named_chat_templates_and_files_without_any) {
  EXPECT_EQ(templates_of(read_fixture("qwen2").metadata).size(), 2u);
  EXPECT_TRUE(templates_of(read_fixture("llama3").metadata).empty());
}

INSTANTIATE_TEST_SUITE_P(fixtures, gguf_fixture,
                         ::testing::Values("llama_spm", "llama3", "qwen2", "tiny_gpt2"),
                         [](const auto& info) { return info.param; });

// -- details
// ---------------------------------------------------------------------------------------

TEST(gguf_tokenizer, spm_puts_its_space_prefix_after_each_special_token_as_llama_cpp_does) {
  auto tok = load_tokenizer(fixtures + "llama_spm.gguf");
  ASSERT_TRUE(tok) << message_of(tok.error());
  const auto a = *(*tok)->encode("once", false);
  const auto both = *(*tok)->encode("once</s>once", false);
  ids want = a;
  want.push_back(2);
  want.insert(want.end(), a.begin(), a.end());
  EXPECT_EQ(both, want);  // "▁once" twice, where llama_spm's Metaspace gives "once" the second
  EXPECT_EQ(*(*tok)->encode("", true), ids{1});
  EXPECT_EQ(*(*tok)->encode("", false), ids{});
}

TEST(gguf_tokenizer, user_defined_tokens_are_matched_and_decode_as_written) {
  auto tok = load_tokenizer(fixtures + "llama3.gguf");
  ASSERT_TRUE(tok) << message_of(tok.error());
  EXPECT_EQ(*(*tok)->encode("a Conveyor<|eot_id|>", false).value().rbegin(), 1200);
  const auto ids_of = *(*tok)->encode(" Conveyor", false);
  EXPECT_EQ(ids_of, ids{1201});
  EXPECT_EQ((*tok)->token_bytes(1201), " Conveyor");
  EXPECT_EQ((*tok)->token_bytes(1200), "");
}

TEST(gguf_tokenizer, refuses_what_it_cannot_run_naming_the_key_and_value) {
  auto file = gguf::gguf_file::open(fixtures + "qwen2.gguf");
  ASSERT_TRUE(file) << message_of(file.error());
  auto read = read_gguf_vocabulary(**file);
  ASSERT_TRUE(read) << message_of(read.error());
  const auto refused = [&](gguf_vocabulary v, const std::string& needle) {
    auto tok = make_gguf_tokenizer(v, "F.gguf");
    ASSERT_FALSE(tok) << needle;
    EXPECT_EQ(code_of(tok.error()), ec::bad_file) << needle;
    EXPECT_NE(message_of(tok.error()).find(needle), std::string::npos) << message_of(tok.error());
  };
  auto v = *read;
  v.pre = "chameleon";
  refused(v, "F.gguf: key 'tokenizer.ggml.pre': pre-tokenizer 'chameleon' is not supported");
  v = *read;
  v.model = "t5";
  refused(v, "F.gguf: key 'tokenizer.ggml.model': tokenizer 't5' is not supported");
  v = *read;
  v.bos_id = 5000;
  refused(v, "F.gguf: key 'tokenizer.ggml.bos_token_id': id 5000 is outside the vocabulary");
  v = *read;
  v.token_types.pop_back();
  refused(v, "F.gguf: key 'tokenizer.ggml.token_type' has 1201 entries for 1202 tokens");
  v = *read;
  v.merges.push_back("zz qq");
  refused(v, "F.gguf: tokenizer.ggml.merges: model merge 942 ('zz' 'qq')");
  v = *read;
  v.tokens.clear();
  refused(v, "F.gguf: key 'tokenizer.ggml.tokens' is empty");
}

TEST(gguf_tokenizer, a_file_that_is_not_gguf_is_refused_by_every_reader_naming_it) {
  test::temp_dir dir{"gguf_tokenizer"};
  const auto path = dir.file("model.gguf");
  std::ofstream{path, std::ios::binary} << "GGUG this is not a GGUF file at all";
  for (const auto& err :
       {load_tokenizer(path).error(), tokenizer_config_beside(path).error(),
        chat_templates_beside(path).error(), load_tokenizer(dir.file("none.gguf")).error()}) {
    EXPECT_EQ(code_of(err), ec::bad_file);
    EXPECT_EQ(message_of(err).find(dir.path()), 0u) << message_of(err);
  }
}

TEST(gguf_tokenizer, a_file_without_a_tokenizer_is_refused_naming_the_key) {
  auto file = gguf::gguf_file::open(fixtures + "llama3.gguf");
  ASSERT_TRUE(file);
  // The reader names missing keys; a model file always has tokenizer.ggml.model.
  EXPECT_TRUE((*file)->find("tokenizer.ggml.model"));
  auto missing = (*file)->string("tokenizer.ggml.nothing");
  ASSERT_FALSE(missing);
  EXPECT_NE(message_of(missing.error()).find("tokenizer.ggml.nothing"), std::string::npos);
}

}  // namespace conveyor::tokenizers
