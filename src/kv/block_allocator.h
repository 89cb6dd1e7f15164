// Hands out fixed-size KV cache blocks by number, and keeps the blocks whose content is known
// (prefix caching). Pure bookkeeping: the executor owns the memory.
//
// A block is in one of three states:
// - in use: a reference count of at least 1 (several sequences may share a full block; none of
//   them writes it);
// - cached: a count of 0, and content published under a hash (block_hash.h), so a new sequence may
//   take it back with AddRef instead of recomputing it; kept in least-recently-released order;
//
// A hash only finds a block; it never vouches for one. A 64-bit hash can collide, and collisions
// can be built on purpose, so each published block also keeps its own tokens and which
// publication of its parent block it followed, and Lookup hands out a block only when both match
// what the caller holds: a block is reused only for the same tokens after the same prefix.
// - free: a count of 0 and no known content.
// Allocate takes free blocks first, then evicts cached ones, least recently released first: cached
// blocks count as free space. A block in use is never evicted; a published block keeps its hash
// while in use and is found by Lookup then too.
//
// Invariants (CheckInvariants verifies them): every block with a count of 0 is on exactly one of
// the free list (no hash) and the cached list (with a hash); every hash names one block.
// Not thread-safe: only the engine loop uses it.
#ifndef CONVOY_KV_BLOCK_ALLOCATOR_H_
#define CONVOY_KV_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kv/block_hash.h"

namespace convoy {

using BlockId = int32_t;
// A block table's entry for a block it gave back (BlockTable::ReleaseBefore): positions there are
// never read again.
inline constexpr BlockId kNoBlock = -1;

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  // Blocks Allocate can hand out: free plus cached and not in use.
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size() + lru_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Blocks with published content, in use or not.
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  // Cached blocks not in use (the ones Allocate may evict).
  int32_t num_evictable() const { return static_cast<int32_t>(lru_.size()); }
  // Cached blocks evicted by Allocate since construction.
  int64_t num_evictions() const { return evictions_; }
  bool CanAllocate(int32_t n) const { return n <= num_free(); }

  // Takes `n` blocks, each with a reference count of 1 and no content, appending them to `out`;
  // all or nothing: RESOURCE_EXHAUSTED and no change when fewer than `n` are free.
  absl::Status Allocate(int32_t n, std::vector<BlockId>* out);
  // Adds a reference to a block in use, or takes a cached block back into use.
  absl::Status AddRef(BlockId block);
  // Drops a reference; at 0 the block becomes cached (the most recently released) when it has
  // published content, free otherwise.
  absl::Status Release(BlockId block);
  int32_t ref_count(BlockId block) const { return ref_counts_[block]; }

  // Records that `block` (in use, full, written) holds the content named by `hash`: `tokens`
  // after the prefix held by `parent` (nullopt: at the start of a sequence). Returns false and
  // changes nothing when another block is published under `hash`, `block` has content already,
  // or `parent` is not published.
  bool Publish(BlockId block, BlockHash hash, absl::Span<const int32_t> tokens = {},
               std::optional<BlockId> parent = std::nullopt);
  // The block, in use or cached, published under `hash` with these `tokens` after this `parent`
  // (the block the caller found for the previous position, as it is published now); nullopt when
  // there is none, or when the block under `hash` holds other tokens or followed another prefix.
  std::optional<BlockId> Lookup(BlockHash hash, absl::Span<const int32_t> tokens = {},
                                std::optional<BlockId> parent = std::nullopt) const;

  absl::Status CheckInvariants() const;

 private:
  void Evict(BlockId block);

  std::vector<int32_t> ref_counts_;
  std::vector<BlockId> free_list_;  // LIFO: recently freed blocks are reused first
  std::list<BlockId> lru_;          // cached and not in use; front: released longest ago
  std::vector<std::list<BlockId>::iterator> lru_pos_;  // valid while on lru_
  struct Content {
    BlockHash hash;
    // Distinct for every publication, never reused: a child records its parent's, so a parent
    // evicted and published again with other content no longer vouches for the child.
    uint64_t serial;
    uint64_t parent_serial;  // 0 at the start of a sequence
    std::vector<int32_t> tokens;
  };
  std::vector<std::optional<Content>> content_;  // published content, per block
  uint64_t next_serial_ = 1;
  absl::flat_hash_map<BlockHash, BlockId> by_hash_;
  int64_t evictions_ = 0;
};

}  // namespace convoy

#endif  // CONVOY_KV_BLOCK_ALLOCATOR_H_
