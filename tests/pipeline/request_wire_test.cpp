// A request's sampling fields through CAF's binary serialization, as a remote executor receives
// them: every field comes back, the seed whether it is set or absent.
#include <cstdint>
#include <optional>
#include <vector>

#include <gtest/gtest.h>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>

#include "pipeline/request.hpp"

using namespace conveyor;

namespace {

template <class T>
T round_trip(T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  EXPECT_FALSE(sink(x));
  T out;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_FALSE(source(out));
  EXPECT_EQ(source.remaining(), 0u);
  return out;
}

sampling::sampling_params every_field_set() {
  sampling::sampling_params p;
  p.max_tokens = 7;
  p.temperature = 0.25f;
  p.top_p = 0.5f;
  p.top_k = 3;
  p.seed = UINT64_MAX - 1;
  p.stop = {"\n", "END"};
  p.ignore_eos = true;
  p.logprobs = 2;
  p.prompt_logprobs = true;
  p.echo = true;
  p.presence_penalty = -1.5f;
  p.frequency_penalty = 0.75f;
  p.repetition_penalty = 1.25f;
  p.logit_bias = {{5, -100.0f}, {9, 2.5f}};
  p.min_tokens = 4;
  p.stop_token_ids = {1, 2};
  return p;
}

void expect_same(const sampling::sampling_params& a, const sampling::sampling_params& b) {
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.ignore_eos, b.ignore_eos);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.prompt_logprobs, b.prompt_logprobs);
  EXPECT_EQ(a.echo, b.echo);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  ASSERT_EQ(a.logit_bias.size(), b.logit_bias.size());
  for (std::size_t i = 0; i < a.logit_bias.size(); ++i) {
    EXPECT_EQ(a.logit_bias[i].id, b.logit_bias[i].id);
    EXPECT_EQ(a.logit_bias[i].bias, b.logit_bias[i].bias);
  }
  EXPECT_EQ(a.min_tokens, b.min_tokens);
  EXPECT_EQ(a.stop_token_ids, b.stop_token_ids);
}

}  // namespace

TEST(request_wire, every_sampling_field_of_a_sequence_request_arrives) {
  sequence_request req;
  req.id = 42;
  req.prompt = {1, 2, 3};
  req.params = every_field_set();
  req.priority = -2;
  const auto out = round_trip(req);
  EXPECT_EQ(out.id, 42u);
  EXPECT_EQ(out.prompt, req.prompt);
  EXPECT_EQ(out.priority, -2);
  expect_same(out.params, req.params);
}

TEST(request_wire, an_absent_seed_stays_absent_and_a_set_one_set) {
  generate_request req;
  req.prompt = "Once";
  ASSERT_FALSE(req.params.seed);
  EXPECT_FALSE(round_trip(req).params.seed);
  req.params.seed = 0;
  EXPECT_EQ(round_trip(req).params.seed, std::optional<uint64_t>{0});
  // A set seed read into a request whose seed was set keeps the new value; an absent one clears.
  sampling::sampling_params seeded;
  seeded.seed = 5;
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  sampling::sampling_params unseeded;
  ASSERT_FALSE(sink(unseeded));
  caf::binary_deserializer source{nullptr, buf};
  ASSERT_FALSE(source(seeded));
  EXPECT_FALSE(seeded.seed);
}

TEST(request_wire, the_fields_render_as_text) {
  auto text = caf::deep_to_string(every_field_set());
  EXPECT_NE(text.find("18446744073709551614"), std::string::npos) << text;
  EXPECT_NE(text.find("END"), std::string::npos) << text;
}
