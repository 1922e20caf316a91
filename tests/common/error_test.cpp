#include "common/error.hpp"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conveyor {

namespace {

/// Fails on odd input, the way a loader fails on a bad file.
expected<int> half_of(int x) {
  if (x % 2 != 0) return make_error(ec::bad_request, std::to_string(x) + " is odd");
  return x / 2;
}

/// Passes an error on with `if (!x) return x.error();`, as the loaders do.
expected<int> quarter_of(int x) {
  auto half = half_of(x);
  if (!half) return half.error();
  return half_of(*half);
}

expected<std::unique_ptr<std::string>> boxed(const char* text) {
  if (text == nullptr) return make_error(ec::bad_file, "no text");
  return std::make_unique<std::string>(text);
}

}  // namespace

TEST(error, carries_code_and_message) {
  auto err = make_error(ec::prompt_too_long, "prompt has 600 tokens, context is 512");
  EXPECT_TRUE(err);
  EXPECT_EQ(code_of(err), ec::prompt_too_long);
  EXPECT_EQ(message_of(err), "prompt has 600 tokens, context is 512");
  EXPECT_EQ(err.code, ec::prompt_too_long);
  EXPECT_EQ(err.message, "prompt has 600 tokens, context is 512");
  EXPECT_STREQ(to_string(code_of(err)), "prompt_too_long");
}

TEST(error, no_error_is_none) {
  error err;
  EXPECT_FALSE(err);
  EXPECT_TRUE(!err);
  EXPECT_EQ(code_of(err), ec::none);
  EXPECT_EQ(message_of(err), "");
  EXPECT_EQ(to_string(err), "none");
}

TEST(error, renders_code_and_message) {
  auto err = make_error(ec::bad_config, "conveyor.toml:3: server.port: must be at most 65535");
  EXPECT_EQ(to_string(err), "bad_config: conveyor.toml:3: server.port: must be at most 65535");
  std::ostringstream out;
  out << err;
  EXPECT_EQ(out.str(), "bad_config: conveyor.toml:3: server.port: must be at most 65535");
  EXPECT_EQ(to_string(error{ec::cancelled, ""}), "cancelled");
}

TEST(error, compares_code_and_message) {
  EXPECT_EQ(make_error(ec::bad_file, "a"), make_error(ec::bad_file, "a"));
  EXPECT_NE(make_error(ec::bad_file, "a"), make_error(ec::bad_config, "a"));
  EXPECT_NE(make_error(ec::bad_file, "a"), make_error(ec::bad_file, "b"));
  EXPECT_EQ(error{}, error{});
}

TEST(error, function_returning_error_reports_success_as_false) {
  auto check = [](int x) -> error {
    if (x < 0) return make_error(ec::bad_request, "negative");
    return {};
  };
  EXPECT_FALSE(check(1));
  if (auto err = check(-1))
    EXPECT_EQ(message_of(err), "negative");
  else
    ADD_FAILURE() << "check(-1) returned no error";
}

TEST(expected, carries_error) {
  expected<int> x = make_error(ec::bad_file, "model.bin: too short");
  ASSERT_FALSE(x);
  EXPECT_TRUE(!x);
  EXPECT_EQ(code_of(x.error()), ec::bad_file);
  EXPECT_EQ(message_of(x.error()), "model.bin: too short");
}

TEST(expected, carries_value) {
  expected<std::vector<int>> x = std::vector<int>{1, 2, 3};
  ASSERT_TRUE(x);
  EXPECT_FALSE(!x);
  EXPECT_EQ(x->size(), 3u);
  EXPECT_EQ((*x)[2], 3);
  EXPECT_EQ(x.value(), (std::vector<int>{1, 2, 3}));
  x->push_back(4);
  EXPECT_EQ(x->size(), 4u);
}

TEST(expected, converts_the_value_it_is_made_from) {
  expected<std::string> x = "literal";
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, "literal");
  expected<double> y = 2;
  ASSERT_TRUE(y);
  EXPECT_EQ(*y, 2.0);
}

TEST(expected, passes_errors_on) {
  auto good = quarter_of(12);
  ASSERT_TRUE(good);
  EXPECT_EQ(*good, 3);
  auto first = quarter_of(7);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error(), make_error(ec::bad_request, "7 is odd"));
  auto second = quarter_of(6);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error(), make_error(ec::bad_request, "3 is odd"));
}

TEST(expected, holds_move_only_values) {
  auto x = boxed("Once upon a time");
  ASSERT_TRUE(x);
  EXPECT_EQ(**x, "Once upon a time");
  std::unique_ptr<std::string> taken = std::move(*x);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, "Once upon a time");
  auto moved = boxed("moved");
  auto owner = *std::move(moved);
  EXPECT_EQ(*owner, "moved");
  auto none = boxed(nullptr);
  ASSERT_FALSE(none);
  EXPECT_EQ(message_of(none.error()), "no text");
}

TEST(expected, moves_the_error_out) {
  expected<std::unique_ptr<int>> x = make_error(ec::model_failure, "out of memory");
  error err = std::move(x).error();
  EXPECT_EQ(err, make_error(ec::model_failure, "out of memory"));
}

TEST(expected, accessing_the_missing_side_throws) {
  expected<int> failed = make_error(ec::internal, "boom");
  EXPECT_THROW(failed.value(), std::bad_variant_access);
  expected<int> fine = 1;
  EXPECT_THROW(fine.error(), std::bad_variant_access);
}

TEST(expected_void, success_or_error) {
  expected<void> ok;
  EXPECT_TRUE(ok);
  EXPECT_FALSE(ok.error());
  expected<void> failed = make_error(ec::bad_file, "tokenizer.json: unknown normalizer");
  ASSERT_FALSE(failed);
  EXPECT_EQ(code_of(failed.error()), ec::bad_file);
  EXPECT_EQ(message_of(failed.error()), "tokenizer.json: unknown normalizer");
  expected<void> from_no_error = error{};
  EXPECT_TRUE(from_no_error);
}

}  // namespace conveyor
