#include "grammar/mask_cache.h"

#include <utility>

#include "absl/hash/hash.h"

namespace convoy::grammar {

MaskCache::MaskCache(const Grammar* grammar, const TokenVocabulary* vocab, int64_t max_bytes)
    : grammar_(grammar), vocab_(vocab), shard_bytes_(max_bytes / kShards) {}

MaskCache::Shard& MaskCache::ShardOf(const std::string& key) const {
  // The high bits: the shard's map uses the low ones.
  return shards_[(absl::Hash<std::string>{}(key) >> 40) % kShards];
}

std::shared_ptr<const TokenMask> MaskCache::Find(const std::string& key) const {
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mutex);
  auto it = shard.masks.find(key);
  return it == shard.masks.end() ? nullptr : it->second;
}

void MaskCache::Insert(std::string key, std::shared_ptr<const TokenMask> mask) {
  const int64_t size =
      static_cast<int64_t>(key.size() + mask->size() * sizeof(uint32_t)) + kEntryOverhead;
  if (size > shard_bytes_) return;
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mutex);
  if (shard.masks.contains(key)) return;
  if (shard.bytes + size > shard_bytes_) {
    shard.masks.clear();
    shard.bytes = 0;
    ++shard.evictions;
  }
  shard.masks.emplace(std::move(key), std::move(mask));
  shard.bytes += size;
}

int64_t MaskCache::bytes() const {
  int64_t total = 0;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mutex);
    total += shard.bytes;
  }
  return total;
}

int64_t MaskCache::evictions() const {
  int64_t total = 0;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mutex);
    total += shard.evictions;
  }
  return total;
}

}  // namespace convoy::grammar
