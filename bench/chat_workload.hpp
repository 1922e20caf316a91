// Chat workloads: conversations replayed through /v1/chat/completions, each turn sent with the
// conversation so far (the replies the server gave included). Their fixed parts are made from a
// seed, or loaded from and saved to JSONL (see workloads/README.md for the format).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace conveyor::bench {

// -- conversations -------------------------------------------------------------------------------

/// One conversation of a chat workload: its first turn is sent at t0 + `arrival_s`, each later
/// turn once the reply to the one before has come back (and the think time has passed). The
/// replies are not part of it: they are the server's, filled in while it runs.
struct conversation {
  /// Names the conversation in reports ("c0001").
  std::string id;
  /// Seconds after the start of the replay.
  double arrival_s = 0;
  /// The system message opening every turn's request; none when empty.
  std::string system_prompt;
  /// One user message per turn, in order (at least one).
  std::vector<std::string> user_messages;
  /// The generation limit of every turn.
  int32_t max_tokens = 64;
};

/// A chat workload: conversations in arrival order. A workload of independent requests is one of
/// single-turn conversations.
using chat_workload = std::vector<conversation>;

// -- generation ----------------------------------------------------------------------------------

/// What `generate_chat_workload` makes.
struct chat_workload_spec {
  /// Mean conversation arrivals per second (Poisson); infinity starts every one at 0.0.
  double rate = 1;
  /// Number of conversations.
  std::size_t conversations = 32;
  /// Turns (user messages) of each conversation.
  std::size_t turns = 4;
  /// Seeds every random choice: the same spec gives the same workload.
  uint64_t seed = 0;
  /// Length of the system prompt in tokens (about: see `make_text`); 0 sends no system message.
  int32_t system_tokens = 400;
  /// Each conversation its own system prompt; otherwise all share one.
  bool distinct_system = false;
  /// Words of each user message, uniform in [min_user_words, max_user_words].
  int32_t min_user_words = 8;
  int32_t max_user_words = 24;
  /// max_tokens of every turn.
  int32_t max_tokens = 64;
};

/// The mean conversation arrival rate: (n - 1) / last arrival; infinity when all start at 0.
double rate_of(const chat_workload& conversations);

/// Turns over all conversations.
std::size_t turns_of(const chat_workload& conversations);

/// Checks a spec's ranges; names the flag of the first bad one.
error validate(const chat_workload_spec& spec);

/// Makes a chat workload: exponential gaps of mean 1 / rate with the first conversation at 0.0,
/// system prompts and user messages of words from the children's-story vocabulary, ids "c0000",
/// "c0001", ... Deterministic for a spec.
chat_workload generate_chat_workload(const chat_workload_spec& spec);

// -- JSONL ---------------------------------------------------------------------------------------

/// One JSON object per line: {"id", "arrival_s", "system_prompt", "user_messages",
/// "max_tokens"}. `id` may be absent (the line number is used), `system_prompt` too (none);
/// blank lines are skipped. Errors name `source` and the line.
expected<chat_workload> parse_chat_workload(std::istream& in,
                                            const std::string& source = "workload");

/// Reads a JSONL file.
expected<chat_workload> load_chat_workload(const std::string& path);

/// The workload as JSONL, one conversation per line.
std::string to_jsonl(const chat_workload& conversations);

/// Writes `to_jsonl` to `path`.
error save_chat_workload(const chat_workload& conversations, const std::string& path);

}  // namespace conveyor::bench
