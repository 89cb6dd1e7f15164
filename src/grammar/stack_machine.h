// The grammar's pushdown automaton over bytes, with interned stacks and states.
//
// A stack is a node: the position of the element to match next (always a byte set) and the node
// to return to when its rule's alternative ends (kBottom: the root's caller). Nodes are interned,
// so a stack is one id and stacks share their tails. A call in tail position pushes nothing, so
// right-recursive loops run in constant stack depth. A state is the set of stacks alive after some
// text, plus whether that text completes the root; states are interned too, and each state's
// transitions are cached once computed, so the automaton becomes a lazily built DFA.
//
// Not thread-safe; one per matcher.
#ifndef CONVOY_GRAMMAR_STACK_MACHINE_H_
#define CONVOY_GRAMMAR_STACK_MACHINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "grammar/program.h"

namespace convoy::grammar {

class StackMachine {
 public:
  static constexpr int32_t kDead = -1;  // the state with no stack left: the text cannot go on

  // REQUIRES: `program` outlives the machine.
  explicit StackMachine(const Program* program);

  // The state before any text.
  int32_t InitialState();
  // The state of one stack: `pos` on top, over `return_pos` when that is not -1, and nothing
  // below, so that the end of the bottom rule makes the state complete (it stands for a return to
  // whatever lies below). REQUIRES: `pos` is a byte-set element; `return_pos` is -1 or the
  // element after a rule reference that is not the end of its alternative.
  int32_t StateOfPosition(int32_t pos, int32_t return_pos = -1);
  // The state after `state` then `byte`; kDead when no stack can take it.
  // REQUIRES: state != kDead.
  int32_t Advance(int32_t state, uint8_t byte) {
    const int32_t row = row_of_state_[state];
    if (row >= 0) {
      const int32_t next = transitions_[static_cast<size_t>(row) * 256 + byte];
      if (next != kUnknown) return next;
    }
    return AdvanceSlow(state, byte);
  }
  // The text so far matches the whole grammar.
  bool IsComplete(int32_t state) const { return state >= 0 && states_[state].complete; }
  // Some stack is alive: more text may follow.
  bool HasStacks(int32_t state) const { return state >= 0 && !states_[state].nodes.empty(); }
  // The bytes some stack of `state` takes: Advance(state, b) != kDead only for these. Cached;
  // the reference lasts until the next call that may add a state. REQUIRES: state != kDead.
  const ByteSet& FirstBytes(int32_t state) {
    State& s = states_[state];
    if (!s.first_bytes_known) {
      for (int32_t id : s.nodes)
        s.first_bytes |= program_->sets[program_->elements[nodes_[id].pos].arg];
      s.first_bytes_known = true;
    }
    return s.first_bytes;
  }

  // The stacks of a state, each as its top node. REQUIRES: state != kDead.
  const std::vector<int32_t>& Stacks(int32_t state) const { return states_[state].nodes; }
  // The position of a stack's top node (a byte-set element), and the node below it (-1: none; a
  // node's position is where its rule resumes after the rule above it returns).
  int32_t TopPosition(int32_t stack) const { return nodes_[stack].pos; }
  int32_t Below(int32_t stack) const { return nodes_[stack].parent; }
  // The state after the rule of `stack`'s top node ends: the closure of its return point
  // (complete with no stacks when nothing is below). Cached per node; any node of a stack may be
  // passed (Below's too).
  int32_t AfterReturn(int32_t stack) {
    if (static_cast<size_t>(stack) < after_return_.size() && after_return_[stack] != kUnknown) {
      return after_return_[stack];
    }
    return AfterReturnSlow(stack);
  }

  // Appends `state`'s canonical key: the same for two states, of any machines of one program,
  // exactly when they hold the same stacks (as positions from top to bottom) and the same
  // completeness. REQUIRES: state != kDead.
  void AppendKey(int32_t state, std::string& key) const;
  // Some closure had more than kMaxStacks stacks and dropped some. Until then every state and
  // transition is a function of the stacks alone, the same in every machine of the program; after,
  // which stacks survived depends on this machine's numbering. Never cleared.
  bool dropped_stacks() const { return dropped_stacks_; }

  int64_t state_count() const { return static_cast<int64_t>(states_.size()); }
  int64_t node_count() const { return static_cast<int64_t>(nodes_.size()); }
  // Forgets every state and node but `state`, which is rebuilt; returns its new id.
  int32_t Rebuild(int32_t state);

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kBottom = -1;
  struct Node {
    int32_t pos;
    int32_t parent;
  };
  struct State {
    std::vector<int32_t> nodes;  // sorted
    bool complete = false;
    bool first_bytes_known = false;
    ByteSet first_bytes;
  };

  int32_t AdvanceSlow(int32_t state, uint8_t byte);
  int32_t AfterReturnSlow(int32_t stack);
  // Follows calls and returns from each (position, parent) in work_ to byte-set positions.
  void Close(std::vector<int32_t>& nodes, bool& complete);
  int32_t InternNode(int32_t pos, int32_t parent);
  int32_t InternState(std::vector<int32_t> nodes, bool complete);

  const Program* program_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> state_ids_;
  std::vector<int32_t> row_of_state_;  // index of the state's 256 transitions, or -1
  std::vector<int32_t> transitions_;
  std::vector<int32_t> after_return_;  // per node: AfterReturn, or kUnknown
  std::vector<std::pair<int32_t, int32_t>> work_;
  absl::flat_hash_set<uint64_t> visited_;
  bool dropped_stacks_ = false;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_STACK_MACHINE_H_
