// Memory for what every decode step reads again, the packed weights and the KV cache: a block
// each, 2 MiB aligned and advised to the kernel as transparent huge pages (madvise
// MADV_HUGEPAGE). With 4 KiB pages a 25 MB model spans 6,000 pages, more than the processor's TLB
// covers; in huge pages the s15m step at batch 1 was 11 % faster, and the passes that follow an
// idle gap read the weights back sooner (docs/benchmarks.md). Where
// the kernel's transparent huge pages are off ("never") the block is ordinary memory and works
// the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace conveyor::kernels {

class huge_page_arena {
 public:
  static constexpr size_t huge_page = size_t{2} << 20;
  static constexpr size_t piece_alignment = 64;

  /// A block of at least `bytes` (rounded up to whole huge pages), advised as huge pages. It
  /// starts zeroed, and takes memory only where it is written.
  explicit huge_page_arena(size_t bytes);

  /// The next `bytes` of the block, 64-byte aligned, pieces in order. Throws std::length_error
  /// past the block's end.
  void* take(size_t bytes);

  /// The block's start and size.
  const void* data() const { return block_.get(); }
  size_t size() const { return size_; }

  /// Whether the kernel accepted the huge-page advice for the block (false where it has
  /// transparent huge pages off, or no such advice).
  bool advised() const { return advised_; }

  /// What `take` would use for a piece of `bytes`: its size rounded up to the alignment.
  static size_t rounded(size_t bytes) {
    return (bytes + piece_alignment - 1) / piece_alignment * piece_alignment;
  }

 private:
  struct free_block {
    size_t size;  // bytes mapped
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, free_block> block_;
  size_t size_ = 0;
  size_t used_ = 0;
  bool advised_ = false;
};

}  // namespace conveyor::kernels
