// The boundary between Conveyor's plain errors and CAF's: what an actor hands to CAF comes back
// with the same code and message, and CAF's own errors become internal ones.
#include "actors/caf_error.hpp"

#include <string>

#include <gtest/gtest.h>
#include <caf/all.hpp>

namespace conveyor {

namespace {

constexpr ec every_code[] = {
    ec::bad_request,   ec::prompt_too_long, ec::rejected_queue_full,
    ec::expired,       ec::cancelled,       ec::executor_lost,
    ec::shutting_down, ec::bad_file,        ec::bad_config,
    ec::model_failure, ec::internal,
};

}  // namespace

TEST(caf_error, round_trip_keeps_code_and_message) {
  for (auto code : every_code) {
    const auto err = make_error(code, std::string{"what went wrong with "} + to_string(code));
    const caf::error converted = to_caf_error(err);
    ASSERT_TRUE(converted) << to_string(code);
    EXPECT_EQ(converted.category(), caf::atom("conveyor"));
    EXPECT_EQ(converted.code(), static_cast<uint8_t>(code));
    EXPECT_EQ(from_caf_error(converted), err) << to_string(code);
  }
}

TEST(caf_error, round_trip_keeps_an_empty_message) {
  const error err{ec::cancelled, ""};
  EXPECT_EQ(from_caf_error(to_caf_error(err)), err);
}

TEST(caf_error, no_error_stays_no_error) {
  EXPECT_FALSE(to_caf_error(error{}));
  EXPECT_FALSE(from_caf_error(caf::error{}));
  EXPECT_EQ(code_of(from_caf_error(caf::error{})), ec::none);
}

TEST(caf_error, conveyor_error_without_message_gets_the_code_name) {
  const caf::error bare{static_cast<uint8_t>(ec::expired), caf::atom("conveyor")};
  EXPECT_EQ(from_caf_error(bare), make_error(ec::expired, "expired"));
}

TEST(caf_error, errors_of_caf_become_internal) {
  const caf::error lost = caf::make_error(caf::sec::request_timeout);
  const auto err = from_caf_error(lost);
  EXPECT_EQ(code_of(err), ec::internal);
  EXPECT_NE(message_of(err).find("request_timeout"), std::string::npos) << message_of(err);
}

TEST(caf_error, the_actor_system_renders_code_and_message) {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system system{cfg};
  const auto err = make_error(ec::prompt_too_long, "the prompt has 600 tokens");
  EXPECT_EQ(system.render(to_caf_error(err)), "prompt_too_long: the prompt has 600 tokens");
  EXPECT_EQ(system.render(to_caf_error(err)), to_string(err));
}

TEST(caf_error, an_actor_replying_with_an_error_is_heard_with_code_and_message) {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system system{cfg};
  auto refuser = system.spawn([]() -> caf::behavior {
    return {[](int32_t tokens) -> caf::result<int32_t> {
      if (tokens > 512)
        return to_caf_error(
            make_error(ec::prompt_too_long,
                       "the prompt has " + std::to_string(tokens) + " tokens, the context 512"));
      return tokens;
    }};
  });
  caf::scoped_actor self{system};
  error heard;
  int32_t answer = 0;
  self->request(refuser, caf::infinite, int32_t{600})
      .receive([&](int32_t x) { answer = x; },
               [&](caf::error& err) { heard = from_caf_error(err); });
  EXPECT_EQ(answer, 0);
  EXPECT_EQ(heard, make_error(ec::prompt_too_long, "the prompt has 600 tokens, the context 512"));
  self->request(refuser, caf::infinite, int32_t{12})
      .receive([&](int32_t x) { answer = x; },
               [&](caf::error& err) { ADD_FAILURE() << system.render(err); });
  EXPECT_EQ(answer, 12);
  self->send_exit(refuser, caf::exit_reason::user_shutdown);
}

}  // namespace conveyor
