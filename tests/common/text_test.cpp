// The shared byte-string helpers: linear-time search, replace_all, UTF-8 code points.
#include "common/text.hpp"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace conveyor {

namespace {

TEST(text_finder, finds_the_first_occurrence_at_or_after_from) {
  const text_finder finder{"ab"};
  EXPECT_EQ(finder.find("xxabyab", 0), 2u);
  EXPECT_EQ(finder.find("xxabyab", 3), 5u);
  EXPECT_EQ(finder.find("xxabyab", 6), std::string::npos);
  EXPECT_EQ(finder.find("", 0), std::string::npos);
  EXPECT_EQ(text_finder{"abc"}.find("ab", 0), std::string::npos);
  // Partial matches that fall back along the needle's borders.
  EXPECT_EQ(text_finder{"aab"}.find("aaab", 0), 1u);
  EXPECT_EQ(text_finder{"abab"}.find("abaabab", 0), 3u);
  EXPECT_EQ(text_finder{"abcabd"}.find("abcabcabd", 0), 3u);
}

TEST(text_finder, an_empty_needle_is_found_where_the_search_starts) {
  const text_finder finder{""};
  EXPECT_EQ(finder.find("abc", 0), 0u);
  EXPECT_EQ(finder.find("abc", 3), 3u);
  EXPECT_EQ(finder.find("abc", 4), std::string::npos);
}

TEST(text_finder, agrees_with_std_find_on_random_texts) {
  std::mt19937 random{7};
  const auto make = [&](std::size_t max_size) {
    std::string s(random() % (max_size + 1), 'a');
    for (auto& c : s) c = static_cast<char>('a' + random() % 3);
    return s;
  };
  for (int round = 0; round < 2000; ++round) {
    const auto text = make(40);
    const auto needle = make(5);
    const text_finder finder{needle};
    for (std::size_t from = 0; from <= text.size() + 1; ++from)
      ASSERT_EQ(finder.find(text, from), text.find(needle, from))
          << "'" << needle << "' in '" << text << "' from " << from;
  }
}

TEST(replace_all, replaces_every_occurrence_left_to_right_without_overlap) {
  std::string text = "a b  c";
  EXPECT_TRUE(replace_all(text, " ", "\xE2\x96\x81"));  // Metaspace's "▁"
  EXPECT_EQ(text,
            "a\xE2\x96\x81"
            "b\xE2\x96\x81\xE2\x96\x81"
            "c");
  text = "aaaaa";
  EXPECT_TRUE(replace_all(text, "aa", "b"));
  EXPECT_EQ(text, "bba");
  text = "<0x0A>x<0x0A>";
  EXPECT_TRUE(replace_all(text, "<0x0A>", ""));
  EXPECT_EQ(text, "x");
  text = "abc";
  EXPECT_TRUE(replace_all(text, "b", "bbb"));
  EXPECT_EQ(text, "abbbc");
}

TEST(replace_all, no_occurrence_and_an_empty_from_leave_the_text) {
  std::string text = "hello";
  EXPECT_TRUE(replace_all(text, "x", "y"));
  EXPECT_EQ(text, "hello");
  EXPECT_TRUE(replace_all(text, "", "y"));
  EXPECT_EQ(text, "hello");
  std::string empty;
  EXPECT_TRUE(replace_all(empty, "a", "b"));
  EXPECT_EQ(empty, "");
}

TEST(replace_all, replaces_at_most_max_count) {
  std::string text = "a.b.c.d";
  EXPECT_TRUE(replace_all(text, ".", "-", {2}));
  EXPECT_EQ(text, "a-b-c.d");
  EXPECT_TRUE(replace_all(text, ".", "-", {0}));
  EXPECT_EQ(text, "a-b-c.d");
}

TEST(replace_all, refuses_a_result_over_max_bytes_and_leaves_the_text) {
  std::string text = "a.b.c";
  replace_limits limits;
  limits.max_bytes = 8;
  EXPECT_FALSE(replace_all(text, ".", "---", limits));
  EXPECT_EQ(text, "a.b.c");
  limits.max_bytes = 9;
  EXPECT_TRUE(replace_all(text, ".", "---", limits));
  EXPECT_EQ(text, "a---b---c");
  // The limit holds for the text whether or not anything is replaced.
  std::string long_text(10, 'x');
  limits.max_bytes = 9;
  EXPECT_FALSE(replace_all(long_text, "y", "z", limits));
  EXPECT_FALSE(replace_all(long_text, "", "z", limits));
  limits.max_bytes = 10;
  EXPECT_TRUE(replace_all(long_text, "y", "z", limits));
}

TEST(utf8_code_points, counts_characters_of_any_length) {
  EXPECT_EQ(utf8_code_points(""), 0u);
  EXPECT_EQ(utf8_code_points("abc"), 3u);
  EXPECT_EQ(utf8_code_points("\xC3\xA9"), 1u);                  // é
  EXPECT_EQ(utf8_code_points("\xE6\x97\xA5\xE6\x9C\xAC"), 2u);  // 日本
  EXPECT_EQ(utf8_code_points("\xF0\x9F\x98\x80"), 1u);          // 😀
  EXPECT_EQ(utf8_code_points("a\xC3\xA9\xF0\x9F\x98\x80z"), 4u);
}

TEST(utf8_code_points, invalid_text_counts_every_byte_but_continuation_bytes) {
  EXPECT_EQ(utf8_code_points("\x80"), 0u);  // a stray continuation byte
  EXPECT_EQ(utf8_code_points("a\x80\xBF"
                             "b"),
            2u);                                    // two of them between letters
  EXPECT_EQ(utf8_code_points("\xE6\x97"), 1u);      // a truncated character
  EXPECT_EQ(utf8_code_points("\xFF\xFE"), 2u);      // bytes no UTF-8 has
  EXPECT_EQ(utf8_code_points("\xC3\xA9\xC3"), 2u);  // é, then a lone lead byte
}

}  // namespace

}  // namespace conveyor
