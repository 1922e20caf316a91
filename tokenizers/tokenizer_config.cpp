// Reading tokenizer_config.json with nlohmann::json.
#include "tokenizers/tokenizer_config.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizers/gguf_tokenizer.hpp"

namespace conveyor::tokenizers {

namespace {

using json = nlohmann::json;

/// Reads a token key: a string, {"content": string} (AddedToken), or null/absent.
expected<std::string> token_text(const json& doc, const char* key, const std::string& origin) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::string{};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return make_error(ec::bad_config, origin + ": key '" + key +
                                        "' must be a string or an object with a string 'content'");
}

expected<std::optional<bool>> flag(const json& doc, const char* key, const std::string& origin) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::optional<bool>{};
  if (!it->is_boolean())
    return make_error(ec::bad_config, origin + ": key '" + key + "' must be true or false");
  return std::optional<bool>{it->get<bool>()};
}

using named_templates = std::vector<std::pair<std::string, std::string>>;

expected<named_templates> chat_templates(const json& doc, const std::string& origin) {
  auto it = doc.find("chat_template");
  if (it == doc.end() || it->is_null()) return named_templates{};
  if (it->is_string()) return named_templates{{"default", it->get<std::string>()}};
  const std::string bad = origin +
                          ": key 'chat_template' must be a string or a list of "
                          "{\"name\", \"template\"} objects";
  if (!it->is_array()) return make_error(ec::bad_config, bad);
  named_templates out;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string())
      return make_error(ec::bad_config, bad);
    out.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
  }
  return out;
}

std::filesystem::path folder_of(const std::string& tokenizer_path) {
  std::error_code err;
  const std::filesystem::path given{tokenizer_path};
  return std::filesystem::is_directory(given, err) ? given : given.parent_path();
}

expected<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) return make_error(ec::bad_file, path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

expected<tokenizer_config> parse_tokenizer_config(const std::string& text,
                                                  const std::string& origin) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error(ec::bad_file, origin + ": not valid JSON");
  if (!doc.is_object()) return make_error(ec::bad_file, origin + ": not a JSON object");
  tokenizer_config out;
  struct token_key {
    const char* key;
    std::string* field;
  };
  for (auto [key, field] :
       {token_key{"bos_token", &out.bos_token}, token_key{"eos_token", &out.eos_token},
        token_key{"unk_token", &out.unk_token}, token_key{"pad_token", &out.pad_token}}) {
    auto value = token_text(doc, key, origin);
    if (!value) return value.error();
    *field = std::move(*value);
  }
  auto add_bos = flag(doc, "add_bos_token", origin);
  if (!add_bos) return add_bos.error();
  out.add_bos_token = *add_bos;
  auto add_eos = flag(doc, "add_eos_token", origin);
  if (!add_eos) return add_eos.error();
  out.add_eos_token = *add_eos;
  auto templates = chat_templates(doc, origin);
  if (!templates) return templates.error();
  out.chat_templates = std::move(*templates);
  if (auto it = doc.find("model_max_length"); it != doc.end() && it->is_number()) {
    const double value = it->get<double>();
    if (value >= 1 && value < 1e15) out.model_max_length = static_cast<long long>(value);
  }
  return out;
}

expected<tokenizer_config> read_tokenizer_config(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return parse_tokenizer_config(*text, path);
}

expected<std::optional<tokenizer_config>> tokenizer_config_beside(const std::string& tokenizer_path) {
  if (is_gguf_path(tokenizer_path)) {
    auto config = read_gguf_tokenizer_config(tokenizer_path);
    if (!config) return config.error();
    return std::optional<tokenizer_config>{std::move(*config)};
  }
  std::error_code err;
  const auto path = (folder_of(tokenizer_path) / "tokenizer_config.json").string();
  if (!std::filesystem::is_regular_file(path, err)) return std::optional<tokenizer_config>{};
  auto read = read_tokenizer_config(path);
  if (!read) return read.error();
  return std::optional<tokenizer_config>{std::move(*read)};
}

expected<model_chat_templates> chat_templates_beside(const std::string& tokenizer_path) {
  namespace fs = std::filesystem;
  model_chat_templates out;
  if (is_gguf_path(tokenizer_path)) {
    auto config = read_gguf_tokenizer_config(tokenizer_path);
    if (!config) return config.error();
    out.templates = std::move(config->chat_templates);
    if (!out.templates.empty()) out.origin = tokenizer_path + ": tokenizer.chat_template";
    return out;
  }
  const auto folder = folder_of(tokenizer_path);
  std::error_code err;
  // Files first: transformers prefers them to the field (and save_pretrained now writes them).
  const auto file = folder / "chat_template.jinja";
  if (fs::is_regular_file(file, err)) {
    auto text = read_text(file);
    if (!text) return text.error();
    out.templates.emplace_back("default", std::move(*text));
    out.origin = file.string();
  }
  const auto more = folder / "additional_chat_templates";
  if (fs::is_directory(more, err)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator{more, err})
      if (entry.path().extension() == ".jinja" && fs::is_regular_file(entry.path(), err))
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      auto text = read_text(path);
      if (!text) return text.error();
      const auto name = path.stem().string();
      // A "default" here replaces chat_template.jinja's, as in transformers.
      out.templates.erase(std::remove_if(out.templates.begin(), out.templates.end(),
                                         [&](const auto& t) { return t.first == name; }),
                          out.templates.end());
      out.templates.emplace_back(name, std::move(*text));
    }
    if (!files.empty() && out.origin.empty()) out.origin = more.string() + "/";
  }
  if (!out.templates.empty()) return out;
  auto config = tokenizer_config_beside(tokenizer_path);
  if (!config) return config.error();
  if (*config && !(*config)->chat_templates.empty()) {
    out.templates = std::move((*config)->chat_templates);
    out.origin = (folder / "tokenizer_config.json").string();
  }
  return out;
}

}  // namespace conveyor::tokenizers
