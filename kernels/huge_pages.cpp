#include "kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace conveyor::kernels {

void huge_page_arena::free_block::operator()(uint8_t* p) const {
  ::munmap(p, size);
}

huge_page_arena::huge_page_arena(size_t bytes)
    : size_((std::max<size_t>(bytes, 1) + huge_page - 1) / huge_page * huge_page) {
  // Anonymous pages: zero, and resident only once written. One huge page more than asked, so
  // that the block can start on a huge-page boundary; the slack is given back.
  const size_t mapped = size_ + huge_page;
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<uint8_t*>(m);
  const size_t lead = (huge_page - reinterpret_cast<uintptr_t>(base) % huge_page) % huge_page;
  if (lead > 0) ::munmap(base, lead);
  if (huge_page - lead > 0) ::munmap(base + lead + size_, huge_page - lead);
  void* p = base + lead;
  block_ = std::unique_ptr<uint8_t, free_block>(static_cast<uint8_t*>(p), free_block{size_});
#ifdef MADV_HUGEPAGE
  advised_ = ::madvise(p, size_, MADV_HUGEPAGE) == 0;
#endif
}

void* huge_page_arena::take(size_t bytes) {
  const size_t n = rounded(bytes);
  if (n > size_ - used_)
    throw std::length_error("huge_page_arena: " + std::to_string(bytes) + " bytes asked, " +
                            std::to_string(size_ - used_) + " left");
  void* p = block_.get() + used_;
  used_ += n;
  return p;
}

}  // namespace conveyor::kernels
