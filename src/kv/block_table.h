// The KV blocks of one sequence, in order: token position p lives in block blocks()[p / block_size]
// at slot p % block_size. Under a sliding window the leading blocks no token reads any more are
// given back and their entries become kNoBlock.
#ifndef CONVOY_KV_BLOCK_TABLE_H_
#define CONVOY_KV_BLOCK_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kv/block_allocator.h"

namespace convoy {

// Under a sliding window of `window` positions (each token attends to the latest `window`, its own
// included; 0: no window), the number of leading blocks that no token at `position` or after it
// reads.
inline int64_t BlocksBeforeWindow(int64_t position, int64_t window, int32_t block_size) {
  if (window <= 0 || position + 1 <= window) return 0;
  return (position + 1 - window) / block_size;
}

class BlockTable {
 public:
  explicit BlockTable(int32_t block_size) : block_size_(block_size) {}
  BlockTable(BlockTable&&) = default;
  BlockTable& operator=(BlockTable&&) = default;

  int32_t block_size() const { return block_size_; }
  const std::vector<BlockId>& blocks() const { return blocks_; }
  // Tokens the blocks can hold, those given back included: positions map to entries as ever.
  int64_t capacity() const { return static_cast<int64_t>(blocks_.size()) * block_size_; }
  // The blocks it holds: its entries but those given back.
  int32_t num_held() const { return static_cast<int32_t>(blocks_.size()) - num_released_; }
  // Blocks still needed to hold `num_tokens` tokens in all.
  int32_t BlocksNeeded(int64_t num_tokens) const;

  // Grows the table to hold `num_tokens`; all or nothing (RESOURCE_EXHAUSTED leaves it unchanged).
  absl::Status Reserve(int64_t num_tokens, BlockAllocator* allocator);
  // Appends cached blocks holding the tokens from capacity() on (a reused prefix), taking a
  // reference to each; all or nothing. REQUIRES: each is in use or cached in `allocator`.
  absl::Status AppendCached(const std::vector<BlockId>& cached, BlockAllocator* allocator);
  // Returns every block to the allocator, last block first (so a cached prefix's later blocks
  // are evicted before its first ones); the table is empty afterwards.
  void ReleaseAll(BlockAllocator* allocator);
  // Returns the blocks among the first `count` entries that it still holds to the allocator (last
  // block first, as ReleaseAll) and makes their entries kNoBlock; returns how many it gave back.
  int32_t ReleaseBefore(int64_t count, BlockAllocator* allocator);

 private:
  int32_t block_size_;
  std::vector<BlockId> blocks_;
  int32_t num_released_ = 0;  // the leading entries that are kNoBlock
};

}  // namespace convoy

#endif  // CONVOY_KV_BLOCK_TABLE_H_
