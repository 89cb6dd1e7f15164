#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/limits.h"

namespace convoy::grammar {

absl::StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Create(
    std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens) {
  if (static_cast<int64_t>(token_bytes.size()) > kMaxVocabularySize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary of ", token_bytes.size(), " tokens is over the limit of ", kMaxVocabularySize));
  }
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (static_cast<int64_t>(token_bytes[i].size()) > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " has ", token_bytes[i].size(),
                                                     " bytes, over the limit of ", kMaxTokenBytes));
    }
  }
  std::shared_ptr<TokenVocabulary> vocab(new TokenVocabulary());
  vocab->is_end_.assign(token_bytes.size(), false);
  for (int32_t id : end_tokens) {
    if (id < 0 || id >= static_cast<int64_t>(token_bytes.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "end token ", id, " is not in the vocabulary of ", token_bytes.size(), " tokens"));
    }
    vocab->is_end_[id] = true;
  }
  std::sort(end_tokens.begin(), end_tokens.end());
  end_tokens.erase(std::unique(end_tokens.begin(), end_tokens.end()), end_tokens.end());
  vocab->token_bytes_ = std::move(token_bytes);
  vocab->end_tokens_ = std::move(end_tokens);
  vocab->BuildTrie();
  return vocab;
}

void TokenVocabulary::BuildTrie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size(); ++id) {
    if (!is_end_[id] && !token_bytes_[id].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    return token_bytes_[a] != token_bytes_[b] ? token_bytes_[a] < token_bytes_[b] : a < b;
  });
  trie_byte_ = {0};
  trie_depth_ = {0};
  trie_subtree_end_ = {0};
  std::vector<int32_t> node_of;     // per entry of `order`
  std::vector<int32_t> path = {0};  // nodes from the root to the last one made
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& bytes = token_bytes_[id];
    size_t common = 0;
    if (previous != nullptr) {
      while (common < previous->size() && common < bytes.size() &&
             (*previous)[common] == bytes[common]) {
        ++common;
      }
    }
    while (path.size() > common + 1) {
      trie_subtree_end_[path.back()] = static_cast<int32_t>(trie_byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      path.push_back(static_cast<int32_t>(trie_byte_.size()));
      trie_byte_.push_back(static_cast<uint8_t>(bytes[d]));
      trie_depth_.push_back(static_cast<int32_t>(d + 1));
      trie_subtree_end_.push_back(0);
    }
    node_of.push_back(path.back());
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(bytes.size()));
    previous = &bytes;
  }
  while (!path.empty()) {
    trie_subtree_end_[path.back()] = static_cast<int32_t>(trie_byte_.size());
    path.pop_back();
  }
  // Tokens per node: `order` visits nodes in increasing order, so a counting pass suffices.
  trie_token_begin_.assign(trie_byte_.size() + 1, 0);
  for (int32_t node : node_of) ++trie_token_begin_[node + 1];
  std::partial_sum(trie_token_begin_.begin(), trie_token_begin_.end(), trie_token_begin_.begin());
  trie_tokens_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) trie_tokens_[i] = order[i];
  // Subtree bytes: each node's own byte, then (children come after parents in preorder) each
  // node's set added to its parent's, last node first.
  const int32_t n = trie_size();
  std::vector<int32_t> parent(n, 0), last_at_depth(max_depth_ + 1, 0);
  trie_subtree_bytes_.assign(n, {0, 0, 0, 0});
  for (int32_t i = 1; i < n; ++i) {
    parent[i] = last_at_depth[trie_depth_[i] - 1];
    last_at_depth[trie_depth_[i]] = i;
    trie_subtree_bytes_[i][trie_byte_[i] >> 6] |= uint64_t{1} << (trie_byte_[i] & 63);
  }
  for (int32_t i = n - 1; i > 0; --i) {
    for (int w = 0; w < 4; ++w) trie_subtree_bytes_[parent[i]][w] |= trie_subtree_bytes_[i][w];
  }
}

}  // namespace convoy::grammar
