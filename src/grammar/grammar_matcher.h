// Drives a compiled grammar over a model's tokens: which tokens may come next, and advancing by
// the one chosen. One per generated sequence; not thread-safe.
//
// A state's mask comes from the grammar's PositionMasks (per byte-set position, the tokens that
// position decides alone, and short walks for the rest), or, without them, from a walk of the
// vocabulary's trie. Masks are cached per state, in the matcher and in a MaskCache shared with
// every other matcher of the same grammar and vocabulary (on other threads too), so a state an
// earlier request has seen costs a lookup.
#ifndef CONVOY_GRAMMAR_GRAMMAR_MATCHER_H_
#define CONVOY_GRAMMAR_GRAMMAR_MATCHER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/position_masks.h"
#include "grammar/stack_machine.h"
#include "grammar/token_vocabulary.h"

namespace convoy::grammar {

class GrammarMatcher {
 public:
  // Shares masks through grammar->MaskCacheFor(vocab) and computes them from
  // grammar->PositionMasksFor(vocab) (which the first matcher of a grammar and vocabulary builds).
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab);
  // Shares masks through `shared` instead; nullptr (or a cache made for another grammar or
  // vocabulary) shares none: every mask is computed here.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab, std::shared_ptr<MaskCache> shared);
  // Computes masks from `tables` instead; nullptr walks the trie for every mask (the reference
  // the tables are tested against). REQUIRES: `tables` built for this grammar and vocabulary.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab, std::shared_ptr<MaskCache> shared,
                 std::shared_ptr<const PositionMasks> tables);

  // bits has (vocab size + 31) / 32 words; sets bit i (word i/32, bit i%32) iff token i may come
  // next. End tokens are set iff the text so far is a complete match. All clear once an end token
  // was accepted.
  void FillNextTokenMask(uint32_t* bits);
  // Advances by a chosen token. INVALID_ARGUMENT (naming the token) if it was not allowed (or is
  // out of the vocabulary); state unchanged then.
  absl::Status AcceptToken(int32_t token);
  // The text so far matches the whole grammar (an end token may come).
  bool IsComplete() const;
  // An end token was accepted, or the text is complete and nothing more can follow.
  bool IsTerminated() const;

 private:
  // The mask of state_: from this matcher's cache, the shared one, or a walk of the trie.
  const TokenMask& CurrentMask();
  void ComputeMask(TokenMask& mask);
  // ComputeMask's two ways: a walk of the whole trie, or the tables and a walk per exit.
  void WalkTrie(TokenMask& mask);
  void FromTables(TokenMask& mask);
  // Sets the tokens of trie node `node`'s subtree that `state` matches after the prefix of node's
  // parent.
  void WalkSubtree(int32_t node, int32_t state, TokenMask& mask);
  // The bytes that lead `state` back to itself (bit b of word b / 64), for up to kMaxLoopStates
  // states per walk (none for the others). REQUIRES: state != kDead.
  const std::array<uint64_t, 4>& LoopBytes(int32_t state);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  StackMachine machine_;
  int32_t state_;
  bool ended_ = false;
  std::shared_ptr<MaskCache> shared_;                                          // or nullptr
  std::shared_ptr<const PositionMasks> tables_;                                // or nullptr
  absl::flat_hash_map<int32_t, std::shared_ptr<const TokenMask>> mask_cache_;  // by state
  std::string key_;
  std::vector<int32_t> walk_;  // the state after each depth of the trie walk
  static constexpr size_t kMaxLoopStates = 8;
  std::vector<std::pair<int32_t, std::array<uint64_t, 4>>> loops_;  // LoopBytes' of this walk
  std::vector<int32_t> stacks_;                      // FromTables' copy of the state's stacks
  std::vector<std::pair<int32_t, int32_t>> walked_;  // FromTables' (table, return state) pairs
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_GRAMMAR_MATCHER_H_
