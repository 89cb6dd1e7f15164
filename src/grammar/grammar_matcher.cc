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
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      machine_(&grammar_->program()),
      state_(machine_.InitialState()),
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
  const TokenVocabulary& v = *vocab_;
  const std::vector<int32_t>& tokens = v.node_tokens();
  walk_[0] = state_;
  const int32_t n = v.trie_size();
  for (int32_t i = 1; i < n;) {
    const int32_t depth = v.depth(i);
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
  if (machine_.IsComplete(state_)) {
    for (int32_t token : v.end_tokens()) mask[token >> 5] |= uint32_t{1} << (token & 31);
  }
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
