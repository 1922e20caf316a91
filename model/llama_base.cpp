// The shared part of the Llama networks.
#include "model/llama_base.hpp"

#include <sstream>

namespace conveyor::model {

llama_base::llama_base(const llama_shape& shape, bool synthetic, std::vector<int32_t> end_ids,
                       const runtime_options& opt, int32_t context, std::string implementation)
    : shape_(shape),
      slots_(opt.slots),
      context_(context),
      block_size_(opt.block_size),
      kv_blocks_(opt.kv_blocks != 0 ? opt.kv_blocks
                                    : default_kv_blocks(opt.slots, context, opt.block_size)),
      table_blocks_((context + opt.block_size - 1) / opt.block_size),
      synthetic_(synthetic),
      end_ids_(std::move(end_ids)),
      device_name_(opt.device),
      dtype_(opt.dtype),
      implementation_(std::move(implementation)) {}

int64_t llama_base::kv_cache_bytes() const {
  return conveyor::model::kv_cache_bytes(shape_, kv_blocks_, block_size_, dtype_);
}

std::string llama_base::describe() const {
  std::ostringstream os;
  os << "llama dim=" << shape_.dim << " hidden=" << shape_.hidden_dim
     << " layers=" << shape_.n_layers << " heads=" << shape_.n_heads
     << " kv_heads=" << shape_.n_kv_heads << " vocab=" << shape_.vocab_size << " on "
     << device_name_ << " in " << dtype_name(dtype_) << " (" << implementation_ << "), " << slots_
     << " slots, context " << context_ << ", KV cache " << kv_blocks_ << " blocks x " << block_size_
     << " tokens, " << kv_cache_bytes() / (1024 * 1024) << " MiB";
  return os.str();
}

}  // namespace conveyor::model
