// Per grammar position, the tokens whose fate that position decides alone, computed once per
// grammar and vocabulary, so that a state never seen before costs a few table lookups instead of a
// walk of the vocabulary's trie (the split of XGrammar's adaptive token mask cache).
//
// A stack is a byte-set position p on top of a return node P (stack_machine.h). A token is allowed
// from it when its bytes are matched either without leaving p's rule (p's rule may call others on
// the way), or by leaving p's rule after some prefix u of them and matching the rest from what P
// returns to. For each p, walking the trie from a stack of p alone, with nothing below, decides:
//   - accepted(p): tokens matched without leaving the rule, or that leave it exactly at their last
//     byte (a return always has a continuation, so nothing more is needed): allowed whatever P is;
//   - exits(p): the trie nodes c just past a node u at which p's rule may end, whose byte may
//     follow p's rule somewhere in the grammar (its FOLLOW set). The tokens of c's subtree depend
//     on P: the matcher walks it from the state after the return (StackMachine::AfterReturn), so
//     they cost a short walk, not a table.
// Every other token is refused from p whatever P is: a token is context-dependent only if its
// bytes past the rule's end could be matched after it.
//
// A small rule that ends after a byte or two (a string's character, a digit, a space) would leave
// exits everywhere, and their walks would cover most of the trie. For such a p (exits whose
// subtrees pass kSplitExitNodes trie nodes in all), there is also one table per position r that
// p's rule may return to (every one the grammar has, when they are at most kMaxReturns): walked
// from p over r with nothing below, so its exits are where r's rule ends, and its walks start from
// what the node below r returns to.
//
// The mask of a state is the union, over its stacks, of accepted(top) and the exits' walks: exact
// (bit for bit the trie walk's) whenever no closure passes kMaxStacks (see dropped_stacks()).
//
// Immutable once built; shared between matchers and threads.
#ifndef CONVOY_GRAMMAR_POSITION_MASKS_H_
#define CONVOY_GRAMMAR_POSITION_MASKS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grammar/program.h"
#include "grammar/token_vocabulary.h"

namespace convoy::grammar {

class PositionMasks {
 public:
  // nullptr when the tables would pass `max_bytes` or `max_transitions` (transitions computed
  // while building them), or when building them dropped stacks: matchers then walk the trie.
  static std::unique_ptr<const PositionMasks> Build(const Program& program,
                                                    const TokenVocabulary& vocab, int64_t max_bytes,
                                                    int64_t max_transitions);

  static constexpr int64_t kSplitExitNodes = 64;
  static constexpr int64_t kMaxReturns = 64;

  // The table for a stack with `pos` on top over a node at `return_pos` (-1: nothing below).
  // REQUIRES: pos is a byte-set position of the program.
  int32_t TableFor(int32_t pos, int32_t return_pos) const;
  // Sets the bits of the table's accepted tokens in `mask` ((vocab size + 31) / 32 words).
  void OrAccepted(int32_t table, uint32_t* mask) const;
  // The table's exits: trie nodes, in preorder, each walked with its subtree.
  const std::vector<int32_t>& Exits(int32_t table) const { return tables_[table].exits; }
  // The exits are where the rule of the node below the top one ends (a table per return
  // position), not the top one's.
  bool ExitsBelow(int32_t table) const { return tables_[table].below; }

  int64_t table_count() const { return static_cast<int64_t>(tables_.size()); }
  int64_t bytes() const { return bytes_; }

 private:
  struct Table {
    // The accepted tokens as a bitset when that is smaller than a list of token ids, else as the
    // list.
    std::vector<uint32_t> bits;
    std::vector<int32_t> tokens;
    std::vector<int32_t> exits;
    bool below = false;
  };
  PositionMasks() = default;

  std::vector<Table> tables_;
  std::vector<int32_t> table_of_;  // by position: its table (-1: not a byte set)
  std::vector<bool> split_;        // by position: has a table per return position
  absl::flat_hash_map<uint64_t, int32_t> table_of_return_;  // by (position, return position)
  int64_t bytes_ = 0;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_POSITION_MASKS_H_
