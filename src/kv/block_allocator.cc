#include "kv/block_allocator.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace convoy {

BlockAllocator::BlockAllocator(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  free_list_.reserve(num_blocks);
  // Popped from the back: block 0 is handed out first.
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

absl::Status BlockAllocator::Allocate(int32_t n, std::vector<BlockId>* out) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("cannot allocate %d blocks", n));
  if (n > num_free()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache full: %d blocks needed, %d of %d free", n, num_free(), num_blocks()));
  }
  for (int32_t i = 0; i < n; ++i) {
    BlockId b = free_list_.back();
    free_list_.pop_back();
    ref_counts_[b] = 1;
    out->push_back(b);
  }
  return absl::OkStatus();
}

absl::Status BlockAllocator::AddRef(BlockId block) {
  if (block < 0 || block >= num_blocks() || ref_counts_[block] == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("AddRef on block %d, which is not in use", block));
  }
  ++ref_counts_[block];
  return absl::OkStatus();
}

absl::Status BlockAllocator::Release(BlockId block) {
  if (block < 0 || block >= num_blocks() || ref_counts_[block] == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("Release of block %d, which is not in use", block));
  }
  if (--ref_counts_[block] == 0) free_list_.push_back(block);
  return absl::OkStatus();
}

absl::Status BlockAllocator::CheckInvariants() const {
  std::vector<bool> on_free_list(ref_counts_.size(), false);
  for (BlockId b : free_list_) {
    if (b < 0 || b >= num_blocks()) {
      return absl::InternalError(absl::StrFormat("free list holds block %d out of range", b));
    }
    if (on_free_list[b]) {
      return absl::InternalError(absl::StrFormat("block %d is on the free list twice", b));
    }
    on_free_list[b] = true;
  }
  for (BlockId b = 0; b < num_blocks(); ++b) {
    if (ref_counts_[b] < 0) {
      return absl::InternalError(absl::StrFormat("block %d has ref count %d", b, ref_counts_[b]));
    }
    if (on_free_list[b] != (ref_counts_[b] == 0)) {
      return absl::InternalError(
          absl::StrFormat("block %d has ref count %d but is %son the free list", b, ref_counts_[b],
                          on_free_list[b] ? "" : "not "));
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy
