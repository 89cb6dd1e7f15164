// Hands out fixed-size KV cache blocks by number. Pure bookkeeping: the executor owns the memory.
//
// Invariants (CheckInvariants verifies them): every block is either on the free list with a
// reference count of 0, or off it with a count of at least 1; the free list holds no duplicates.
// Not thread-safe: only the engine loop uses it.
#ifndef CONVOY_KV_BLOCK_ALLOCATOR_H_
#define CONVOY_KV_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy {

using BlockId = int32_t;

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  bool CanAllocate(int32_t n) const { return n <= num_free(); }

  // Takes `n` blocks, each with a reference count of 1, appending them to `out`; all or nothing:
  // RESOURCE_EXHAUSTED and no change when fewer than `n` are free.
  absl::Status Allocate(int32_t n, std::vector<BlockId>* out);
  // Adds a reference to a block in use (for sharing a common prefix).
  absl::Status AddRef(BlockId block);
  // Drops a reference; the block returns to the free list when its count reaches 0.
  absl::Status Release(BlockId block);
  int32_t ref_count(BlockId block) const { return ref_counts_[block]; }

  absl::Status CheckInvariants() const;

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<BlockId> free_list_;  // LIFO: recently freed blocks are reused first
};

}  // namespace convoy

#endif  // CONVOY_KV_BLOCK_ALLOCATOR_H_
