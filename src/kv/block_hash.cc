#include "kv/block_hash.h"

namespace convoy {
namespace block_hash_internal {

// splitmix64's finalizer: every input bit moves about half the output bits.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace block_hash_internal

using block_hash_internal::Mix;

BlockHash HashBlock(BlockHash parent, absl::Span<const int32_t> tokens) {
  uint64_t h = Mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
  return Mix(h ^ tokens.size());
}

void ExtendBlockHashes(absl::Span<const int32_t> tokens, int32_t block_size,
                       std::vector<BlockHash>* hashes) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  while (hashes->size() < full) {
    const size_t i = hashes->size();
    const BlockHash parent = i == 0 ? 0 : (*hashes)[i - 1];
    hashes->push_back(HashBlock(parent, tokens.subspan(i * block_size, block_size)));
  }
}

}  // namespace convoy
