#include "kv/block_allocator.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace convoy {

BlockAllocator::BlockAllocator(int32_t num_blocks)
    : ref_counts_(num_blocks, 0), lru_pos_(num_blocks), content_(num_blocks) {
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
    BlockId b;
    if (!free_list_.empty()) {
      b = free_list_.back();
      free_list_.pop_back();
    } else {
      b = lru_.front();
      Evict(b);
    }
    ref_counts_[b] = 1;
    out->push_back(b);
  }
  return absl::OkStatus();
}

void BlockAllocator::Evict(BlockId block) {
  lru_.erase(lru_pos_[block]);
  by_hash_.erase(content_[block]->hash);
  content_[block].reset();
  ++evictions_;
}

absl::Status BlockAllocator::AddRef(BlockId block) {
  if (block < 0 || block >= num_blocks() || (ref_counts_[block] == 0 && !content_[block])) {
    return absl::FailedPreconditionError(
        absl::StrFormat("AddRef on block %d, which is neither in use nor cached", block));
  }
  if (ref_counts_[block] == 0) lru_.erase(lru_pos_[block]);
  ++ref_counts_[block];
  return absl::OkStatus();
}

absl::Status BlockAllocator::Release(BlockId block) {
  if (block < 0 || block >= num_blocks() || ref_counts_[block] == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("Release of block %d, which is not in use", block));
  }
  if (--ref_counts_[block] == 0) {
    if (content_[block]) {
      lru_pos_[block] = lru_.insert(lru_.end(), block);
    } else {
      free_list_.push_back(block);
    }
  }
  return absl::OkStatus();
}

bool BlockAllocator::Publish(BlockId block, BlockHash hash, absl::Span<const int32_t> tokens,
                             std::optional<BlockId> parent) {
  if (block < 0 || block >= num_blocks() || ref_counts_[block] == 0 || content_[block]) {
    return false;
  }
  uint64_t parent_serial = 0;
  if (parent) {
    if (*parent < 0 || *parent >= num_blocks() || !content_[*parent]) return false;
    parent_serial = content_[*parent]->serial;
  }
  if (!by_hash_.emplace(hash, block).second) return false;
  content_[block] = Content{hash, next_serial_++, parent_serial,
                            std::vector<int32_t>(tokens.begin(), tokens.end())};
  return true;
}

std::optional<BlockId> BlockAllocator::Lookup(BlockHash hash, absl::Span<const int32_t> tokens,
                                              std::optional<BlockId> parent) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Content& content = *content_[it->second];
  uint64_t parent_serial = 0;
  if (parent) {
    if (*parent < 0 || *parent >= num_blocks() || !content_[*parent]) return std::nullopt;
    parent_serial = content_[*parent]->serial;
  }
  if (content.parent_serial != parent_serial ||
      !std::equal(content.tokens.begin(), content.tokens.end(), tokens.begin(), tokens.end())) {
    return std::nullopt;
  }
  return it->second;
}

absl::Status BlockAllocator::CheckInvariants() const {
  // 0: not on a list; 1: free list; 2: cached list.
  std::vector<int> list_of(ref_counts_.size(), 0);
  auto mark = [&](BlockId b, int list, const char* name) -> absl::Status {
    if (b < 0 || b >= num_blocks()) {
      return absl::InternalError(absl::StrFormat("%s list holds block %d out of range", name, b));
    }
    if (list_of[b] != 0) {
      return absl::InternalError(absl::StrFormat("block %d is on a list twice", b));
    }
    list_of[b] = list;
    return absl::OkStatus();
  };
  for (BlockId b : free_list_) {
    if (absl::Status s = mark(b, 1, "free"); !s.ok()) return s;
  }
  for (BlockId b : lru_) {
    if (absl::Status s = mark(b, 2, "cached"); !s.ok()) return s;
  }
  for (BlockId b = 0; b < num_blocks(); ++b) {
    if (ref_counts_[b] < 0) {
      return absl::InternalError(absl::StrFormat("block %d has ref count %d", b, ref_counts_[b]));
    }
    const int expected = ref_counts_[b] > 0 ? 0 : (content_[b] ? 2 : 1);
    if (list_of[b] != expected) {
      return absl::InternalError(absl::StrFormat("block %d (ref count %d, %s) is on the wrong list",
                                                 b, ref_counts_[b],
                                                 content_[b] ? "cached" : "no content"));
    }
    if (content_[b]) {
      auto it = by_hash_.find(content_[b]->hash);
      if (it == by_hash_.end() || it->second != b) {
        return absl::InternalError(absl::StrFormat("block %d's hash does not name it", b));
      }
    }
  }
  for (const auto& [hash, b] : by_hash_) {
    if (b < 0 || b >= num_blocks() || !content_[b] || content_[b]->hash != hash) {
      return absl::InternalError(absl::StrFormat("hash %016x names block %d wrongly", hash, b));
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy
