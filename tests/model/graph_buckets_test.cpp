// The CUDA graph bucket table of the decode step: which buckets an executor captures, which one
// a batch replays. Plain arithmetic: runs in every build, with or without a GPU.
#include "model/graph_buckets.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace conveyor::model {

using sizes = std::vector<int64_t>;

TEST(graph_bucket_table, is_1_2_4_then_multiples_of_8_then_the_slots) {
  EXPECT_EQ(graph_bucket_table{1}.buckets(), (sizes{1}));
  EXPECT_EQ(graph_bucket_table{2}.buckets(), (sizes{1, 2}));
  EXPECT_EQ(graph_bucket_table{3}.buckets(), (sizes{1, 2, 3}));
  EXPECT_EQ(graph_bucket_table{4}.buckets(), (sizes{1, 2, 4}));
  EXPECT_EQ(graph_bucket_table{6}.buckets(), (sizes{1, 2, 4, 6}));
  EXPECT_EQ(graph_bucket_table{8}.buckets(), (sizes{1, 2, 4, 8}));
  EXPECT_EQ(graph_bucket_table{9}.buckets(), (sizes{1, 2, 4, 8, 9}));
  EXPECT_EQ(graph_bucket_table{16}.buckets(), (sizes{1, 2, 4, 8, 16}));
  EXPECT_EQ(graph_bucket_table{30}.buckets(), (sizes{1, 2, 4, 8, 16, 24, 30}));
  EXPECT_EQ(graph_bucket_table{256}.buckets().size(), 3u + 32u);
  EXPECT_EQ(graph_bucket_table{256}.buckets().back(), 256);
}

TEST(graph_bucket_table, a_batch_replays_the_smallest_bucket_that_holds_it) {
  const graph_bucket_table table{30};
  // By batch size 1..30.
  const sizes expected{0,  1,  2,  4,  4,  8,  8,  8,  8,  16, 16, 16, 16, 16, 16, 16,
                       16, 24, 24, 24, 24, 24, 24, 24, 24, 30, 30, 30, 30, 30, 30};
  for (int64_t n = 1; n <= 30; ++n) EXPECT_EQ(table.bucket_of(n), expected[size_t(n)]) << n;
}

TEST(graph_bucket_table, every_batch_fits_a_bucket_with_at_most_7_padding_rows_beyond_8) {
  for (int32_t slots = 1; slots <= 300; ++slots) {
    const graph_bucket_table table{slots};
    const auto& buckets = table.buckets();
    ASSERT_EQ(buckets.back(), slots);
    for (size_t i = 1; i < buckets.size(); ++i) ASSERT_LT(buckets[i - 1], buckets[i]) << slots;
    for (int64_t n = 1; n <= slots; ++n) {
      const int64_t b = table.bucket_of(n);
      ASSERT_GE(b, n) << slots << " slots, batch " << n;
      ASSERT_LE(b, slots) << slots << " slots, batch " << n;
      ASSERT_LE(b - n, n <= 8 ? 3 : 7) << slots << " slots, batch " << n;
      ASSERT_NE(std::find(buckets.begin(), buckets.end(), b), buckets.end());
    }
  }
}

}  // namespace conveyor::model
