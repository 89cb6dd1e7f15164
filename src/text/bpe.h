// The BPE model of Hugging Face tokenizers: a piece becomes symbols (its characters, or in
// byte-level mode its bytes spelled in GPT-2's alphabet), and adjacent symbols merge, lowest merge
// rank first and leftmost among equal ranks, until no pair has a merge. Each piece takes
// O(n log n) in its n symbols (a heap of candidate merges), so no input is quadratic.
#ifndef CONVOY_TEXT_BPE_H_
#define CONVOY_TEXT_BPE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace convoy::tokenizer_internal {

struct BpeOptions {
  // Pieces are raw bytes; symbols are the vocabulary's tokens for their byte-level spelling.
  bool byte_level = false;
  // A character missing from the vocabulary becomes its bytes' "<0xXX>" tokens, if all exist.
  bool byte_fallback = false;
  // Else it becomes this token (or, without one, is dropped).
  std::optional<int32_t> unk_id;
  // Consecutive unknown characters make one unknown token.
  bool fuse_unk = false;
  // A piece that is a token as a whole is that token, without merging (Llama 3).
  bool ignore_merges = false;
};

// Working memory for encoding, kept across pieces so that a call allocates once, not per piece.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, or -1
    int32_t next;  // index of the next live symbol, or -1
    bool live;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // the left symbol
    int32_t id;   // what the pair merges into
    // The heap's top is the lowest rank, then the leftmost position.
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  // An unknown token not yet added: Hugging Face adds it only when a known character (or the
  // end) comes, so that fuse_unk can grow it.
  bool unk_pending = false;
};

class BpeModel {
 public:
  // `vocab`: token string → id. `merges`: pairs of token strings in rank order; both tokens and
  // their concatenation must be in `vocab` (INVALID_ARGUMENT naming the merge otherwise).
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      absl::flat_hash_map<std::string, int32_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& options);

  // Appends the ids of `piece` (raw bytes in byte-level mode, else valid UTF-8). Thread-safe.
  void Encode(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>* ids) const;

  const absl::flat_hash_map<std::string, int32_t>& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static constexpr size_t kSegmentSymbols = 64;
  BpeModel() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // Appends the symbols of one character that is not in the vocabulary.
  void AddUnknown(std::string_view character, BpeScratch& scratch) const;
  void MergeAll(BpeScratch& scratch) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  // (last character of a merge's left token, first character of its right token): the adjacent
  // characters that some merge may join.
  absl::flat_hash_set<uint64_t> joinable_;
  BpeOptions options_;
  int32_t byte_symbol_[256];    // byte-level mode: the token of each byte's spelling, or -1
  int32_t byte_fallback_[256];  // the "<0xXX>" tokens, or -1
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_BPE_H_
