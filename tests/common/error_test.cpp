#include "common/error.hpp"

#include <gtest/gtest.h>

namespace conveyor {

TEST(error, carries_code_and_message) {
  auto err = make_error(ec::prompt_too_long, "prompt has 600 tokens, context is 512");
  EXPECT_EQ(code_of(err), ec::prompt_too_long);
  EXPECT_EQ(message_of(err), "prompt has 600 tokens, context is 512");
  EXPECT_STREQ(to_string(code_of(err)), "prompt_too_long");
}

TEST(error, no_error_is_none) {
  caf::error err;
  EXPECT_EQ(code_of(err), ec::none);
  EXPECT_EQ(message_of(err), "");
}

TEST(error, expected_carries_error) {
  expected<int> x = make_error(ec::bad_file, "model.bin: too short");
  ASSERT_FALSE(x);
  EXPECT_EQ(message_of(x.error()), "model.bin: too short");
}

}  // namespace conveyor
