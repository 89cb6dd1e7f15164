// Content identity of full KV blocks, for prefix caching. A block's hash covers its own tokens and,
// through the previous block's hash, every token before it: two blocks with equal hashes hold the
// K and V of the same tokens at the same positions after the same prefix. A partial block (fewer
// than block_size tokens) has no hash.
#ifndef CONVOY_KV_BLOCK_HASH_H_
#define CONVOY_KV_BLOCK_HASH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace convoy {

using BlockHash = uint64_t;

// The hash of the block holding `tokens` after the block whose hash is `parent` (0 for the first).
BlockHash HashBlock(BlockHash parent, absl::Span<const int32_t> tokens);

// Appends to `hashes` the hashes of the full blocks of `tokens` it does not have yet (hashes[i] is
// block i's). `tokens` may only have grown since the last call.
void ExtendBlockHashes(absl::Span<const int32_t> tokens, int32_t block_size,
                       std::vector<BlockHash>* hashes);

namespace block_hash_internal {
// The mixing step HashBlock applies after each token: splitmix64's finalizer, a bijection (so a
// 64-bit hash of blocks can be made to collide, and a match is never trusted on its own).
uint64_t Mix(uint64_t x);
}  // namespace block_hash_internal

}  // namespace convoy

#endif  // CONVOY_KV_BLOCK_HASH_H_
