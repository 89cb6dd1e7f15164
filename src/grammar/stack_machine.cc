#include "grammar/stack_machine.h"

#include <algorithm>
#include <utility>

#include "grammar/limits.h"

namespace convoy::grammar {

StackMachine::StackMachine(const Program* program) : program_(program) {}

int32_t StackMachine::InitialState() {
  const Program& p = *program_;
  work_.clear();
  for (int32_t a = p.rule_alts[p.root]; a < p.rule_alts[p.root + 1]; ++a) {
    work_.emplace_back(p.alt_starts[a], kBottom);
  }
  std::vector<int32_t> nodes;
  bool complete = false;
  Close(nodes, complete);
  return InternState(std::move(nodes), complete);
}

int32_t StackMachine::StateOfPosition(int32_t pos, int32_t return_pos) {
  work_.clear();
  work_.emplace_back(pos, return_pos < 0 ? kBottom : InternNode(return_pos, kBottom));
  std::vector<int32_t> nodes;
  bool complete = false;
  Close(nodes, complete);
  return InternState(std::move(nodes), complete);
}

int32_t StackMachine::AfterReturnSlow(int32_t stack) {
  work_.clear();
  const int32_t parent = nodes_[stack].parent;
  if (parent != kBottom) work_.emplace_back(nodes_[parent].pos, nodes_[parent].parent);
  std::vector<int32_t> nodes;
  bool complete = parent == kBottom;
  Close(nodes, complete);
  // Close interned nodes: look the slot up only now.
  if (after_return_.size() < nodes_.size()) after_return_.resize(nodes_.size(), kUnknown);
  const int32_t state = InternState(std::move(nodes), complete);
  after_return_[stack] = state;
  return state;
}

int32_t StackMachine::AdvanceSlow(int32_t state, uint8_t byte) {
  const Program& p = *program_;
  work_.clear();
  for (int32_t id : states_[state].nodes) {
    const Node node = nodes_[id];
    if (p.sets[p.elements[node.pos].arg].test(byte)) work_.emplace_back(node.pos + 1, node.parent);
  }
  std::vector<int32_t> nodes;
  bool complete = false;
  Close(nodes, complete);
  const int32_t next = InternState(std::move(nodes), complete);
  if (row_of_state_[state] < 0) {
    row_of_state_[state] = static_cast<int32_t>(transitions_.size() / 256);
    transitions_.resize(transitions_.size() + 256, kUnknown);
  }
  transitions_[static_cast<size_t>(row_of_state_[state]) * 256 + byte] = next;
  return next;
}

void StackMachine::Close(std::vector<int32_t>& nodes, bool& complete) {
  const Program& p = *program_;
  visited_.clear();
  while (!work_.empty()) {
    const auto [pos, parent] = work_.back();
    work_.pop_back();
    const uint64_t key = (static_cast<uint64_t>(pos) << 32) | static_cast<uint32_t>(parent);
    if (!visited_.insert(key).second) continue;
    const Element& el = p.elements[pos];
    switch (el.kind) {
      case Element::kSet:
        if (static_cast<int64_t>(nodes.size()) < kMaxStacks) {
          nodes.push_back(InternNode(pos, parent));
        } else {
          dropped_stacks_ = true;
        }
        break;
      case Element::kEnd:
        if (parent == kBottom) {
          complete = true;
        } else {
          work_.emplace_back(nodes_[parent].pos, nodes_[parent].parent);
        }
        break;
      case Element::kRef: {
        const int32_t ret = pos + 1;
        const int32_t callee_parent =
            p.elements[ret].kind == Element::kEnd ? parent : InternNode(ret, parent);
        for (int32_t a = p.rule_alts[el.arg]; a < p.rule_alts[el.arg + 1]; ++a) {
          work_.emplace_back(p.alt_starts[a], callee_parent);
        }
        break;
      }
    }
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
}

int32_t StackMachine::InternNode(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back(Node{pos, parent});
  return it->second;
}

int32_t StackMachine::InternState(std::vector<int32_t> nodes, bool complete) {
  if (nodes.empty() && !complete) return kDead;
  nodes.push_back(complete ? -1 : -2);  // the key carries the flag
  auto [it, inserted] = state_ids_.try_emplace(nodes, static_cast<int32_t>(states_.size()));
  if (inserted) {
    nodes.pop_back();
    states_.push_back(State{std::move(nodes), complete, false, ByteSet()});
    row_of_state_.push_back(-1);
  }
  return it->second;
}

void StackMachine::AppendKey(int32_t state, std::string& key) const {
  // Each stack as positions ending in -1 (positions are >= 0, so the encoding is unambiguous), the
  // stacks sorted, after one byte for completeness.
  std::vector<std::vector<int32_t>> stacks;
  stacks.reserve(states_[state].nodes.size());
  for (int32_t id : states_[state].nodes) {
    std::vector<int32_t>& positions = stacks.emplace_back();
    for (int32_t n = id; n != kBottom; n = nodes_[n].parent) positions.push_back(nodes_[n].pos);
    positions.push_back(-1);
  }
  std::sort(stacks.begin(), stacks.end());
  key.push_back(states_[state].complete ? 'c' : 'p');
  for (const std::vector<int32_t>& positions : stacks) {
    key.append(reinterpret_cast<const char*>(positions.data()), positions.size() * sizeof(int32_t));
  }
}

int32_t StackMachine::Rebuild(int32_t state) {
  if (state < 0) return state;
  // Each stack as its positions, top first.
  std::vector<std::vector<int32_t>> stacks;
  for (int32_t id : states_[state].nodes) {
    std::vector<int32_t> positions;
    for (int32_t n = id; n != kBottom; n = nodes_[n].parent) positions.push_back(nodes_[n].pos);
    stacks.push_back(std::move(positions));
  }
  const bool complete = states_[state].complete;
  nodes_.clear();
  node_ids_.clear();
  states_.clear();
  state_ids_.clear();
  row_of_state_.clear();
  transitions_.clear();
  after_return_.clear();
  std::vector<int32_t> nodes;
  for (const std::vector<int32_t>& positions : stacks) {
    int32_t parent = kBottom;
    for (auto it = positions.rbegin(); it != positions.rend(); ++it)
      parent = InternNode(*it, parent);
    nodes.push_back(parent);
  }
  std::sort(nodes.begin(), nodes.end());
  return InternState(std::move(nodes), complete);
}

}  // namespace convoy::grammar
