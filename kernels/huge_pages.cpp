#include "kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace conveyor::kernels {

void huge_page_arena::free_block::operator()(uint8_t* p) const { std::free(p); }

huge_page_arena::huge_page_arena(size_t bytes)
    : size_((std::max<size_t>(bytes, 1) + huge_page - 1) / huge_page * huge_page) {
  void* p = std::aligned_alloc(huge_page, size_);
  if (!p) throw std::bad_alloc();
  block_.reset(static_cast<uint8_t*>(p));
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
