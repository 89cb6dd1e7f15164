// Added tokens (special tokens like "<|im_start|>", and tokens added beside the model's
// vocabulary) are found in the text before anything else, as Hugging Face's AddedVocabulary does:
// leftmost match first, the longest one where several start at the same place, then each token's
// single_word / lstrip / rstrip options.
#ifndef CONVOY_TEXT_ADDED_TOKENS_H_
#define CONVOY_TEXT_ADDED_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace convoy::tokenizer_internal {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // skipped by Decode with skip_special
  bool normalized = false;   // matched in the normalized text (else in the text as given)
  bool single_word = false;  // only where no word character touches it on either side
  bool lstrip = false;       // takes the white space before it
  bool rstrip = false;       // takes the white space after it
};

// A run of text, or an added token (with the white space it took).
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int32_t token_id = -1;  // -1: text for the model
};

class AddedTokenMatcher {
 public:
  // `tokens` with empty content are ignored.
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return patterns_.empty(); }

  // Cuts `text` (valid UTF-8) into segments that cover it, replacing `out`'s contents. Empty text
  // gives no segment.
  void Split(std::string_view text, std::vector<TextSegment>* out) const;

 private:
  struct Pattern {
    AddedToken token;
  };
  // The longest pattern that starts at `pos`, or -1.
  int LongestAt(std::string_view text, size_t pos) const;

  std::vector<Pattern> patterns_;
  // A byte trie: node 0 is the root; children by (node << 8 | byte).
  absl::flat_hash_map<uint64_t, int32_t> children_;
  std::vector<int32_t> terminal_;  // pattern index ending at each node, or -1
  bool first_byte_[256] = {};
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_ADDED_TOKENS_H_
