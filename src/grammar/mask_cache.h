// Token masks shared by every matcher of one grammar over one vocabulary, so that a state one
// request has seen costs later requests a lookup instead of a walk of the vocabulary's trie.
//
// A mask is stored under its state's canonical key (StackMachine::AppendKey: the state's stacks as
// positions, and whether the text is complete), which any matcher of the same grammar computes
// alike. Thread-safe: the keys are spread over shards, each behind its own mutex, held only to find
// or insert a pointer; masks are immutable once cached and live while a matcher still holds them.
#ifndef CONVOY_GRAMMAR_MASK_CACHE_H_
#define CONVOY_GRAMMAR_MASK_CACHE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace convoy::grammar {

class Grammar;
class TokenVocabulary;

// Bit i (word i / 32, bit i % 32) set: token i may come next.
using TokenMask = std::vector<uint32_t>;

class MaskCache {
 public:
  // Grammar::MaskCacheFor makes the one every matcher shares; tests make small ones.
  // `grammar` and `vocab` only name what the masks are of (GrammarMatcher refuses to use a cache
  // made for another pair); they are never dereferenced.
  MaskCache(const Grammar* grammar, const TokenVocabulary* vocab, int64_t max_bytes);
  MaskCache(const MaskCache&) = delete;
  MaskCache& operator=(const MaskCache&) = delete;

  bool IsFor(const Grammar* grammar, const TokenVocabulary* vocab) const {
    return grammar == grammar_ && vocab == vocab_;
  }
  // The mask cached under `key`, or nullptr.
  std::shared_ptr<const TokenMask> Find(const std::string& key) const;
  // Caches `mask` under `key`; keeps the one already there if another matcher was first. A shard
  // (1/kShards of max_bytes) that would pass its share first drops everything it holds; an entry
  // larger than a share is not cached. So bytes() never passes max_bytes.
  void Insert(std::string key, std::shared_ptr<const TokenMask> mask);

  // The bytes held (masks, keys and a fixed cost per entry), and how many times a shard started
  // over.
  int64_t bytes() const;
  int64_t evictions() const;

 private:
  static constexpr int kShards = 16;
  static constexpr int64_t kEntryOverhead = 64;
  struct Shard {
    mutable absl::Mutex mutex;
    absl::flat_hash_map<std::string, std::shared_ptr<const TokenMask>> masks ABSL_GUARDED_BY(mutex);
    int64_t bytes ABSL_GUARDED_BY(mutex) = 0;
    int64_t evictions ABSL_GUARDED_BY(mutex) = 0;
  };
  Shard& ShardOf(const std::string& key) const;

  const Grammar* const grammar_;
  const TokenVocabulary* const vocab_;
  const int64_t shard_bytes_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_MASK_CACHE_H_
