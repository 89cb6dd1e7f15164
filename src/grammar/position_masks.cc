#include "grammar/position_masks.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "grammar/limits.h"
#include "grammar/stack_machine.h"

namespace convoy::grammar {
namespace {

// Per rule, the bytes that may come first after it ends, wherever it is called (the classic FOLLOW
// set, over bytes): what a return from it can match first is always among them.
std::vector<ByteSet> FollowSets(const Program& p) {
  const int32_t rules = p.rule_count();
  std::vector<bool> nullable(rules, false);
  std::vector<ByteSet> first(rules);
  // Each alternative as [start, end) with elements[end] its kEnd.
  std::vector<std::pair<int32_t, int32_t>> alts;
  std::vector<int32_t> alt_rule;
  for (int32_t r = 0; r < rules; ++r) {
    for (int32_t a = p.rule_alts[r]; a < p.rule_alts[r + 1]; ++a) {
      int32_t end = p.alt_starts[a];
      while (p.elements[end].kind != Element::kEnd) ++end;
      alts.emplace_back(p.alt_starts[a], end);
      alt_rule.push_back(r);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t a = 0; a < alts.size(); ++a) {
      const int32_t r = alt_rule[a];
      ByteSet f;
      bool empty = true;
      for (int32_t i = alts[a].first; i < alts[a].second && empty; ++i) {
        const Element& el = p.elements[i];
        if (el.kind == Element::kSet) {
          f |= p.sets[el.arg];
          empty = false;
        } else {
          f |= first[el.arg];
          empty = nullable[el.arg];
        }
      }
      if ((first[r] | f) != first[r]) {
        first[r] |= f;
        changed = true;
      }
      if (empty && !nullable[r]) {
        nullable[r] = true;
        changed = true;
      }
    }
  }
  std::vector<ByteSet> follow(rules);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t a = 0; a < alts.size(); ++a) {
      ByteSet suffix;  // what may come first after element i, within the alternative
      bool suffix_empty = true;
      for (int32_t i = alts[a].second - 1; i >= alts[a].first; --i) {
        const Element& el = p.elements[i];
        if (el.kind == Element::kSet) {
          suffix = p.sets[el.arg];
          suffix_empty = false;
          continue;
        }
        ByteSet f = suffix;
        if (suffix_empty) f |= follow[alt_rule[a]];
        if ((follow[el.arg] | f) != follow[el.arg]) {
          follow[el.arg] |= f;
          changed = true;
        }
        if (nullable[el.arg]) {
          suffix |= first[el.arg];
        } else {
          suffix = first[el.arg];
          suffix_empty = false;
        }
      }
    }
  }
  return follow;
}

// The rule of each position (that of the alternative it belongs to).
std::vector<int32_t> RuleOfPositions(const Program& p) {
  std::vector<int32_t> rule_of(p.elements.size(), -1);
  int32_t rule = -1;
  for (int32_t pos = static_cast<int32_t>(p.elements.size()) - 1; pos >= 0; --pos) {
    if (p.elements[pos].kind == Element::kEnd) rule = p.elements[pos].arg;
    rule_of[pos] = rule;
  }
  return rule_of;
}

// Per rule, the positions its calls may return to (-1: the root's caller): after each call that
// is not the last element of its alternative, and, for a call that is (a tail call, which pushes
// nothing), the positions the caller's rule returns to.
class ReturnPositions {
 public:
  ReturnPositions(const Program& p, const std::vector<int32_t>& rule_of)
      : program_(p), rule_of_(rule_of), callers_(p.rule_count()) {
    for (int32_t pos = 0; pos < static_cast<int32_t>(p.elements.size()); ++pos) {
      if (p.elements[pos].kind == Element::kRef) callers_[p.elements[pos].arg].push_back(pos);
    }
  }

  // Sorted; nullptr when there are more than `max`.
  const std::vector<int32_t>* Of(int32_t rule, int64_t max) {
    auto [it, inserted] = memo_.try_emplace(rule);
    if (!inserted) return it->second.empty() ? nullptr : &it->second;
    absl::flat_hash_set<int32_t> found;
    std::vector<bool> seen(program_.rule_count(), false);
    std::vector<int32_t> todo = {rule};
    seen[rule] = true;
    while (!todo.empty() && static_cast<int64_t>(found.size()) <= max) {
      const int32_t r = todo.back();
      todo.pop_back();
      if (r == program_.root) found.insert(-1);
      for (int32_t call : callers_[r]) {
        if (program_.elements[call + 1].kind != Element::kEnd) {
          found.insert(call + 1);
        } else if (!seen[rule_of_[call]]) {
          seen[rule_of_[call]] = true;
          todo.push_back(rule_of_[call]);
        }
      }
    }
    std::vector<int32_t> out;
    if (static_cast<int64_t>(found.size()) <= max) out.assign(found.begin(), found.end());
    std::sort(out.begin(), out.end());
    it->second = std::move(out);
    return it->second.empty() ? nullptr : &it->second;
  }

 private:
  const Program& program_;
  const std::vector<int32_t>& rule_of_;
  std::vector<std::vector<int32_t>> callers_;  // per rule: its call positions
  absl::flat_hash_map<int32_t, std::vector<int32_t>> memo_;
};

// Walks the trie once per byte-set position, with one machine shared by every walk (so the walks
// share their transitions) that starts over when it grows past the matcher's limits.
class Builder {
 public:
  Builder(const Program& program, const TokenVocabulary& vocab)
      : program_(program),
        vocab_(vocab),
        machine_(std::make_unique<StackMachine>(&program)),
        walk_(vocab.max_depth() + 1) {}

  // Fills accepted and exits for `pos` over `return_pos`; false when a closure dropped stacks.
  bool Walk(int32_t pos, int32_t return_pos, const ByteSet& follow, std::vector<int32_t>& accepted,
            std::vector<int32_t>& exits);
  int64_t steps() const { return steps_; }

 private:
  int32_t Advance(int32_t state, uint8_t byte) {
    ++steps_;
    return machine_->Advance(state, byte);
  }
  const std::array<uint64_t, 4>& LoopBytes(int32_t state);

  const Program& program_;
  const TokenVocabulary& vocab_;
  std::unique_ptr<StackMachine> machine_;
  std::vector<int32_t> walk_;
  absl::flat_hash_map<int32_t, std::array<uint64_t, 4>> loops_;  // by state of machine_
  int64_t steps_ = 0;
};

bool Builder::Walk(int32_t pos, int32_t return_pos, const ByteSet& follow,
                   std::vector<int32_t>& accepted, std::vector<int32_t>& exits) {
  if (machine_->state_count() > kMaxCachedStates || machine_->node_count() > kMaxCachedNodes) {
    machine_ = std::make_unique<StackMachine>(&program_);
    loops_.clear();
  }
  const TokenVocabulary& v = vocab_;
  const std::vector<int32_t>& tokens = v.node_tokens();
  auto accept = [&](int32_t begin, int32_t end) {
    accepted.insert(accepted.end(), tokens.begin() + begin, tokens.begin() + end);
  };
  walk_[0] = machine_->StateOfPosition(pos, return_pos);
  const int32_t n = v.trie_size();
  for (int32_t i = 1; i < n;) {
    const int32_t depth = v.depth(i);
    const int32_t from = walk_[depth - 1];
    // A subtree whose bytes all lead `from` back to itself is matched whole, and (`from` not
    // being complete) leaves the rule nowhere.
    if (depth <= 2 && !machine_->IsComplete(from)) {
      const std::array<uint64_t, 4>& loop = LoopBytes(from);
      const std::array<uint64_t, 4>& sub = v.subtree_bytes(i);
      if ((sub[0] & ~loop[0]) == 0 && (sub[1] & ~loop[1]) == 0 && (sub[2] & ~loop[2]) == 0 &&
          (sub[3] & ~loop[3]) == 0) {
        accept(v.token_begin(i), v.token_begin(v.subtree_end(i)));
        i = v.subtree_end(i);
        continue;
      }
    }
    const int32_t next = Advance(from, v.byte(i));
    if (next == StackMachine::kDead) {
      i = v.subtree_end(i);
      continue;
    }
    walk_[depth] = next;
    accept(v.token_begin(i), v.token_begin(i + 1));
    if (machine_->IsComplete(next)) {
      for (int32_t child = i + 1; child < v.subtree_end(i); child = v.subtree_end(child)) {
        if (follow.test(v.byte(child))) exits.push_back(child);
      }
    }
    ++i;
  }
  return !machine_->dropped_stacks();
}

const std::array<uint64_t, 4>& Builder::LoopBytes(int32_t state) {
  auto [it, inserted] = loops_.try_emplace(state);
  if (inserted) {
    std::array<uint64_t, 4> bytes = {0, 0, 0, 0};
    for (int b = 0; b < 256; ++b) {
      if (Advance(state, static_cast<uint8_t>(b)) == state) {
        bytes[b >> 6] |= uint64_t{1} << (b & 63);
      }
    }
    it->second = bytes;
  }
  return it->second;
}

}  // namespace

std::unique_ptr<const PositionMasks> PositionMasks::Build(const Program& program,
                                                          const TokenVocabulary& vocab,
                                                          int64_t max_bytes,
                                                          int64_t max_transitions) {
  std::unique_ptr<PositionMasks> masks(new PositionMasks());
  const int32_t positions = static_cast<int32_t>(program.elements.size());
  masks->table_of_.assign(positions, -1);
  masks->split_.assign(positions, false);
  masks->bytes_ = static_cast<int64_t>(positions * (sizeof(int32_t) + 1));
  const std::vector<ByteSet> follow = FollowSets(program);
  const std::vector<int32_t> rule_of = RuleOfPositions(program);
  ReturnPositions returns(program, rule_of);
  Builder builder(program, vocab);
  std::vector<int32_t> accepted;
  // Adds the table of `pos` over `return_pos`; false past a limit.
  auto add = [&](int32_t pos, int32_t return_pos) {
    Table& table = masks->tables_.emplace_back();
    table.below = return_pos >= 0;
    accepted.clear();
    const ByteSet& after = follow[rule_of[return_pos >= 0 ? return_pos : pos]];
    if (!builder.Walk(pos, return_pos, after, accepted, table.exits)) return false;
    if (static_cast<int64_t>(accepted.size()) * 32 >= vocab.size()) {
      table.bits.assign(vocab.mask_words(), 0);
      for (int32_t t : accepted) table.bits[t >> 5] |= uint32_t{1} << (t & 31);
    } else {
      table.tokens = accepted;
    }
    table.exits.shrink_to_fit();
    masks->bytes_ += static_cast<int64_t>(
        sizeof(Table) +
        sizeof(int32_t) * (table.bits.size() + table.tokens.size() + table.exits.size()));
    return masks->bytes_ <= max_bytes && builder.steps() <= max_transitions;
  };
  for (int32_t pos = 0; pos < positions; ++pos) {
    if (program.elements[pos].kind != Element::kSet) continue;
    masks->table_of_[pos] = static_cast<int32_t>(masks->tables_.size());
    if (!add(pos, -1)) return nullptr;
    int64_t exit_nodes = 0;
    for (int32_t node : masks->tables_.back().exits) exit_nodes += vocab.subtree_end(node) - node;
    if (exit_nodes <= kSplitExitNodes) continue;
    const std::vector<int32_t>* to = returns.Of(rule_of[pos], kMaxReturns);
    if (to == nullptr) continue;
    masks->split_[pos] = true;
    for (int32_t return_pos : *to) {
      if (return_pos < 0) continue;  // the single table serves: nothing follows the root
      masks->table_of_return_[(uint64_t{static_cast<uint32_t>(pos)} << 32) |
                              static_cast<uint32_t>(return_pos)] =
          static_cast<int32_t>(masks->tables_.size());
      if (!add(pos, return_pos)) return nullptr;
    }
  }
  masks->bytes_ += static_cast<int64_t>(masks->table_of_return_.size() * 16);
  if (masks->bytes_ > max_bytes) return nullptr;
  return masks;
}

int32_t PositionMasks::TableFor(int32_t pos, int32_t return_pos) const {
  if (split_[pos] && return_pos >= 0) {
    auto it = table_of_return_.find((uint64_t{static_cast<uint32_t>(pos)} << 32) |
                                    static_cast<uint32_t>(return_pos));
    if (it != table_of_return_.end()) return it->second;
  }
  return table_of_[pos];
}

void PositionMasks::OrAccepted(int32_t table, uint32_t* mask) const {
  const Table& t = tables_[table];
  const uint32_t* bits = t.bits.data();
  for (size_t w = 0; w < t.bits.size(); ++w) mask[w] |= bits[w];
  for (int32_t token : t.tokens) mask[token >> 5] |= uint32_t{1} << (token & 31);
}

}  // namespace convoy::grammar
