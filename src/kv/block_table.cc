#include "kv/block_table.h"

namespace convoy {

int32_t BlockTable::BlocksNeeded(int64_t num_tokens) const {
  int64_t total = (num_tokens + block_size_ - 1) / block_size_;
  int64_t have = static_cast<int64_t>(blocks_.size());
  return total > have ? static_cast<int32_t>(total - have) : 0;
}

absl::Status BlockTable::Reserve(int64_t num_tokens, BlockAllocator* allocator) {
  return allocator->Allocate(BlocksNeeded(num_tokens), &blocks_);
}

absl::Status BlockTable::AppendCached(const std::vector<BlockId>& cached,
                                      BlockAllocator* allocator) {
  for (size_t i = 0; i < cached.size(); ++i) {
    if (absl::Status s = allocator->AddRef(cached[i]); !s.ok()) {
      while (i > 0) allocator->Release(cached[--i]).IgnoreError();
      return s;
    }
  }
  blocks_.insert(blocks_.end(), cached.begin(), cached.end());
  return absl::OkStatus();
}

void BlockTable::ReleaseAll(BlockAllocator* allocator) {
  // A table only holds blocks it was given, so Release cannot fail here.
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    allocator->Release(*it).IgnoreError();
  blocks_.clear();
}

}  // namespace convoy
