// PCRE2 behind model::hf::regex.
#include "model/hf/regex.hpp"

#include <pcre2.h>

namespace conveyor::model::hf {

struct regex::compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~compiled() { pcre2_code_free(code); }
};

namespace {

/// Match data of one thread, big enough for the whole-match pair (all find() reads).
pcre2_match_data* thread_match_data() {
  struct holder {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~holder() { pcre2_match_data_free(data); }
  };
  thread_local holder h;
  return h.data;
}

}  // namespace

expected<regex> regex::compile(const std::string& pattern, const std::string& origin) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return make_error(ec::bad_file, origin + ": regex '" + pattern + "' does not compile at " +
                                        std::to_string(error_offset) + ": " +
                                        reinterpret_cast<const char*>(message));
  }
  auto c = std::make_shared<compiled>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  regex out;
  out.code_ = std::move(c);
  out.pattern_ = pattern;
  return out;
}

bool regex::find(std::string_view text, size_t start, size_t& match_begin,
                 size_t& match_end) const {
  auto* data = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The subject was checked for valid UTF-8 by the caller.
  const int rc = code_->jit
                     ? pcre2_jit_match(code_->code, subject, text.size(), start, 0, data, nullptr)
                     : pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                   data, nullptr);
  if (rc < 0) return false;  // PCRE2_ERROR_NOMATCH, or a limit hit: treat as no match
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  match_begin = ovector[0];
  match_end = ovector[1];
  return true;
}

}  // namespace conveyor::model::hf
