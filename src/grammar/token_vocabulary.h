// A model's vocabulary as the grammar matcher needs it: each token's bytes in a trie, and the
// tokens that end a sequence. Built once per model; immutable and shared between threads.
#ifndef CONVOY_GRAMMAR_TOKEN_VOCABULARY_H_
#define CONVOY_GRAMMAR_TOKEN_VOCABULARY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::grammar {

class TokenVocabulary {
 public:
  // token_bytes[i]: the bytes token i adds to the text when it follows other text (empty for
  // special/control tokens, which are never allowed by a grammar except the end tokens).
  // end_tokens: ids that end a sequence (EOS, <|im_end|>, ...): allowed exactly when the text so
  // far is complete; an end token's bytes are ignored.
  // INVALID_ARGUMENT: an end token out of range, or past kMaxVocabularySize / kMaxTokenBytes.
  static absl::StatusOr<std::shared_ptr<const TokenVocabulary>> Create(
      std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // Words of a mask: (size() + 31) / 32.
  int32_t mask_words() const { return (size() + 31) / 32; }
  const std::string& token_bytes(int32_t token) const { return token_bytes_[token]; }
  bool is_end_token(int32_t token) const { return is_end_[token]; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

  // The trie of every token with bytes that is not an end token, in depth-first preorder. Node 0
  // is the root (the empty prefix); node i > 0 adds byte(i) to its parent's prefix, sits at depth
  // depth(i) >= 1, and its subtree is nodes i .. subtree_end(i) - 1. Tokens whose bytes are node
  // i's prefix: node_tokens()[token_begin(i) .. token_begin(i + 1) - 1].
  int32_t trie_size() const { return static_cast<int32_t>(trie_byte_.size()); }
  uint8_t byte(int32_t node) const { return trie_byte_[node]; }
  int32_t depth(int32_t node) const { return trie_depth_[node]; }
  int32_t subtree_end(int32_t node) const { return trie_subtree_end_[node]; }
  int32_t token_begin(int32_t node) const { return trie_token_begin_[node]; }
  const std::vector<int32_t>& node_tokens() const { return trie_tokens_; }
  int32_t max_depth() const { return max_depth_; }
  // The bytes on the edges of node i's subtree, the edge into i included (bit b of word b / 64):
  // every token in the subtree is its parent's prefix followed by bytes of this set.
  const std::array<uint64_t, 4>& subtree_bytes(int32_t node) const {
    return trie_subtree_bytes_[node];
  }

 private:
  TokenVocabulary() = default;
  void BuildTrie();

  std::vector<std::string> token_bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<bool> is_end_;
  std::vector<uint8_t> trie_byte_;
  std::vector<int32_t> trie_depth_;
  std::vector<int32_t> trie_subtree_end_;
  std::vector<int32_t> trie_token_begin_;
  std::vector<int32_t> trie_tokens_;
  std::vector<std::array<uint64_t, 4>> trie_subtree_bytes_;  // 32 bytes per node
  int32_t max_depth_ = 0;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_TOKEN_VOCABULARY_H_
