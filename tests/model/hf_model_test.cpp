// Hugging Face model directories (tests/fixtures/hf_models, written and run by transformers in
// tools/fixtures/make_hf_models.py) on both networks: greedy tokens equal transformers' in f32,
// alone and in a batch, logits within 1e-4; bf16 within a stated tolerance; stories260K in the
// Hugging Face layout gives run.c's tokens; config.json's keys and their errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/causal_lm.hpp"
#include "model/hf_weights.hpp"
#include "model/model_info.hpp"
#include "model/slot_tables.hpp"
#include "sampling/sampler.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/reference_runs.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::model;
using conveyor::sampling::argmax;
using json = nlohmann::json;
using test::max_difference;
using test::model_run;
using test::reference_run;
using test::run;

namespace {

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/hf_models/" + name);
}

reference_run load_reference(const std::string& stem) {
  return test::load_reference(fixture(stem + ".expected.json"));
}

std::unique_ptr<causal_lm> load(const std::string& dir, llama_network network,
                                compute_dtype dtype = compute_dtype::f32, int32_t slots = 8) {
  runtime_options opt;
  opt.slots = slots;
  opt.context = 64;
  opt.network = network;
  opt.dtype = dtype;
  auto m = load_model(dir, opt);
  if (!m) {
    ADD_FAILURE() << message_of(m.error());
    return nullptr;
  }
  return std::move(*m);
}

struct case_param {
  std::string model;
  llama_network network;
};

std::string case_name(const ::testing::TestParamInfo<case_param>& info) {
  return info.param.model +
         (info.param.network == llama_network::loops ? "_plain_loops" : "_torch_ops");
}

std::vector<case_param> every_model_and_network(const std::vector<std::string>& models) {
  std::vector<case_param> out;
  for (const auto& m : models)
    for (auto n : {llama_network::loops, llama_network::torch_ops}) out.push_back({m, n});
  return out;
}

class hf_f32 : public ::testing::TestWithParam<case_param> {};
class hf_bf16 : public ::testing::TestWithParam<case_param> {};

}  // namespace

// -- f32: exact greedy tokens, logits within 1e-4 --------------------------------------------------

INSTANTIATE_TEST_SUITE_P(hf, hf_f32,
                         ::testing::ValuesIn(every_model_and_network(
                             {"llama_gqa", "llama_tied", "llama3_rope", "mistral", "qwen2",
                              "llama_gqa_bf16", "llama3_rope_bf16", "qwen2_bf16"})),
                         case_name);

TEST_P(hf_f32, greedy_tokens_equal_transformers_alone) {
  const auto ref = load_reference(GetParam().model);
  ASSERT_EQ(ref.prompts.size(), 8u);
  auto m = load(fixture(GetParam().model), GetParam().network);
  ASSERT_TRUE(m);
  auto got = run(*m, ref.prompts, 16, /*batched=*/false);
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    EXPECT_EQ(got.tokens[p], ref.generated[p]) << "prompt " << p;
  EXPECT_LE(max_difference(ref, got), 1e-4f);
}

TEST_P(hf_f32, greedy_tokens_equal_transformers_in_a_batch) {
  const auto ref = load_reference(GetParam().model);
  auto m = load(fixture(GetParam().model), GetParam().network);
  ASSERT_TRUE(m);
  auto got = run(*m, ref.prompts, 16, /*batched=*/true);
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    EXPECT_EQ(got.tokens[p], ref.generated[p]) << "prompt " << p;
  EXPECT_LE(max_difference(ref, got), 1e-4f);
}

// -- bf16 compute: logits within a stated tolerance of transformers computing in bf16 ------------

// Both sides round every weight, activation and KV-cache entry to bf16 (8 significant bits), in a
// different order (Conveyor folds the RMSNorm weights into the next matrix and fuses q|k|v): each
// logit agrees within 2% of the largest |logit| of its row (about 5 bf16 units in the last place
// of that logit), and at least 0.02.
constexpr float bf16_relative_tolerance = 0.02f;

float bf16_tolerance_of(const float* row, int32_t vocab) {
  float largest = 1.0f;
  for (int32_t v = 0; v < vocab; ++v) largest = std::max(largest, std::fabs(row[v]));
  return bf16_relative_tolerance * largest;
}

INSTANTIATE_TEST_SUITE_P(hf, hf_bf16,
                         ::testing::Values(case_param{"llama_gqa_bf16", llama_network::torch_ops},
                                           case_param{"llama3_rope_bf16", llama_network::torch_ops},
                                           case_param{"qwen2_bf16", llama_network::torch_ops}),
                         case_name);

TEST_P(hf_bf16, logits_within_tolerance_of_transformers_in_bf16) {
  const auto ref = load_reference(GetParam().model + ".bf16");
  auto m = load(fixture(GetParam().model), GetParam().network, compute_dtype::bf16);
  ASSERT_TRUE(m);
  // The same inputs as transformers' own greedy run in bf16.
  auto got = run(*m, ref.prompts, 16, /*batched=*/true, &ref.generated);
  float worst = 0;  // in units of each row's tolerance
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    for (size_t k = 0; k < ref.logit_steps.size(); ++k) {
      const float* want = ref.logits_of(p, k);
      const auto& have = got.logits[p][size_t(ref.logit_steps[k])];
      const float tolerance = bf16_tolerance_of(want, ref.vocab);
      for (int32_t v = 0; v < ref.vocab; ++v)
        worst = std::max(worst, std::fabs(want[v] - have[size_t(v)]) / tolerance);
      // Where transformers' choice is clear by more than twice the tolerance, Conveyor's is the
      // same.
      std::vector<float> row(want, want + ref.vocab);
      std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<float>());
      if (row[0] - row[1] > 2 * tolerance) {
        EXPECT_EQ(got.tokens[p][size_t(ref.logit_steps[k])], argmax(want, ref.vocab))
            << "prompt " << p << " step " << ref.logit_steps[k];
      }
    }
  std::printf("%s: bf16 logits differ from transformers' by at most %.2f of the tolerance\n",
              GetParam().model.c_str(), double(worst));
  EXPECT_LE(worst, 1.0f);
}

// -- stories260K in the Hugging Face layout --------------------------------------------------------

TEST(hf_stories260k, weights_equal_the_llama2c_checkpoint_after_the_permutation) {
  auto info = read_hf_config(fixture("stories260K"));
  ASSERT_TRUE(info) << message_of(info.error());
  auto hf = load_hf_weights(*info);
  ASSERT_TRUE(hf) << message_of(hf.error());
  auto bin = load_llama2c_checkpoint(test::stories_model());
  ASSERT_TRUE(bin);
  EXPECT_EQ(hf->shape.dim, bin->shape.dim);
  EXPECT_EQ(hf->shape.n_kv_heads, bin->shape.n_kv_heads);
  EXPECT_EQ(hf->shape.shared_classifier, bin->shape.shared_classifier);
  EXPECT_EQ(hf->wq, bin->wq);
  EXPECT_EQ(hf->wk, bin->wk);
  EXPECT_EQ(hf->wv, bin->wv);
  EXPECT_EQ(hf->w2, bin->w2);
  EXPECT_EQ(hf->token_embedding, bin->token_embedding);
}

TEST(hf_stories260k, greedy_tokens_equal_run_c_on_both_networks) {
  const auto expected = test::load_expected_run();
  for (auto network : {llama_network::loops, llama_network::torch_ops}) {
    runtime_options opt;
    opt.slots = 1;
    opt.network = network;
    auto m = load_model(fixture("stories260K"), opt);
    ASSERT_TRUE(m) << message_of(m.error());
    const int32_t steps = int32_t(expected.sequence.size() - expected.prompt.size());
    auto got = run(**m, {expected.prompt}, steps, false);
    EXPECT_EQ(got.tokens[0], expected.generated());
  }
}

// -- what a directory says about itself ------------------------------------------------------------

TEST(hf_model_info, reads_shape_end_ids_name_and_tokenizer) {
  auto info = inspect_model(fixture("llama3_rope"));
  ASSERT_TRUE(info) << message_of(info.error());
  EXPECT_EQ(info->kind, model_kind::hugging_face);
  EXPECT_EQ(info->name, "llama3_rope");
  EXPECT_EQ(info->architecture, "LlamaForCausalLM");
  EXPECT_EQ(info->shape.head_size(), 32);
  EXPECT_EQ(info->shape.q_dim(), 128);
  EXPECT_EQ(info->shape.n_kv_heads, 1);
  EXPECT_EQ(info->shape.rope_theta, 500000.0);
  EXPECT_EQ(info->shape.rope_scaling.factor, 8.0);
  EXPECT_EQ(info->shape.rope_scaling.original_max_position_embeddings, 32);
  EXPECT_TRUE(info->shape.shared_classifier);
  EXPECT_EQ(info->end_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(info->weights_dtype, "F32");
  EXPECT_EQ(info->tokenizer, fixture("llama3_rope") + "/tokenizer.json");
  EXPECT_EQ(default_tokenizer_for(fixture("llama3_rope")), fixture("llama3_rope") + "/tokenizer.json");

  auto tied = inspect_model(fixture("llama_tied") + "/");
  ASSERT_TRUE(tied);
  EXPECT_EQ(tied->name, "llama_tied");
  EXPECT_EQ(tied->end_ids, (std::vector<int32_t>{2, 7}));  // a list in generation_config.json
  EXPECT_FLOAT_EQ(tied->shape.rms_norm_eps, 1e-5f);

  auto qwen = inspect_model(fixture("qwen2_bf16"));
  ASSERT_TRUE(qwen);
  EXPECT_TRUE(qwen->shape.qkv_bias);
  EXPECT_EQ(qwen->weights_dtype, "BF16");

  auto bin = inspect_model(test::stories_model());
  ASSERT_TRUE(bin);
  EXPECT_EQ(bin->kind, model_kind::llama2c);
  EXPECT_TRUE(bin->end_ids.empty());  // the tokenizer's BOS and EOS, as before
}

TEST(hf_model_info, the_loaded_model_reports_its_end_ids) {
  auto m = load(fixture("llama_tied"), llama_network::loops);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->end_ids(), (std::vector<int32_t>{2, 7}));
  EXPECT_FALSE(m->ignores_end_tokens());
  auto bin = load(test::stories_model(), llama_network::loops);
  ASSERT_TRUE(bin);
  EXPECT_TRUE(bin->end_ids().empty());
}

// -- config.json: other spellings and refusals -------------------------------------------------------

namespace {

/// A copy of a fixture directory in a fresh temporary folder, whose config.json a test edits.
struct scratch_dir {
  test::temp_dir folder;
  std::string path;
  explicit scratch_dir(const std::string& model)
      : folder{"conveyor_hf_" + model}, path{folder.path()} {
    folder.copy_files_of(fixture(model));
  }
  json config() const {
    std::ifstream in(path + "/config.json");
    return json::parse(in);
  }
  void write(const std::string& file, const std::string& text) const {
    std::ofstream(path + "/" + file, std::ios::binary | std::ios::trunc) << text;
  }
  void set_config(const json& j) const { write("config.json", j.dump(2)); }
};

std::string load_error(const std::string& dir, int32_t context = 64) {
  runtime_options opt;
  opt.slots = 1;
  opt.context = context;
  auto m = load_model(dir, opt);
  return m ? std::string{"(loaded)"} : message_of(m.error());
}

}  // namespace

TEST(hf_config, transformers_4_spelling_of_the_rope_keys_reads_the_same) {
  scratch_dir dir{"llama3_rope"};
  auto j = dir.config();
  auto rope = j["rope_parameters"];
  j.erase("rope_parameters");
  j["rope_theta"] = rope["rope_theta"];
  j["rope_scaling"] = {{"type", "llama3"},
                       {"factor", rope["factor"]},
                       {"low_freq_factor", rope["low_freq_factor"]},
                       {"high_freq_factor", rope["high_freq_factor"]},
                       {"original_max_position_embeddings",
                        rope["original_max_position_embeddings"]}};
  dir.set_config(j);
  auto old = read_hf_config(dir.path);
  auto now = read_hf_config(fixture("llama3_rope"));
  ASSERT_TRUE(old) << message_of(old.error());
  ASSERT_TRUE(now);
  EXPECT_EQ(old->shape, now->shape);
}

TEST(hf_config, refuses_other_architectures_listing_the_supported_ones) {
  scratch_dir dir{"llama_gqa"};
  auto j = dir.config();
  j["architectures"] = {"GPT2LMHeadModel"};
  dir.set_config(j);
  const auto msg = load_error(dir.path);
  EXPECT_NE(msg.find(dir.path + "/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"), std::string::npos)
      << msg;
}

TEST(hf_config, refuses_a_sliding_window_smaller_than_the_context) {
  scratch_dir dir{"mistral"};
  auto j = dir.config();
  j["sliding_window"] = 32;
  dir.set_config(j);
  EXPECT_EQ(load_error(dir.path, 32), "(loaded)");
  const auto msg = load_error(dir.path, 64);
  EXPECT_NE(msg.find(dir.path + "/config.json: key 'sliding_window' is 32"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("context of 64"), std::string::npos) << msg;
}

TEST(hf_config, errors_name_the_file_and_the_key) {
  scratch_dir dir{"llama_gqa"};
  const std::string config = dir.path + "/config.json";
  auto expect_error = [&](const json& j, const std::string& want) {
    dir.set_config(j);
    const auto msg = load_error(dir.path);
    EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
  };
  auto base = dir.config();
  auto j = base;
  j.erase("hidden_size");
  expect_error(j, config + ": key 'hidden_size' missing");
  j = base;
  j["num_key_value_heads"] = 3;
  expect_error(j, config + ": key 'num_attention_heads' (4) is not a multiple of "
                           "'num_key_value_heads' (3)");
  j = base;
  j["rope_parameters"]["rope_type"] = "yarn";
  expect_error(j, "key 'rope_type' is 'yarn'");
  j = base;
  j["hidden_act"] = "gelu";
  expect_error(j, config + ": key 'hidden_act' is 'gelu'");
  j = base;
  j["attention_bias"] = true;
  expect_error(j, config + ": key 'attention_bias' is true");
  // A tensor whose shape disagrees with config.json.
  j = base;
  j["intermediate_size"] = 96;
  expect_error(j, dir.path + "/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' "
                             "has shape [128, 64] but " + config + " implies [96, 64]");
  // Malformed JSON.
  dir.write("config.json", "{\"architectures\": [\"LlamaForCausalLM\"],");
  EXPECT_NE(load_error(dir.path).find(config + ": malformed JSON"), std::string::npos);
  dir.set_config(base);
  dir.write("generation_config.json", "{\"eos_token_id\": \"two\"}");
  EXPECT_NE(load_error(dir.path).find(dir.path + "/generation_config.json: key 'eos_token_id'"),
            std::string::npos);
  dir.write("generation_config.json", "{\"eos_token_id\": 2}");
  EXPECT_EQ(load_error(dir.path), "(loaded)");
  // Missing files.
  std::remove((dir.path + "/model.safetensors").c_str());
  EXPECT_NE(load_error(dir.path).find(dir.path + ": no model.safetensors and no "
                                                 "model.safetensors.index.json (missing file)"),
            std::string::npos);
  std::remove(config.c_str());
  EXPECT_NE(load_error(dir.path).find(config + ": missing file"), std::string::npos);
}

TEST(hf_config, a_missing_classifier_names_the_tensor) {
  scratch_dir dir{"llama_tied"};
  auto j = dir.config();
  j["tie_word_embeddings"] = false;
  dir.set_config(j);
  const auto msg = load_error(dir.path);
  EXPECT_NE(msg.find(dir.path + "/model.safetensors: no tensor 'lm_head.weight'"),
            std::string::npos)
      << msg;
}
