// The packed weights' block: its layout (alignment, rounding, pieces in order, a clear error past
// its end) and, where the kernel has transparent huge pages on, that the kernel itself reports
// the block as eligible for them (/proc/self/smaps), the advice having reached it.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kernels/huge_pages.hpp"

using conveyor::kernels::huge_page_arena;

namespace {

constexpr size_t mib = size_t{1} << 20;

// The transparent huge page mode the kernel shows, the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise" or "never"); empty without it.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all((std::istreambuf_iterator<char>(f)), {});
  const auto open = all.find('['), close = all.find(']');
  if (open == std::string::npos || close == std::string::npos) return {};
  return all.substr(open + 1, close - open - 1);
}

// The THPeligible field of the mapping in /proc/self/smaps that holds `p`; -1 if none says.
int thp_eligible(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

}  // namespace

TEST(huge_pages, the_block_is_whole_huge_pages_aligned_to_one) {
  huge_page_arena arena(3 * mib);
  EXPECT_EQ(arena.size(), 4 * mib);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.data()) % huge_page_arena::huge_page, 0u);
  EXPECT_EQ(huge_page_arena(1).size(), 2 * mib);
  EXPECT_EQ(huge_page_arena(0).size(), 2 * mib);
}

TEST(huge_pages, pieces_come_in_order_64_byte_aligned) {
  huge_page_arena arena(2 * mib);
  auto* base = static_cast<const uint8_t*>(arena.data());
  EXPECT_EQ(arena.take(100), base);
  EXPECT_EQ(arena.take(64), base + 128);
  EXPECT_EQ(arena.take(1), base + 192);
  EXPECT_EQ(arena.take(2 * mib - 256), base + 256);  // exactly the rest
}

TEST(huge_pages, a_piece_past_the_end_is_a_clear_error) {
  huge_page_arena arena(2 * mib);
  arena.take(2 * mib - 64);
  try {
    arena.take(65);
    FAIL() << "no error";
  } catch (const std::length_error& e) {
    EXPECT_EQ(std::string(e.what()), "huge_page_arena: 65 bytes asked, 64 left");
  }
  EXPECT_NO_THROW(arena.take(64));
}

TEST(huge_pages, the_kernel_reports_the_block_eligible_for_huge_pages) {
  const std::string mode = thp_mode();
  if (mode.empty() || mode == "never")
    GTEST_SKIP() << "transparent huge pages are off here (mode '" << mode << "')";
  huge_page_arena arena(8 * mib);
  ASSERT_TRUE(arena.advised());
  const int eligible = thp_eligible(arena.data());
  if (eligible < 0) GTEST_SKIP() << "this kernel's smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1) << "mode " << mode;
}
