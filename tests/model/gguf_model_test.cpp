// GGUF model files written by llama.cpp's own converter and quantizer
// (tests/fixtures/gguf_models, tools/fixtures/make_gguf_models.py), each checked against
// transformers running the weights the file holds (dequantized by the gguf package): greedy
// tokens equal, alone and in a batch, and logits within a stated tolerance; the metadata read;
// and files that are not what the loader needs refused with the file and the reason.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/causal_lm.hpp"
#include "model/gguf_model.hpp"
#include "model/model_info.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/reference_runs.hpp"

using namespace conveyor;
using namespace conveyor::model;

namespace {

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/gguf_models/" + name);
}

std::unique_ptr<causal_lm> load(const std::string& path, int32_t slots = 8) {
  runtime_options opt;
  opt.slots = slots;
  opt.context = 64;
  auto m = load_model(path, opt);
  if (!m) {
    ADD_FAILURE() << message_of(m.error());
    return nullptr;
  }
  return std::move(*m);
}

// The tolerance of a file's logits against transformers': float files (f32, f16, bf16) are
// computed in f32 from the file's exact weights, as transformers computes them: 1e-4. Quantized
// files are multiplied with llama.cpp's arithmetic: each input row rounded to 8 bits per block,
// where transformers multiplies the same dequantized weights by the float inputs (the
// torch-operation network, which keeps the inputs in float, agrees with it within 1e-4: the test
// below). The rounding moves each input by up to half of its block's largest |x| / 127: within 3 %
// of the row's largest |logit| for blocks of 32 (Q8_0, Q4_0; measured worst 1.9 %), within 5 %
// for the K-quants' blocks of 256 (one scale for 8 times the numbers; measured worst 3.7 %). The
// measured worst is printed.
float relative_tolerance(const std::string& type) {
  if (type == "f32" || type == "f16" || type == "bf16") return 0.0f;
  return type.find("_K") != std::string::npos ? 0.05f : 0.03f;
}

float tolerance_of(const std::string& type, const float* row, int32_t vocab) {
  const float relative = relative_tolerance(type);
  if (relative == 0.0f) return 1e-4f;
  float largest = 1.0f;
  for (int32_t v = 0; v < vocab; ++v) largest = std::max(largest, std::fabs(row[v]));
  return relative * largest;
}

// llama.cpp rounds the inputs of every product, float files' too (to bf16 or f16 for their
// products, to 8 bits for quantized ones): its choices are compared with a near-tie tolerance of
// the quantized files' 3 % at least.
float llama_cpp_tolerance_of(const std::string& type, const float* row, int32_t vocab) {
  return std::max(tolerance_of(type, row, vocab), tolerance_of("q8_0", row, vocab));
}

struct file_case {
  std::string model;  // e.g. "llama_spm"
  std::string type;   // e.g. "q8_0", "Q4_K_M"
  std::string file() const { return model + "." + type; }
};

std::string case_name(const ::testing::TestParamInfo<file_case>& info) {
  return info.param.model + "_" + info.param.type;
}

class gguf_file_run : public ::testing::TestWithParam<file_case> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(
    gguf, gguf_file_run,
    ::testing::Values(file_case{"llama_spm", "f32"}, file_case{"llama_spm", "bf16"},
                      file_case{"llama_spm", "q8_0"}, file_case{"llama_spm", "Q4_0"},
                      file_case{"qwen2", "f16"}, file_case{"qwen2", "q8_0"},
                      file_case{"qwen2", "Q4_0"}, file_case{"llama3_q4k", "Q4_K_M"}),
    case_name);

bool float_file(const std::string& type) {
  return type == "f32" || type == "f16" || type == "bf16";
}

// Teacher-forced by a reference's greedy tokens, every step of the model picks the reference's
// token, or the reference's token is within `tolerance` of the model's best logit at that step
// (a near-tie, which the two sides' rounding may decide either way). Returns the near-ties.
template <class Tolerance>
int near_ties(causal_lm& m, const test::reference_run& ref,
              const std::vector<std::vector<int32_t>>& tokens, Tolerance tolerance_of,
              const char* who) {
  auto forced = test::run(m, ref.prompts, int32_t(tokens[0].size()), true, &tokens);
  int ties = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    for (size_t s = 0; s < tokens[p].size(); ++s) {
      const auto& row = forced.logits[p][s];
      const int32_t mine = forced.tokens[p][s], theirs = tokens[p][s];
      if (mine == theirs) continue;
      ++ties;
      const float tolerance = tolerance_of(row.data(), int32_t(row.size()));
      EXPECT_LE(row[size_t(mine)] - row[size_t(theirs)], tolerance)
          << who << "'s token " << theirs << " at prompt " << p << " step " << s
          << " is not a near-tie of the model's " << mine;
    }
  return ties;
}

// Greedy tokens of the float files equal transformers' where it runs the file's own weights;
// every file's teacher-forced logits of the stored steps within its type's tolerance; every step
// the reference's choice, or a near-tie, against transformers' tokens and llama.cpp's own.
TEST_P(gguf_file_run, greedy_tokens_and_logits_agree_with_transformers_and_llama_cpp) {
  const auto& c = GetParam();
  const auto ref = test::load_reference(fixture(c.file() + ".expected.json"));
  ASSERT_FALSE(ref.prompts.empty());
  std::ifstream in(fixture(c.file() + ".expected.json"));
  const auto j = nlohmann::json::parse(in);
  const auto llama_cpp = j["llama_cpp_generated"].get<std::vector<std::vector<int32_t>>>();
  auto m = load(fixture(c.file() + ".gguf"));
  ASSERT_TRUE(m);
  const int32_t steps = int32_t(ref.generated[0].size());
  for (bool batched : {false, true}) {
    if (float_file(c.type)) {
      auto got = test::run(*m, ref.prompts, steps, batched);
      for (size_t p = 0; p < ref.prompts.size(); ++p)
        EXPECT_EQ(got.tokens[p], ref.generated[p]) << "prompt " << p << (batched ? " batched" : "");
    }
    auto forced = test::run(*m, ref.prompts, steps, batched, &ref.generated);
    float worst = 0;  // in units of each row's tolerance
    for (size_t p = 0; p < ref.prompts.size(); ++p)
      for (size_t k = 0; k < ref.logit_steps.size(); ++k) {
        const float* want = ref.logits_of(p, k);
        const auto& have = forced.logits[p][size_t(ref.logit_steps[k])];
        const float tolerance = tolerance_of(c.type, want, ref.vocab);
        for (int32_t v = 0; v < ref.vocab; ++v)
          worst = std::max(worst, std::fabs(want[v] - have[size_t(v)]) / tolerance);
      }
    std::printf("%s%s: logits differ from transformers' by at most %.3f of the tolerance\n",
                c.file().c_str(), batched ? " (batched)" : "", double(worst));
    EXPECT_LE(worst, 1.0f);
  }
  const int with_transformers = near_ties(
      *m, ref, ref.generated,
      [&](const float* row, int32_t vocab) { return tolerance_of(c.type, row, vocab); },
      "transformers");
  const int with_llama_cpp = near_ties(
      *m, ref, llama_cpp,
      [&](const float* row, int32_t vocab) { return llama_cpp_tolerance_of(c.type, row, vocab); },
      "llama.cpp");
  std::printf("%s: near-ties with transformers' tokens %d, with llama.cpp's %d\n", c.file().c_str(),
              with_transformers, with_llama_cpp);
  if (float_file(c.type)) {
    EXPECT_EQ(with_transformers, 0);
  }
}

// The torch-operation network reads every file's tensors dequantized to float32 and computes in
// float32, as transformers runs the dequantized weights: the loader's reading of the metadata
// (shape, rotary frequencies and their Llama 3 factors, tied classifier) and of every tensor type
// is exact, apart from the quantized products' 8-bit inputs.
TEST_P(gguf_file_run, dequantized_weights_on_the_torch_network_equal_transformers) {
  const auto& c = GetParam();
  const auto ref = test::load_reference(fixture(c.file() + ".expected.json"));
  runtime_options opt;
  opt.slots = 8;
  opt.context = 64;
  opt.network = llama_network::torch_ops;
  auto m = load_model(fixture(c.file() + ".gguf"), opt);
  ASSERT_TRUE(m) << message_of(m.error());
  auto got = test::run(**m, ref.prompts, int32_t(ref.generated[0].size()), true, &ref.generated);
  EXPECT_LE(test::max_difference(ref, got), 1e-4f);
}

// model.dtype = "q8_0" quantizes a file's float weights as they load exactly as llama.cpp's
// converter quantizes them (--outtype q8_0: every matrix and the token embedding, norms kept in
// f32): the f32 file quantized at load gives the very logits of the converter's q8_0 file.
TEST(gguf_quantize_at_load, the_f32_file_quantized_to_q8_0_equals_llama_cpps_q8_0_file) {
  const auto ref = test::load_reference(fixture("llama_spm.q8_0.expected.json"));
  runtime_options opt;
  opt.slots = 8;
  opt.context = 64;
  auto converted = load_model(fixture("llama_spm.q8_0.gguf"), opt);
  ASSERT_TRUE(converted) << message_of(converted.error());
  opt.quantize = "q8_0";
  auto at_load = load_model(fixture("llama_spm.f32.gguf"), opt);
  ASSERT_TRUE(at_load) << message_of(at_load.error());
  const auto a = test::run(**converted, ref.prompts, 16, true, &ref.generated);
  const auto b = test::run(**at_load, ref.prompts, 16, true, &ref.generated);
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    for (size_t s = 0; s < a.logits[p].size(); ++s)
      ASSERT_EQ(a.logits[p][s], b.logits[p][s]) << "prompt " << p << " step " << s;
  // Without quantizing, the f32 file's logits are another model's.
  opt.quantize.clear();
  auto plain = load_model(fixture("llama_spm.f32.gguf"), opt);
  ASSERT_TRUE(plain);
  const auto c = test::run(**plain, ref.prompts, 16, true, &ref.generated);
  EXPECT_NE(a.logits[0][0], c.logits[0][0]);
}

// -- what the loader refuses (tests/fixtures/gguf_bad_models, written by the gguf package) --------

namespace {

std::string bad_model(const std::string& name) {
  return test::source_path("tests/fixtures/gguf_bad_models/" + name);
}

std::string info_error(const std::string& name) {
  auto info = read_gguf_info(bad_model(name));
  if (info) return "(read)";
  return message_of(info.error());
}

}  // namespace

TEST(gguf_model_info, reads_the_shape_end_ids_and_main_type_of_a_file) {
  auto good = read_gguf_info(bad_model("good.gguf"));
  ASSERT_TRUE(good) << message_of(good.error());
  EXPECT_EQ(good->kind, model_kind::gguf);
  EXPECT_EQ(good->name, "good");
  EXPECT_EQ(good->shape.dim, 32);
  EXPECT_EQ(good->shape.n_kv_heads, 2);
  EXPECT_FALSE(good->shape.shared_classifier);
  EXPECT_EQ(good->weights_dtype, "F32");
  EXPECT_EQ(good->tokenizer, bad_model("good.gguf"));
  auto q4k = read_gguf_info(fixture("llama3_q4k.Q4_K_M.gguf"));
  ASSERT_TRUE(q4k);
  EXPECT_EQ(q4k->weights_dtype, "Q4_K");
  EXPECT_TRUE(q4k->shape.shared_classifier);
  EXPECT_EQ(q4k->shape.rope_factors.size(), size_t(q4k->shape.head_size() / 2));
  EXPECT_TRUE(is_gguf_file(fixture("llama3_q4k.Q4_K_M.gguf")));
  EXPECT_FALSE(is_gguf_file(test::stories_model()));
}

TEST(gguf_model_info, refusals_name_the_file_and_what_is_wrong) {
  const std::string dir = bad_model("");
  EXPECT_EQ(info_error("arch_gpt2.gguf"),
            dir +
                "arch_gpt2.gguf: key 'general.architecture' is 'gpt2'; Conveyor serves llama, "
                "qwen2");
  EXPECT_NE(info_error("no_block_count.gguf").find("llama.block_count"), std::string::npos)
      << info_error("no_block_count.gguf");
  EXPECT_EQ(info_error("q5_1_tensor.gguf"),
            dir +
                "q5_1_tensor.gguf: tensor 'blk.0.ffn_up.weight' has type Q5_1, which Conveyor "
                "does not read (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  EXPECT_EQ(info_error("wrong_dims.gguf"),
            dir +
                "wrong_dims.gguf: tensor 'blk.0.attn_k.weight' has dims [32, 32] but the "
                "metadata implies [32, 16]");
  EXPECT_EQ(info_error("no_ffn_up.gguf"),
            dir +
                "no_ffn_up.gguf: no tensor 'blk.0.ffn_up.weight' (the metadata's architecture "
                "needs it)");
  EXPECT_EQ(info_error("linear_rope.gguf"),
            dir +
                "linear_rope.gguf: key 'llama.rope.scaling.type' is 'linear'; Conveyor reads "
                "no rotary scaling but Llama 3's (the rope_freqs tensor)");
  // load_model refuses the same way.
  runtime_options opt;
  auto m = load_model(bad_model("q5_1_tensor.gguf"), opt);
  ASSERT_FALSE(m);
  EXPECT_NE(message_of(m.error()).find("has type Q5_1"), std::string::npos);
}
