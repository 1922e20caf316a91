// The batch-size buckets of the decode step's CUDA graphs, without a device.
#include <gtest/gtest.h>

#include "model/graph_buckets.hpp"

using conveyor::model::graph_bucket_table;

TEST(graph_buckets, powers_of_two_then_multiples_of_eight_up_to_the_slots) {
  EXPECT_EQ(graph_bucket_table{1}.buckets(), (std::vector<int64_t>{1}));
  EXPECT_EQ(graph_bucket_table{3}.buckets(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(graph_bucket_table{16}.buckets(), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(graph_bucket_table{20}.buckets(), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
  const graph_bucket_table big{256};
  EXPECT_EQ(big.buckets().size(), 3u + 32u);
  EXPECT_EQ(big.buckets().back(), 256);
}

TEST(graph_buckets, a_batch_runs_as_the_smallest_bucket_that_holds_it) {
  const graph_bucket_table table{64};
  EXPECT_EQ(table.bucket_of(1), 1);
  EXPECT_EQ(table.bucket_of(2), 2);
  EXPECT_EQ(table.bucket_of(3), 4);
  EXPECT_EQ(table.bucket_of(5), 8);
  EXPECT_EQ(table.bucket_of(9), 16);
  EXPECT_EQ(table.bucket_of(17), 24);
  EXPECT_EQ(table.bucket_of(64), 64);
  // Never more than 7 padding rows past 8 sequences, never fewer rows than sequences.
  for (int64_t n = 1; n <= 64; ++n) {
    EXPECT_GE(table.bucket_of(n), n);
    EXPECT_LE(table.bucket_of(n) - n, n < 8 ? n : 7) << n;
  }
  const graph_bucket_table odd{13};
  EXPECT_EQ(odd.bucket_of(9), 13);
  EXPECT_EQ(odd.bucket_of(13), 13);
}
