#include "kv/block_table.h"

#include <algorithm>

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
  for (auto it = blocks_.rbegin(); it != blocks_.rend() - num_released_; ++it)
    allocator->Release(*it).IgnoreError();
  blocks_.clear();
  num_released_ = 0;
}

int32_t BlockTable::ReleaseBefore(int64_t count, BlockAllocator* allocator) {
  const int32_t end = static_cast<int32_t>(std::min<int64_t>(count, std::ssize(blocks_)));
  const int32_t released = std::max(0, end - num_released_);
  for (int32_t i = end - 1; i >= num_released_; --i) {
    allocator->Release(blocks_[i]).IgnoreError();
    blocks_[i] = kNoBlock;
  }
  num_released_ += released;
  return released;
}

}  // namespace convoy
