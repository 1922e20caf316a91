// The scheduler of one executor alone, without a model: admission into slots, the static batch
// that takes nothing else, the ends of a step boundary, the rows of each forward pass (prompt
// chunks, padding, shared prefills, decode tokens, rows of logits) and how a step moves
// sequences on.
#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/output_processor.hpp"
#include "pipeline/scheduler.hpp"
#include "tests/support/fake_tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;
using tok = test::fake_tokenizer;

namespace {

constexpr int32_t context = 64;
constexpr int32_t block_size = 8;

// The blocks of `sequences` sequences of the whole context, in blocks of 8 positions.
kv_cache_layout layout(int32_t sequences, bool prefix_caching = true) {
  return {block_size, sequences * context / block_size, prefix_caching};
}

class scheduler_test : public ::testing::Test {
 protected:
  // A sequence as the executor builds it.
  std::unique_ptr<sequence> make(request_id id, std::vector<int32_t> prompt,
                                 bool prompt_logprobs = false) {
    sequence_request r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.params.max_tokens = 10;
    r.params.prompt_logprobs = prompt_logprobs;
    output_state output = outputs.start(r);
    token_sampler sampler{r.params, r.prompt, output.end_ids};
    return std::make_unique<sequence>(std::move(r), std::move(sampler), std::move(output));
  }

  // Admits `s` into `sched` as one batch; the sequence, which `sched` now owns.
  static sequence* admit(scheduler& sched, std::unique_ptr<sequence> s, bool static_batch = false,
                         stamp now = 0) {
    sched.open_admission(static_batch);
    EXPECT_TRUE(sched.has_slot_for(static_batch));
    sequence* raw = s.get();
    sched.admit(std::move(s), now);
    return raw;
  }

  std::shared_ptr<const tok> tokenizer = std::make_shared<tok>();
  output_processor outputs{tokenizer, context, {tok::eos}};
  const std::vector<int32_t> four = {tok::bos, tok::hel, tok::lo, tok::bang};
  const std::vector<int32_t> three = {tok::bos, tok::wor, tok::ld};
};

}  // namespace

TEST_F(scheduler_test, admission_gives_free_slots_until_none_is_left) {
  scheduler sched{2, context, layout(2)};
  EXPECT_EQ(sched.free_slots(), 2);
  EXPECT_FALSE(sched.has_work());
  sequence* a = admit(sched, make(1, four), false, 500);
  EXPECT_TRUE(a->schedule.blocks.empty()) << "blocks are taken as positions need them";
  EXPECT_EQ(a->req.times.admitted, 500);
  sequence* b = admit(sched, make(2, three));
  EXPECT_EQ(sched.free_slots(), 0);
  EXPECT_FALSE(sched.has_slot_for(false));
  EXPECT_EQ(sched.active(), 2);
  EXPECT_TRUE(sched.has_work());
  EXPECT_EQ(sched.active_ids(), (std::vector<request_id>{1, 2}));
  EXPECT_EQ(sched.sequences(), (std::vector<sequence*>{a, b}));
}

TEST_F(scheduler_test, a_static_batch_takes_nothing_else_until_it_ends) {
  scheduler sched{3, context, layout(3)};
  admit(sched, make(1, four), true);
  // One slot of three is taken, yet none is offered, and only the batch's kind fits.
  EXPECT_EQ(sched.free_slots(), 0);
  EXPECT_FALSE(sched.has_slot_for(false));
  EXPECT_TRUE(sched.has_slot_for(true));
  // A continuous batch does not change the kind while the static one runs.
  sched.open_admission(false);
  EXPECT_FALSE(sched.has_slot_for(false));
}

TEST_F(scheduler_test, a_step_boundary_ends_the_cancelled_then_the_expired_waiting_first) {
  scheduler sched{3, context, layout(3)};
  sequence* running = admit(sched, make(1, three));
  sched.advance(sched.schedule(), 1.0);  // its prompt is complete: it runs
  auto late = make(2, four);
  late->req.deadline = 1000;
  sequence* expiring = admit(sched, std::move(late));
  sequence* waiting = admit(sched, make(3, four));
  EXPECT_TRUE(sched.cancel(1));
  EXPECT_TRUE(sched.cancel(3));
  EXPECT_FALSE(sched.cancel(9));
  auto ends = sched.ends_at(999);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].seq, waiting);
  EXPECT_EQ(ends[1].seq, running);
  EXPECT_EQ(ends[1].how, outcome::cancelled);
  EXPECT_EQ(ends[1].code, ec::cancelled);
  EXPECT_EQ(ends[1].message, "request cancelled");
  ends = sched.ends_at(1000);
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0].seq, expiring);
  EXPECT_EQ(ends[0].how, outcome::expired);
  EXPECT_EQ(ends[0].code, ec::expired);
  EXPECT_EQ(ends[0].message, "deadline passed after 0 tokens");
  // An ended sequence is not ended again, and its slot comes back.
  running->ended = true;
  EXPECT_FALSE(sched.cancel(1));
  EXPECT_EQ(sched.ends_at(999).size(), 1u);
  sched.release_ended();
  EXPECT_EQ(sched.active(), 2);
  EXPECT_EQ(sched.free_slots(), 1);
  EXPECT_EQ(sched.active_ids(), (std::vector<request_id>{2, 3}));
}

TEST_F(scheduler_test, prompts_are_prefilled_in_chunks_then_decode_one_token_a_step) {
  scheduler sched{2, context, layout(2)};
  sched.set_max_batched_tokens(5);
  sequence* a = admit(sched, make(1, four));
  sequence* b = admit(sched, make(2, three));
  const auto& first = sched.schedule();
  EXPECT_FALSE(first.idle());
  ASSERT_EQ(first.rows.size(), 2u);
  EXPECT_EQ(first.prefill_rows, 2u);
  // All of the first prompt, one token of the second: five prompt tokens.
  EXPECT_EQ(first.rows[0].seq, a);
  EXPECT_TRUE(first.rows[0].prefill);
  EXPECT_TRUE(first.rows[0].completes);
  EXPECT_EQ(first.rows[0].prompt_count, 4);
  EXPECT_EQ(first.rows[1].seq, b);
  EXPECT_FALSE(first.rows[1].completes);
  EXPECT_EQ(first.rows[1].prompt_start, 0);
  EXPECT_EQ(first.rows[1].prompt_count, 1);
  EXPECT_EQ(first.items[1].tokens, b->req.prompt.data());
  EXPECT_EQ(first.prompt_tokens, 5);
  EXPECT_EQ(first.computed, 5);
  EXPECT_EQ(first.decode_rows, 0);
  sched.advance(first, 2.0);
  EXPECT_EQ(sched.step_costs().samples(), 1);
  EXPECT_EQ(a->schedule.position, 4);
  EXPECT_TRUE(a->prefill_done());
  EXPECT_EQ(b->schedule.prefilled, 1);
  EXPECT_FALSE(b->prefill_done());

  // The rest of the second prompt first, then the first sequence's token at its position.
  a->schedule.next_token = tok::hel;
  const auto& second = sched.schedule();
  ASSERT_EQ(second.rows.size(), 2u);
  EXPECT_EQ(second.rows[0].seq, b);
  EXPECT_EQ(second.rows[0].prompt_start, 1);
  EXPECT_EQ(second.rows[0].prompt_count, 2);
  EXPECT_TRUE(second.rows[0].completes);
  EXPECT_EQ(second.rows[1].seq, a);
  EXPECT_FALSE(second.rows[1].prefill);
  EXPECT_EQ(second.items[1].blocks, a->schedule.blocks.data());
  EXPECT_EQ(second.items[1].start, 4);
  EXPECT_EQ(second.items[1].count, 1);
  EXPECT_EQ(*second.items[1].tokens, tok::hel);
  EXPECT_EQ(second.decode_rows, 1);
  EXPECT_EQ(second.decode_attended, 5);
  EXPECT_EQ(second.decoded, 1);
  sched.advance(second, 2.0);
  EXPECT_EQ(a->schedule.position, 5);
  EXPECT_EQ(b->schedule.position, 3);
  EXPECT_TRUE(b->prefill_done());
  // Both decode now.
  const auto& third = sched.schedule();
  EXPECT_EQ(third.prefill_rows, 0u);
  EXPECT_EQ(third.decode_rows, 2);
  // Nothing left to compute once both ended.
  a->ended = b->ended = true;
  sched.release_ended();
  EXPECT_TRUE(sched.schedule().idle());
  EXPECT_EQ(sched.free_slots(), 2);
}

TEST_F(scheduler_test, equal_prompts_share_one_prefill_and_its_blocks) {
  scheduler sharing{3, context, layout(3)};
  sequence* leader = admit(sharing, make(1, four));
  sequence* follower = admit(sharing, make(2, four));
  // One that reports its prompt's log-probabilities needs rows of its own.
  sequence* scored = admit(sharing, make(3, four, true));
  const auto& step = sharing.schedule();
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(step.rows[0].seq, leader);
  EXPECT_EQ(step.rows[1].seq, scored);
  ASSERT_EQ(step.followers.size(), 1u);
  EXPECT_EQ(step.followers[0].seq, follower);
  EXPECT_EQ(step.followers[0].leader_row, 0u);
  sharing.advance(step, 1.0);
  EXPECT_TRUE(follower->prefill_done());
  EXPECT_EQ(follower->schedule.position, 4);

  // It shares the leader's blocks (four positions: one partly filled block, copied).
  ASSERT_EQ(step.block_copies.size(), 1u);
  EXPECT_EQ(step.block_copies[0].first, leader->schedule.blocks[0]);
  EXPECT_EQ(step.block_copies[0].second, follower->schedule.blocks[0]);
  EXPECT_NE(follower->schedule.blocks[0], leader->schedule.blocks[0]);
}

TEST_F(scheduler_test, an_item_with_all_logits_takes_a_row_of_logits_per_token) {
  scheduler sched{2, context, layout(2)};
  admit(sched, make(1, four, true));
  admit(sched, make(2, three));
  const auto& step = sched.schedule();
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_TRUE(step.rows[0].all_logits);
  EXPECT_TRUE(step.items[0].all_logits);
  EXPECT_EQ(step.rows[0].first_logits_row, 0);
  EXPECT_EQ(step.rows[0].sample_logits_row, 3);
  EXPECT_FALSE(step.rows[1].all_logits);
  EXPECT_EQ(step.rows[1].first_logits_row, 4);
  EXPECT_EQ(step.rows[1].sample_logits_row, 4);
}

TEST_F(scheduler_test, a_static_batch_pads_its_prompts_and_keeps_ended_members_until_all_end) {
  scheduler sched{3, context, layout(3)};
  sched.open_admission(true);
  sequence* a = admit(sched, make(1, three), true);
  sequence* b = admit(sched, make(2, four), true);
  const auto& step = sched.schedule();
  ASSERT_EQ(step.items.size(), 2u);
  // The shorter prompt, right-padded with its last token; its logits are its last real token's.
  EXPECT_EQ(step.items[0].count, 4);
  EXPECT_EQ(step.items[0].logits_at, 2);
  EXPECT_EQ(step.items[0].tokens[3], tok::ld);
  EXPECT_EQ(step.rows[0].prompt_count, 3);
  EXPECT_EQ(step.items[1].count, 4);
  EXPECT_EQ(step.items[1].logits_at, -1);
  EXPECT_EQ(step.prompt_tokens, 7);
  EXPECT_EQ(step.computed, 8);
  sched.advance(step, 1.0);
  EXPECT_EQ(a->schedule.position, 3);
  EXPECT_EQ(b->schedule.position, 4);
  // An ended member keeps its slot and its row while the other runs.
  a->ended = true;
  sched.release_ended();
  EXPECT_EQ(sched.active(), 2);
  const auto& next = sched.schedule();
  EXPECT_EQ(next.decode_rows, 2);
  EXPECT_EQ(next.decoded, 1);
  EXPECT_EQ(sched.free_slots(), 0);
  // Once all have ended every slot comes back.
  b->ended = true;
  sched.release_ended();
  EXPECT_EQ(sched.active(), 0);
  EXPECT_EQ(sched.free_slots(), 3);
  sched.open_admission(false);
  EXPECT_TRUE(sched.has_slot_for(false));
}

TEST_F(scheduler_test, after_an_abort_the_ended_members_of_a_static_batch_leave_at_once) {
  scheduler sched{2, context, layout(2)};
  sequence* a = admit(sched, make(1, three), true);
  admit(sched, make(2, four), true);
  a->ended = true;
  sched.release_all_ended();
  EXPECT_EQ(sched.active(), 1);
  // The other member still runs as a static batch.
  EXPECT_EQ(sched.free_slots(), 0);
  for (sequence* s : sched.sequences()) s->ended = true;
  sched.release_all_ended();
  EXPECT_EQ(sched.active(), 0);
  EXPECT_EQ(sched.free_slots(), 2);
  // Idle again: a continuous batch is taken.
  sched.open_admission(false);
  EXPECT_TRUE(sched.has_slot_for(false));
}

namespace {

// `n` prompt tokens from `first` on.
std::vector<int32_t> tokens_from(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// Runs one step without a model: every decoding row is fed token 7.
void run_step(scheduler& sched) {
  const auto& step = sched.schedule();
  for (const auto& row : step.rows)
    if (!row.prefill) row.seq->schedule.next_token = 7;
  sched.advance(step, 1.0);
}

}  // namespace

// A prompt that begins with the full blocks of an earlier one (ended, its blocks kept) starts
// after them, in the very blocks; the cached tokens are reported; a prompt that is all cached
// still computes its last token (its logits are sampled from); with caching off nothing is found.
TEST_F(scheduler_test, a_prompt_starts_after_its_longest_cached_prefix) {
  scheduler sched{2, context, layout(2)};
  sequence* a = admit(sched, make(1, tokens_from(100, 20)));
  run_step(sched);
  ASSERT_TRUE(a->prefill_done());
  EXPECT_EQ(a->schedule.registered, 2) << "two full blocks of 8 entered";
  const std::vector<int32_t> a_blocks = a->schedule.blocks;
  EXPECT_EQ(a->schedule.queried_tokens, 20);
  EXPECT_EQ(a->schedule.cached_tokens, 0);
  a->ended = true;
  sched.release_ended();
  EXPECT_EQ(sched.blocks().cached_blocks(), 2);

  auto prompt = tokens_from(100, 16);
  prompt.push_back(5);  // differs from position 16 on
  sequence* b = admit(sched, make(2, prompt));
  const auto& step = sched.schedule();
  ASSERT_EQ(step.rows.size(), 1u);
  EXPECT_EQ(step.rows[0].prompt_start, 16);
  EXPECT_EQ(step.rows[0].prompt_count, 1);
  EXPECT_EQ(step.prompt_tokens, 1);
  EXPECT_EQ(b->schedule.cached_tokens, 16);
  EXPECT_EQ(b->schedule.queried_tokens, 17);
  ASSERT_GE(b->schedule.blocks.size(), 3u);
  EXPECT_EQ(b->schedule.blocks[0], a_blocks[0]);
  EXPECT_EQ(b->schedule.blocks[1], a_blocks[1]);
  sched.advance(step, 1.0);
  b->ended = true;
  sched.release_ended();

  // All 16 tokens cached: the last block is computed again for the last token's logits.
  sequence* c = admit(sched, make(3, tokens_from(100, 16)));
  const auto& again = sched.schedule();
  ASSERT_EQ(again.rows.size(), 1u);
  EXPECT_EQ(again.rows[0].prompt_start, 8);
  EXPECT_EQ(c->schedule.cached_tokens, 8);
  sched.advance(again, 1.0);
  c->ended = true;
  sched.release_ended();

  scheduler off{2, context, layout(2, false)};
  sequence* d = admit(off, make(4, tokens_from(100, 20)));
  run_step(off);
  d->ended = true;
  off.release_ended();
  EXPECT_EQ(off.blocks().cached_blocks(), 0);
  sequence* e = admit(off, make(5, tokens_from(100, 20)));
  EXPECT_EQ(off.schedule().rows[0].prompt_start, 0);
  EXPECT_EQ(e->schedule.cached_tokens, 0);
  EXPECT_EQ(e->schedule.queried_tokens, 0);
}

// A pool that holds one context (8 blocks) and two sequences that outgrow it: the later one is
// preempted when the earlier needs a block, waits, and when blocks free up recomputes its prompt
// and the tokens it had fed (from its blocks still in the prefix cache), then decodes on from
// where it was with the token it had sampled. No block is ever held by two sequences that write.
TEST_F(scheduler_test, a_sequence_without_a_block_is_preempted_and_resumes_where_it_was) {
  scheduler sched{2, context, {block_size, context / block_size, true}};
  sequence* a = admit(sched, make(1, tokens_from(100, 30)));
  sequence* b = admit(sched, make(2, tokens_from(200, 30)));
  run_step(sched);
  ASSERT_TRUE(a->prefill_done() && b->prefill_done());
  EXPECT_EQ(sched.blocks().free_blocks(), 0);
  // Positions 30 and 31 fit the fourth blocks; 32 needs a fifth for each.
  run_step(sched);
  run_step(sched);
  EXPECT_EQ(b->schedule.fed, (std::vector<int32_t>{7, 7}));
  b->schedule.next_token = 9;  // what b sampled last, not yet fed
  const auto& step = sched.schedule();
  ASSERT_EQ(step.rows.size(), 1u) << "only a decodes: b gave its blocks up";
  EXPECT_EQ(step.rows[0].seq, a);
  EXPECT_TRUE(b->schedule.resuming);
  // It gave its four blocks up; a took one (its tail); the prefix cache still holds the others,
  // which b found again, and which a does not hold.
  EXPECT_EQ(b->schedule.blocks.size(), 3u);
  for (int32_t id : b->schedule.blocks)
    EXPECT_EQ(std::count(a->schedule.blocks.begin(), a->schedule.blocks.end(), id), 0);
  EXPECT_EQ(b->schedule.resume_tokens.size(), 32u);
  EXPECT_EQ(b->schedule.position, 32);
  sched.advance(step, 1.0);
  // a runs on to position 61 while b waits (taking b's cached blocks as it needs them).
  for (int i = 0; i < 28; ++i) {
    const auto& s = sched.schedule();
    // Whatever b found again in the cache, a does not hold.
    for (int32_t id : b->schedule.blocks)
      EXPECT_EQ(std::count(a->schedule.blocks.begin(), a->schedule.blocks.end(), id), 0);
    for (const auto& row : s.rows) EXPECT_FALSE(row.prefill) << "b has no room to prefill";
    for (const auto& row : s.rows)
      if (!row.prefill) row.seq->schedule.next_token = 7;
    sched.advance(s, 1.0);
  }
  EXPECT_EQ(a->schedule.position, 61);
  a->ended = true;
  sched.release_ended();
  // b comes back: its prompt and fed tokens from the first uncached position, as a resuming row
  // whose logits are not sampled from; then it decodes token 9 at position 32.
  int32_t recomputed = 0;
  while (b->schedule.resuming) {
    const auto& s = sched.schedule();
    ASSERT_EQ(s.rows.size(), 1u);
    EXPECT_TRUE(s.rows[0].resumes);
    EXPECT_FALSE(s.rows[0].all_logits);
    recomputed += s.rows[0].prompt_count;
    EXPECT_EQ(s.prompt_tokens, 0) << "recomputed tokens are no prompt tokens";
    sched.advance(s, 1.0);
  }
  EXPECT_GT(recomputed, 0);
  EXPECT_LE(recomputed, 32);
  EXPECT_EQ(b->schedule.position, 32);
  const auto& resumed = sched.schedule();
  ASSERT_EQ(resumed.rows.size(), 1u);
  EXPECT_FALSE(resumed.rows[0].prefill);
  EXPECT_EQ(resumed.items[0].start, 32);
  EXPECT_EQ(*resumed.items[0].tokens, 9);
  EXPECT_EQ(b->schedule.cached_tokens, 0) << "what its first lookup found, reported once";
}
