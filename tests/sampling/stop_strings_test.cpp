// Stop-string tests: split across chunks, at the very start, overlapping prefixes, several stop
// strings, and the same result however the text is cut into chunks.
#include "sampling/stop_strings.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conveyor::sampling {

namespace {

/// What a stream emits in total when `text` is fed in chunks of `chunk_size` bytes.
struct outcome {
  std::string emitted;
  bool stopped;
  std::string matched;
};

outcome run(const std::vector<std::string>& stops, const std::string& text, size_t chunk_size) {
  stop_string_matcher matcher{stops};
  outcome out;
  for (size_t pos = 0; pos < text.size(); pos += chunk_size)
    out.emitted += matcher.push(std::string_view{text}.substr(pos, chunk_size));
  out.emitted += matcher.flush();
  out.stopped = matcher.stopped();
  out.matched = matcher.matched();
  return out;
}

}  // namespace

TEST(stop_string_matcher, passes_text_through_without_stop_strings) {
  stop_string_matcher matcher{{}};
  EXPECT_EQ(matcher.push("Once upon"), "Once upon");
  EXPECT_EQ(matcher.push(" a time"), " a time");
  EXPECT_EQ(matcher.flush(), "");
  EXPECT_FALSE(matcher.stopped());
}

TEST(stop_string_matcher, ignores_empty_stop_strings) {
  stop_string_matcher matcher{{"", ""}};
  EXPECT_EQ(matcher.push("abc"), "abc");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.held_bytes(), 0u);
}

TEST(stop_string_matcher, stop_string_split_across_chunks) {
  stop_string_matcher matcher{{"The end"}};
  EXPECT_EQ(matcher.push("They slept. The e"), "They slept. ");
  EXPECT_EQ(matcher.held_bytes(), 5u);
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("nd"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "The end");
  EXPECT_EQ(matcher.push(" more text"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(stop_string_matcher, held_text_is_released_when_it_diverges) {
  stop_string_matcher matcher{{"xyz"}};
  EXPECT_EQ(matcher.push("ax"), "a");
  EXPECT_EQ(matcher.push("y"), "");
  EXPECT_EQ(matcher.push("q"), "xyq");
  EXPECT_EQ(matcher.push("x"), "");
  EXPECT_EQ(matcher.flush(), "x");
  EXPECT_FALSE(matcher.stopped());
}

TEST(stop_string_matcher, stop_string_at_the_very_start) {
  stop_string_matcher matcher{{"STOP"}};
  EXPECT_EQ(matcher.push("STOP here"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "");
  stop_string_matcher split{{"STOP"}};
  EXPECT_EQ(split.push("S"), "");
  EXPECT_EQ(split.push("TO"), "");
  EXPECT_EQ(split.push("P"), "");
  EXPECT_TRUE(split.stopped());
}

TEST(stop_string_matcher, overlapping_prefixes) {
  // "aaab" holds "aa" after the third "a": the stop string "aab" may start at either of them.
  stop_string_matcher matcher{{"aab"}};
  EXPECT_EQ(matcher.push("a"), "");
  EXPECT_EQ(matcher.push("a"), "");
  EXPECT_EQ(matcher.push("a"), "a");
  EXPECT_EQ(matcher.held_bytes(), 2u);
  EXPECT_EQ(matcher.push("b"), "");
  EXPECT_TRUE(matcher.stopped());
  // A stop string that overlaps itself: "abab" in "abababX".
  EXPECT_EQ(run({"abab"}, "abaabababX", 1).emitted, "aba");
  EXPECT_EQ(run({"abab"}, "ababa", 2).emitted, "");
}

TEST(stop_string_matcher, several_stop_strings) {
  stop_string_matcher matcher{{"\n\n", "END", "Lily"}};
  EXPECT_EQ(matcher.push("Tom ran.\n"), "Tom ran.");
  EXPECT_EQ(matcher.push("Then EN"), "\nThen ");
  EXPECT_EQ(matcher.push("D of story"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "END");
  // The first one in the text wins, whichever comes first in the list.
  const auto first = run({"Lily", "\n\n"}, "One day.\n\nLily played.", 100);
  EXPECT_EQ(first.emitted, "One day.");
  EXPECT_EQ(first.matched, "\n\n");
}

TEST(stop_string_matcher, the_first_stop_string_to_complete_wins) {
  // "bc" completes before "abcd" does, whether the text comes at once or byte by byte.
  for (size_t chunk : {1, 2, 3, 4}) {
    const auto out = run({"abcd", "bc"}, "xabcd", chunk);
    EXPECT_EQ(out.emitted, "xa") << chunk;
    EXPECT_EQ(out.matched, "bc") << chunk;
  }
  // Of two that end together, the longer one (it starts first).
  EXPECT_EQ(run({"c", "bc"}, "abc", 3).emitted, "a");
}

TEST(stop_string_matcher, the_result_does_not_depend_on_chunking) {
  const std::vector<std::vector<std::string>> stop_sets{{"The end"}, {"aab", "b"}, {"\n\n", "END"},
                                                        {"abab"},    {"é", "😀!"},  {"zzz"}};
  const std::vector<std::string> texts{
      "They slept. The end.",   "aaaab", "x\n\nyEND", "abaabababab", "café 😀!", "no stop here",
      "The en The end The end", ""};
  for (const auto& stops : stop_sets) {
    for (const auto& text : texts) {
      const auto whole = run(stops, text, text.size() + 1);
      for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
        const auto cut = run(stops, text, chunk);
        EXPECT_EQ(cut.emitted, whole.emitted) << text << " chunk " << chunk;
        EXPECT_EQ(cut.stopped, whole.stopped) << text << " chunk " << chunk;
        EXPECT_EQ(cut.matched, whole.matched) << text << " chunk " << chunk;
      }
      if (!whole.stopped) {
        EXPECT_EQ(whole.emitted, text);
      }
    }
  }
}

TEST(stop_string_matcher, unarmed_it_stops_on_nothing_but_finds_what_ends_after_arm) {
  // "END" whole before arm() is text; "EN" held back; "D" after arm() completes "END".
  stop_string_matcher m{{"END"}, false};
  std::string out = m.push("aEND b");
  out += m.push("EN");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(out, "aEND b");
  EXPECT_EQ(m.held_bytes(), 2u);
  m.arm();
  out += m.push("D!");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  EXPECT_EQ(out, "aEND b");
  // Unarmed and never armed, the text comes out whole.
  stop_string_matcher never{{"END"}, false};
  std::string whole = never.push("xEN");
  whole += never.push("Dy");
  whole += never.flush();
  EXPECT_EQ(whole, "xENDy");
  EXPECT_FALSE(never.stopped());
}

}  // namespace conveyor::sampling
