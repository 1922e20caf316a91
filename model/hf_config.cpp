// config.json and generation_config.json of a Hugging Face model directory: the architectures
// Conveyor computes (Llama, Mistral, Qwen2) as a llama_shape, and the end-of-sequence ids.
#include <sys/stat.h>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/files.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

namespace {

using json = nlohmann::json;

expected<json> read_json(const std::string& path) {
  if (!is_regular_file(path)) return make_error(ec::bad_file, path + ": missing file");
  try {
    std::ifstream in(path);
    auto j = json::parse(in);
    if (!j.is_object()) return make_error(ec::bad_file, path + ": not a JSON object");
    return j;
  } catch (const json::exception& e) {
    return make_error(ec::bad_file, path + ": malformed JSON: " + e.what());
  }
}

// Reads the keys of one JSON object, each error naming the file and the key.
class key_reader {
 public:
  key_reader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  conveyor::error error() const { return error_; }

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int32_t integer(const char* key, std::optional<int32_t> fallback = std::nullopt) {
    if (!has(key)) {
      if (!fallback) fail(key, "missing");
      return fallback.value_or(0);
    }
    const auto& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
      fail(key, "must be a positive integer, got " + v.dump());
      return 0;
    }
    return v.get<int32_t>();
  }

  double number(const char* key, double fallback) {
    if (!has(key)) return fallback;
    const auto& v = j_[key];
    if (!v.is_number() || !(v.get<double>() > 0)) {
      fail(key, "must be a positive number, got " + v.dump());
      return fallback;
    }
    return v.get<double>();
  }

  bool boolean(const char* key, bool fallback) {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) {
      fail(key, "must be true or false, got " + j_[key].dump());
      return fallback;
    }
    return j_[key].get<bool>();
  }

  std::string string(const char* key, std::string fallback) {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) {
      fail(key, "must be a string, got " + j_[key].dump());
      return fallback;
    }
    return j_[key].get<std::string>();
  }

  void fail(const std::string& key, const std::string& why) {
    if (!error_) error_ = make_error(ec::bad_file, file_ + ": key '" + key + "' " + why);
  }

 private:
  const json& j_;
  std::string file_;
  conveyor::error error_;
};

// eos_token_id: an id or a list of ids.
expected<std::vector<int32_t>> end_ids_of(const json& j, const std::string& file) {
  std::vector<int32_t> ids;
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return ids;
  const auto& v = j["eos_token_id"];
  auto add = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      return false;
    ids.push_back(x.get<int32_t>());
    return true;
  };
  bool ok = true;
  if (v.is_array())
    for (const auto& x : v) ok = ok && add(x);
  else
    ok = add(v);
  if (!ok)
    return make_error(ec::bad_file, file + ": key 'eos_token_id' must be a token id or a list of "
                                           "them, got " + v.dump());
  return ids;
}

}  // namespace

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

expected<model_info> read_hf_config(const std::string& dir) {
  const std::string file = dir + "/config.json";
  auto j = read_json(file);
  if (!j) return j.error();
  model_info info;
  info.kind = model_kind::hugging_face;
  info.path = dir;
  key_reader keys{*j, file};
  const auto& arch = (*j).contains("architectures") ? (*j)["architectures"] : json{};
  if (!arch.is_array() || arch.empty() || !arch[0].is_string())
    return make_error(ec::bad_file, file + ": key 'architectures' missing or not a list of names "
                                           "(supported: " + supported_architectures + ")");
  info.architecture = arch[0].get<std::string>();
  const bool llama = info.architecture == "LlamaForCausalLM";
  const bool mistral = info.architecture == "MistralForCausalLM";
  const bool qwen2 = info.architecture == "Qwen2ForCausalLM";
  if (!llama && !mistral && !qwen2)
    return make_error(ec::bad_file, file + ": architecture '" + info.architecture +
                                        "' is not supported (supported: " +
                                        supported_architectures + ")");
  llama_shape& s = info.shape;
  s.dim = keys.integer("hidden_size");
  s.hidden_dim = keys.integer("intermediate_size");
  s.n_layers = keys.integer("num_hidden_layers");
  s.n_heads = keys.integer("num_attention_heads");
  s.n_kv_heads = keys.integer("num_key_value_heads", s.n_heads);
  s.vocab_size = keys.integer("vocab_size");
  s.seq_len = keys.integer("max_position_embeddings");
  s.head_dim = keys.has("head_dim") ? keys.integer("head_dim") : 0;
  s.shared_classifier = keys.boolean("tie_word_embeddings", false);
  s.rms_norm_eps = float(keys.number("rms_norm_eps", 1e-6));
  s.qkv_bias = qwen2;
  if (auto act = keys.string("hidden_act", "silu"); act != "silu")
    keys.fail("hidden_act", "is '" + act + "'; only 'silu' is supported");
  if (llama || mistral) {
    if (keys.boolean("attention_bias", false))
      keys.fail("attention_bias", "is true; biases on the attention of " + info.architecture +
                                      " are not supported");
    if (keys.boolean("mlp_bias", false))
      keys.fail("mlp_bias", "is true; biases on the MLP are not supported");
  }
  // Rotary embedding: transformers 5 writes rope_parameters {rope_theta, rope_type, ...};
  // earlier versions (most published models) rope_theta and rope_scaling at the top level.
  s.rope_theta = keys.number("rope_theta", 10000.0);
  const char* scaling_key = (*j).contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (keys.has(scaling_key)) {
    const auto& r = (*j)[scaling_key];
    if (!r.is_object()) {
      keys.fail(scaling_key, "must be an object, got " + r.dump());
    } else {
      key_reader rope{r, file + " (" + std::string{scaling_key} + ")"};
      s.rope_theta = rope.number("rope_theta", s.rope_theta);
      const std::string type = rope.string("rope_type", rope.string("type", "default"));
      if (type == "llama3") {
        s.rope_scaling.factor = rope.number("factor", 0.0);
        s.rope_scaling.low_freq_factor = rope.number("low_freq_factor", 1.0);
        s.rope_scaling.high_freq_factor = rope.number("high_freq_factor", 4.0);
        s.rope_scaling.original_max_position_embeddings =
            rope.integer("original_max_position_embeddings");
        if (s.rope_scaling.factor <= 0) rope.fail("factor", "missing");
        if (s.rope_scaling.high_freq_factor <= s.rope_scaling.low_freq_factor)
          rope.fail("high_freq_factor", "must be larger than low_freq_factor");
      } else if (type != "default") {
        rope.fail("rope_type", "is '" + type + "'; supported: 'default', 'llama3'");
      }
      if (auto err = rope.error()) return err;
    }
  }
  const bool windowed = mistral || (qwen2 && keys.boolean("use_sliding_window", false));
  if (windowed && keys.has("sliding_window")) info.sliding_window = keys.integer("sliding_window");
  if (auto err = keys.error()) return err;
  if (s.n_heads % s.n_kv_heads != 0)
    return make_error(ec::bad_file, file + ": key 'num_attention_heads' (" +
                                        std::to_string(s.n_heads) +
                                        ") is not a multiple of 'num_key_value_heads' (" +
                                        std::to_string(s.n_kv_heads) + ")");
  if (s.head_dim == 0 && s.dim % s.n_heads != 0)
    return make_error(ec::bad_file, file + ": key 'hidden_size' is not a multiple of "
                                           "'num_attention_heads' and there is no 'head_dim'");
  if (s.head_size() % 2 != 0)
    return make_error(ec::bad_file, file + ": the head size " + std::to_string(s.head_size()) +
                                        " is odd (key 'head_dim' or 'hidden_size')");
  auto ids = end_ids_of(*j, file);
  if (!ids) return ids.error();
  info.end_ids = std::move(*ids);
  const std::string generation = dir + "/generation_config.json";
  if (is_regular_file(generation)) {
    auto g = read_json(generation);
    if (!g) return g.error();
    auto gen_ids = end_ids_of(*g, generation);
    if (!gen_ids) return gen_ids.error();
    if (!gen_ids->empty()) info.end_ids = std::move(*gen_ids);
  }
  for (auto id : info.end_ids)
    if (id >= s.vocab_size)
      return make_error(ec::bad_file, dir + ": eos_token_id " + std::to_string(id) +
                                          " is outside the vocabulary of " +
                                          std::to_string(s.vocab_size));
  info.tokenizer = dir + "/tokenizer.json";
  return info;
}

error check_sliding_window(const model_info& info, int32_t context) {
  if (info.sliding_window > 0 && info.sliding_window < context)
    return make_error(ec::bad_config,
                      info.path + "/config.json: key 'sliding_window' is " +
                          std::to_string(info.sliding_window) + ", smaller than the context of " +
                          std::to_string(context) + " tokens; Conveyor computes full attention "
                          "only, so set the executors' context to at most " +
                          std::to_string(info.sliding_window));
  return {};
}

}  // namespace conveyor::model
