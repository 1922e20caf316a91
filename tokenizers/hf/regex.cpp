// PCRE2 behind tokenizers::hf::regex.
#include "tokenizers/hf/regex.hpp"

#include <algorithm>
#include <limits>

#include <pcre2.h>

namespace conveyor::tokenizers::hf {

struct regex::compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~compiled() { pcre2_code_free(code); }
};

namespace {

/// What one thread's searches use: match data big enough for the whole-match pair (all find()
/// reads), a match context for the limits, and a JIT stack that grows to regex::max_jit_stack.
struct search_state {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, regex::max_jit_stack, nullptr);
  search_state() {
    // Without a stack of its own (allocation failed) JIT keeps its 32 KiB on the machine stack.
    if (context != nullptr && jit_stack != nullptr)
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~search_state() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  search_state(const search_state&) = delete;
  search_state& operator=(const search_state&) = delete;
};

search_state& thread_search_state() {
  thread_local search_state state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR message[256];
  if (pcre2_get_error_message(code, message, sizeof message) < 0) return std::to_string(code);
  return reinterpret_cast<const char*>(message);
}

}  // namespace

uint32_t regex::match_budget(size_t bytes) {
  constexpr uint64_t pcre2_default = 10'000'000;
  const uint64_t budget = pcre2_default + 2 * static_cast<uint64_t>(bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(budget, std::numeric_limits<uint32_t>::max()));
}

expected<regex> regex::compile(const std::string& pattern, const std::string& origin) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr)
    return make_error(ec::bad_file, origin + ": regex '" + pattern + "' does not compile at " +
                                        std::to_string(error_offset) + ": " +
                                        pcre2_message(error_code));
  auto c = std::make_shared<compiled>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  regex out;
  out.code_ = std::move(c);
  out.pattern_ = pattern;
  out.origin_ = origin;
  return out;
}

expected<bool> regex::find(std::string_view text, size_t start, size_t& match_begin,
                           size_t& match_end) const {
  auto& state = thread_search_state();
  if (state.data == nullptr || state.context == nullptr)
    return make_error(ec::internal,
                      origin_ + ": regex '" + pattern_ + "': no memory for PCRE2's match data");
  pcre2_set_match_limit(state.context, match_budget(text.size()));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The subject was checked for valid UTF-8 by the caller.
  const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), start, 0,
                                              state.data, state.context)
                            : pcre2_match(code_->code, subject, text.size(), start,
                                          PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    return make_error(ec::bad_request, origin_ + ": regex '" + pattern_ +
                                           "' cannot finish its search in a text of " +
                                           std::to_string(text.size()) +
                                           " bytes (PCRE2: " + pcre2_message(rc) + ")");
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  match_begin = ovector[0];
  match_end = ovector[1];
  return true;
}

}  // namespace conveyor::tokenizers::hf
