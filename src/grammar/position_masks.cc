#include "grammar/position_masks.h"

#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
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

// Walks the trie once per byte-set position, with one machine shared by every walk (so the walks
// share their transitions) that starts over when it grows past the matcher's limits.
class Builder {
 public:
  Builder(const Program& program, const TokenVocabulary& vocab)
      : program_(program),
        vocab_(vocab),
        machine_(std::make_unique<StackMachine>(&program)),
        walk_(vocab.max_depth() + 1) {}

  // Fills accepted and exits for `pos`; false when a closure dropped stacks.
  bool Walk(int32_t pos, const ByteSet& follow, std::vector<int32_t>& accepted,
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

bool Builder::Walk(int32_t pos, const ByteSet& follow, std::vector<int32_t>& accepted,
                   std::vector<int32_t>& exits) {
  if (machine_->state_count() > kMaxCachedStates || machine_->node_count() > kMaxCachedNodes) {
    machine_ = std::make_unique<StackMachine>(&program_);
    loops_.clear();
  }
  const TokenVocabulary& v = vocab_;
  const std::vector<int32_t>& tokens = v.node_tokens();
  auto accept = [&](int32_t begin, int32_t end) {
    accepted.insert(accepted.end(), tokens.begin() + begin, tokens.begin() + end);
  };
  walk_[0] = machine_->StateOfPosition(pos);
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
        if (follow.test(v.byte(child))) {
          exits.push_back(i);
          break;
        }
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
  masks->tables_.resize(positions);
  masks->bytes_ = static_cast<int64_t>(positions * sizeof(Table));
  if (masks->bytes_ > max_bytes) return nullptr;
  const std::vector<ByteSet> follow = FollowSets(program);
  Builder builder(program, vocab);
  int32_t rule = -1;  // the rule of the positions from here to the next kEnd
  std::vector<int32_t> accepted;
  for (int32_t pos = positions - 1; pos >= 0; --pos) {
    const Element& el = program.elements[pos];
    if (el.kind == Element::kEnd) rule = el.arg;
    if (el.kind != Element::kSet) continue;
    Table& table = masks->tables_[pos];
    accepted.clear();
    if (!builder.Walk(pos, follow[rule], accepted, table.exits)) return nullptr;
    if (static_cast<int64_t>(accepted.size()) * 32 >= vocab.size()) {
      table.bits.assign(vocab.mask_words(), 0);
      for (int32_t t : accepted) table.bits[t >> 5] |= uint32_t{1} << (t & 31);
    } else {
      table.tokens = accepted;
    }
    table.exits.shrink_to_fit();
    masks->bytes_ += static_cast<int64_t>(
        sizeof(int32_t) * (table.bits.size() + table.tokens.size() + table.exits.size()));
    if (masks->bytes_ > max_bytes || builder.steps() > max_transitions) return nullptr;
  }
  return masks;
}

void PositionMasks::OrAccepted(int32_t pos, uint32_t* mask) const {
  const Table& table = tables_[pos];
  const uint32_t* bits = table.bits.data();
  for (size_t w = 0; w < table.bits.size(); ++w) mask[w] |= bits[w];
  for (int32_t t : table.tokens) mask[t >> 5] |= uint32_t{1} << (t & 31);
}

}  // namespace convoy::grammar
