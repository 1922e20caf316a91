#include "grammar/grammar_compiler.hpp"

#include <exception>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include <xgrammar/compiler.h>
#include <xgrammar/tokenizer_info.h>

#include "grammar/bounded_runner.hpp"
#include "grammar/choice.hpp"
#include "grammar/compiled_grammar_impl.hpp"

namespace conveyor::grammar {

namespace {

// The vocabulary as xgrammar reads it (VocabType::RAW): each id's bytes in generated text;
// "" marks ids that never appear inside a format (control tokens, ids past the tokenizer's).
std::vector<std::string> raw_vocabulary(const tokenizers::tokenizer& tok, int32_t vocab_size) {
  std::vector<std::string> vocab(static_cast<std::size_t>(vocab_size));
  const int32_t n = std::min(vocab_size, tok.vocab_size());
  for (int32_t id = 0; id < n; ++id) vocab[std::size_t(id)] = tok.token_bytes(id);
  return vocab;
}

// xgrammar's message without the time, file and line it prefixes to it.
std::string engine_message(const std::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    auto file = m.find(".cc:");
    if (file == std::string::npos) file = m.find(".h:");
    if (file != std::string::npos) {
      auto colon = m.find(": ", file);
      if (colon != std::string::npos) m = m.substr(colon + 2);
    }
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

const char* kind_name(sampling::structured_output::kind k) {
  using kind = sampling::structured_output::kind;
  switch (k) {
    case kind::json_schema:
      return "the JSON schema";
    case kind::regex:
      return "the regular expression";
    case kind::choice:
      return "the choice list";
    case kind::grammar:
      return "the grammar";
    case kind::none:
      break;
  }
  return "the constraint";
}

}  // namespace

struct grammar_compiler::impl {
  impl(const tokenizers::tokenizer& tok, int32_t vocab, compile_limits l)
      : limits(l),
        vocab_size(vocab),
        // No stop tokens of its own: each matcher gets its sequence's end ids.
        // Its own cache off: ours (below) answers a repeated format without a thread.
        compiler(xgrammar::TokenizerInfo(raw_vocabulary(tok, vocab), xgrammar::VocabType::RAW,
                                         vocab, std::vector<int32_t>{}),
                 l.threads, false),
        runner(l.timeout, l.max_compiling) {}

  /// The compiled format of `key`, most recently used first; null when not cached.
  std::shared_ptr<const compiled_grammar> cached(const std::string& key) {
    std::lock_guard<std::mutex> lock{cache_mutex};
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    lru.splice(lru.begin(), lru, it->second);
    return it->second->second;
  }

  /// Keeps `g` under `key`, dropping the least recently used beyond the cache's bytes (never
  /// the one just kept).
  void keep(const std::string& key, std::shared_ptr<const compiled_grammar> g) {
    std::lock_guard<std::mutex> lock{cache_mutex};
    if (index.count(key)) return;
    bytes += int64_t(g->memory_bytes());
    lru.emplace_front(key, std::move(g));
    index.emplace(key, lru.begin());
    while (bytes > limits.cache_bytes && lru.size() > 1) {
      bytes -= int64_t(lru.back().second->memory_bytes());
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }

  compile_limits limits;
  int32_t vocab_size;
  /// Thread-safe.
  xgrammar::GrammarCompiler compiler;
  bounded_runner runner;
  std::mutex cache_mutex;
  std::list<std::pair<std::string, std::shared_ptr<const compiled_grammar>>> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  int64_t bytes = 0;
};

grammar_compiler::grammar_compiler(const tokenizers::tokenizer& tokenizer, int32_t vocab_size,
                                   compile_limits limits)
    : impl_(std::make_shared<impl>(tokenizer, vocab_size, limits)) {}

grammar_compiler::~grammar_compiler() = default;

int64_t grammar_compiler::cache_bytes() const {
  std::lock_guard<std::mutex> lock{impl_->cache_mutex};
  return impl_->bytes;
}

expected<std::shared_ptr<const compiled_grammar>> grammar_compiler::compile(
    const sampling::structured_output& c) const {
  using kind = sampling::structured_output::kind;
  const std::string field = "'" + c.field + "'";
  auto refuse = [&](const std::string& why) {
    return make_error(ec::bad_request, field + ": " + why);
  };
  const auto& l = impl_->limits;
  if (c.type == kind::none) return refuse("no constraint to compile");
  std::size_t bytes = c.text.size();
  if (c.type == kind::choice) {
    if (c.choices.empty()) return refuse("the choice list is empty");
    if (c.choices.size() > l.max_choices)
      return refuse("the choice list has " + std::to_string(c.choices.size()) +
                    " strings, more than the " + std::to_string(l.max_choices) + " allowed");
    bytes = 0;
    for (const auto& s : c.choices) bytes += s.size();
  }
  if (bytes > l.max_spec_bytes)
    return refuse(std::string{kind_name(c.type)} + " has " + std::to_string(bytes) +
                  " bytes, more than the " + std::to_string(l.max_spec_bytes) +
                  " allowed (structured_outputs.max_spec_bytes)");
  // The cache's key: the kind and the source, each choice with its length.
  std::string key(1, char(c.type));
  key += c.text;
  for (const auto& s : c.choices) key += std::to_string(s.size()) + ":" + s;
  if (auto hit = impl_->cached(key)) return hit;
  // Compiled on a thread of the runner; the impl outlives a compilation past its time limit,
  // whose result still enters the cache.
  auto self = impl_;
  const auto spec = c;
  std::function<expected<std::shared_ptr<const compiled_grammar>>()> job =
      [self, spec, key,
       refuse_prefix = field]() -> expected<std::shared_ptr<const compiled_grammar>> {
    try {
      auto p = std::make_shared<compiled_grammar::impl>(compiled_grammar::impl{
          [&] {
            switch (spec.type) {
              case kind::json_schema:
                // Compact, as json.dumps writes: no whitespace runs for a model to get lost in.
                return self->compiler.CompileJSONSchema(spec.text, false);
              case kind::regex:
                return self->compiler.CompileRegex(spec.text);
              case kind::choice:
                return self->compiler.CompileGrammar(choice_ebnf(spec.choices));
              case kind::grammar:
                return self->compiler.CompileGrammar(spec.text);
              case kind::none:
                break;
            }
            throw std::invalid_argument("no constraint");
          }(),
          self->vocab_size});
      auto g = std::make_shared<const compiled_grammar>(std::move(p));
      self->keep(key, g);
      return g;
    } catch (const std::exception& e) {
      return make_error(ec::bad_request, refuse_prefix + ": " + kind_name(spec.type) +
                                             " cannot be compiled: " + engine_message(e));
    }
  };
  return impl_->runner.run<std::shared_ptr<const compiled_grammar>>(
      "'" + c.field + "': compiling " + kind_name(c.type), std::move(job));
}

std::size_t compiled_grammar::memory_bytes() const {
  return impl_->compiled.MemorySizeBytes();
}

}  // namespace conveyor::grammar
