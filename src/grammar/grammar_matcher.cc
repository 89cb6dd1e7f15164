#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "grammar/limits.h"

namespace convoy::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab)
    : GrammarMatcher(grammar, vocab, grammar->MaskCacheFor(vocab)) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab,
                               std::shared_ptr<MaskCache> shared)
    : GrammarMatcher(grammar, vocab, std::move(shared), grammar->PositionMasksFor(vocab)) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab,
                               std::shared_ptr<MaskCache> shared,
                               std::shared_ptr<const PositionMasks> tables)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      machine_(&grammar_->program()),
      state_(machine_.InitialState()),
      tables_(std::move(tables)),
      walk_(vocab_->max_depth() + 1) {
  if (shared != nullptr && shared->IsFor(grammar_.get(), vocab_.get())) shared_ = std::move(shared);
}

void GrammarMatcher::FillNextTokenMask(uint32_t* bits) {
  const int32_t words = vocab_->mask_words();
  if (ended_ || state_ == StackMachine::kDead) {
    std::memset(bits, 0, sizeof(uint32_t) * words);
    return;
  }
  std::memcpy(bits, CurrentMask().data(), sizeof(uint32_t) * words);
}

const TokenMask& GrammarMatcher::CurrentMask() {
  if (auto it = mask_cache_.find(state_); it != mask_cache_.end()) return *it->second;
  if (static_cast<int64_t>(mask_cache_.size()) >= kMaxCachedMasks) mask_cache_.clear();
  std::shared_ptr<const TokenMask> mask;
  if (shared_ != nullptr) {
    key_.clear();
    machine_.AppendKey(state_, key_);
    mask = shared_->Find(key_);
  }
  if (mask == nullptr) {
    auto computed = std::make_shared<TokenMask>(vocab_->mask_words(), 0);
    ComputeMask(*computed);
    mask = std::move(computed);
    // A machine that dropped stacks may compute another mask than its peers for the same key.
    if (shared_ != nullptr && !machine_.dropped_stacks()) shared_->Insert(key_, mask);
  }
  return *mask_cache_.emplace(state_, std::move(mask)).first->second;
}

void GrammarMatcher::ComputeMask(TokenMask& mask) {
  // Past kMaxStacks a state's mask is no longer the union of its stacks' (which stacks a closure
  // keeps depends on all of them): walk the whole trie then.
  if (tables_ != nullptr && !machine_.dropped_stacks()) FromTables(mask);
  if (tables_ == nullptr || machine_.dropped_stacks()) {
    std::fill(mask.begin(), mask.end(), 0);
    WalkTrie(mask);
  }
  if (machine_.IsComplete(state_)) {
    for (int32_t token : vocab_->end_tokens()) mask[token >> 5] |= uint32_t{1} << (token & 31);
  }
}

void GrammarMatcher::FromTables(TokenMask& mask) {
  walked_.clear();
  // A copy: the walks below intern states, which may move the machine's.
  stacks_ = machine_.Stacks(state_);
  for (int32_t stack : stacks_) {
    const int32_t below = machine_.Below(stack);
    const int32_t table = tables_->TableFor(machine_.TopPosition(stack),
                                            below < 0 ? -1 : machine_.TopPosition(below));
    const std::vector<int32_t>& exits = tables_->Exits(table);
    int32_t after = StackMachine::kDead;
    if (!exits.empty()) after = machine_.AfterReturn(tables_->ExitsBelow(table) ? below : stack);
    if (std::find(walked_.begin(), walked_.end(), std::make_pair(table, after)) != walked_.end()) {
      continue;
    }
    walked_.emplace_back(table, after);
    tables_->OrAccepted(table, mask.data());
    if (!machine_.HasStacks(after)) continue;          // nothing may follow the return
    const ByteSet first = machine_.FirstBytes(after);  // a copy: walks may move states
    for (int32_t node : exits) {
      if (first.test(vocab_->byte(node))) WalkSubtree(node, after, mask);
    }
  }
}

void GrammarMatcher::WalkSubtree(int32_t node, int32_t state, TokenMask& mask) {
  const TokenVocabulary& v = *vocab_;
  const std::vector<int32_t>& tokens = v.node_tokens();
  const int32_t base = v.depth(node) - 1;
  walk_[0] = state;
  const int32_t end = v.subtree_end(node);
  for (int32_t i = node; i < end;) {
    const int32_t depth = v.depth(i) - base;
    const int32_t next = machine_.Advance(walk_[depth - 1], v.byte(i));
    if (next == StackMachine::kDead) {
      i = v.subtree_end(i);
      continue;
    }
    walk_[depth] = next;
    for (int32_t k = v.token_begin(i); k < v.token_begin(i + 1); ++k) {
      mask[tokens[k] >> 5] |= uint32_t{1} << (tokens[k] & 31);
    }
    ++i;
  }
}

// A walk of the trie, one cached transition per node, skipping a subtree at its first refused
// byte. A subtree below a state that every byte of the subtree leads back to (inside a string,
// say) is allowed whole without a walk: each of its tokens stays in that state. Such loop bytes
// are found for the states at the first two depths (the root's, and those after one byte).
void GrammarMatcher::WalkTrie(TokenMask& mask) {
  const TokenVocabulary& v = *vocab_;
  const std::vector<int32_t>& tokens = v.node_tokens();
  auto allow = [&](int32_t begin, int32_t end) {
    for (int32_t k = begin; k < end; ++k) mask[tokens[k] >> 5] |= uint32_t{1} << (tokens[k] & 31);
  };
  loops_.clear();
  loops_.reserve(kMaxLoopStates);
  walk_[0] = state_;
  const int32_t n = v.trie_size();
  for (int32_t i = 1; i < n;) {
    const int32_t depth = v.depth(i);
    const int32_t from = walk_[depth - 1];
    if (depth <= 2) {
      const std::array<uint64_t, 4>& loop = LoopBytes(from);
      const std::array<uint64_t, 4>& sub = v.subtree_bytes(i);
      if ((sub[0] & ~loop[0]) == 0 && (sub[1] & ~loop[1]) == 0 && (sub[2] & ~loop[2]) == 0 &&
          (sub[3] & ~loop[3]) == 0) {
        allow(v.token_begin(i), v.token_begin(v.subtree_end(i)));
        i = v.subtree_end(i);
        continue;
      }
    }
    const int32_t next = machine_.Advance(from, v.byte(i));
    if (next == StackMachine::kDead) {
      i = v.subtree_end(i);
      continue;
    }
    walk_[depth] = next;
    allow(v.token_begin(i), v.token_begin(i + 1));
    ++i;
  }
}

const std::array<uint64_t, 4>& GrammarMatcher::LoopBytes(int32_t state) {
  for (const auto& [s, bytes] : loops_) {
    if (s == state) return bytes;
  }
  static constexpr std::array<uint64_t, 4> kNone = {0, 0, 0, 0};
  if (loops_.size() >= kMaxLoopStates) return kNone;
  std::array<uint64_t, 4> bytes = {0, 0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    if (machine_.Advance(state, static_cast<uint8_t>(b)) == state) {
      bytes[b >> 6] |= uint64_t{1} << (b & 63);
    }
  }
  return loops_.emplace_back(state, bytes).second;
}

absl::Status GrammarMatcher::AcceptToken(int32_t token) {
  if (token < 0 || token >= vocab_->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is not in the vocabulary of ", vocab_->size()));
  }
  const std::string& bytes = vocab_->token_bytes(token);
  auto refuse = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " (\"", absl::CHexEscape(bytes), "\") ", why));
  };
  if (ended_) return refuse("follows an end token");
  if (vocab_->is_end_token(token)) {
    if (!machine_.IsComplete(state_)) return refuse("ends the text before the grammar is complete");
    ended_ = true;
    return absl::OkStatus();
  }
  if (bytes.empty()) return refuse("is a special token, which no grammar allows");
  int32_t state = state_;
  for (char c : bytes) {
    if (state == StackMachine::kDead) break;
    state = machine_.Advance(state, static_cast<uint8_t>(c));
  }
  if (state == StackMachine::kDead) return refuse("is not allowed by the grammar here");
  state_ = state;
  if (machine_.state_count() > kMaxCachedStates || machine_.node_count() > kMaxCachedNodes) {
    state_ = machine_.Rebuild(state_);
    mask_cache_.clear();
  }
  return absl::OkStatus();
}

bool GrammarMatcher::IsComplete() const { return machine_.IsComplete(state_); }

bool GrammarMatcher::IsTerminated() const {
  return ended_ || (machine_.IsComplete(state_) && !machine_.HasStacks(state_));
}

}  // namespace convoy::grammar
