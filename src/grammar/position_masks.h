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
//   - exits(p): the trie nodes u at which p's rule may end with more bytes below u in the trie. The
//     tokens below such a u depend on P: the matcher walks u's subtree from the state after the
//     return (StackMachine::AfterReturn), so they cost a short walk, not a table.
// Every other token is refused from p whatever P is. A node u is kept in exits(p) only when one of
// its children's bytes may follow p's rule somewhere in the grammar (its FOLLOW set), so that a
// token is context-dependent only if its bytes past the rule could be matched after it.
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

  // Sets the bits of accepted(pos) in `mask` ((vocab size + 31) / 32 words).
  // REQUIRES: pos is a byte-set position of the program.
  void OrAccepted(int32_t pos, uint32_t* mask) const;
  // exits(pos): trie nodes, in preorder.
  const std::vector<int32_t>& Exits(int32_t pos) const { return tables_[pos].exits; }

  int64_t bytes() const { return bytes_; }

 private:
  struct Table {
    // accepted(p) as a bitset when that is smaller than a list of token ids, else as the list.
    std::vector<uint32_t> bits;
    std::vector<int32_t> tokens;
    std::vector<int32_t> exits;
  };
  PositionMasks() = default;

  std::vector<Table> tables_;  // by position; empty for positions that are not byte sets
  int64_t bytes_ = 0;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_POSITION_MASKS_H_
