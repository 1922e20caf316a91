// Internal: `POST /tokenize` and `POST /detokenize` as vLLM names them, answered at once from the
// backend's tokenizer (no pipeline round trip).
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "chat/template_source.hpp"
#include "server/router.hpp"

namespace conveyor::server::detail {

/// Answers a `/tokenize` body: {"prompt": text, "add_special_tokens": bool = true} or
/// {"messages": [...], "add_generation_prompt": bool = true, "add_special_tokens": bool = false}
/// (rendered with `tmpl`, tokenized as a chat completion's prompt is: adding no special tokens
/// unless asked) with {"count", "max_model_len", "tokens"}; a 400 naming the field for a bad
/// body, a 400 saying `chat_refusal` for messages without a template, 501 when the backend has
/// no tokenizer.
std::variant<std::string, error_answer> answer_tokenize(
    std::string_view body, const completion_backend& backend, const chat::chat_template* tmpl,
    std::string_view chat_refusal = chat::no_chat_template_refusal);

/// Answers a `/detokenize` body {"tokens": [ids within the vocabulary]} with {"prompt": text}.
std::variant<std::string, error_answer> answer_detokenize(std::string_view body,
                                                          const completion_backend& backend);

}  // namespace conveyor::server::detail
