// The normalizers a SentencePiece-style tokenizer.json uses (Llama 2, Mistral: Prepend "▁", then
// Replace " " with "▁"), with Hugging Face's meaning. Others (NFC, Lowercase, ...) need Unicode
// tables this module does not carry; the loader refuses them.
#ifndef CONVOY_TEXT_NORMALIZER_H_
#define CONVOY_TEXT_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

namespace convoy::tokenizer_internal {

class Normalizer {
 public:
  // `prefix` before a non-empty text.
  void AddPrepend(std::string_view prefix);
  // Every occurrence of `pattern` (non-empty), left to right without overlap, with `content`.
  void AddReplace(std::string_view pattern, std::string_view content);

  bool empty() const { return steps_.empty(); }
  std::string Normalize(std::string_view text) const;

 private:
  struct Step {
    bool prepend;
    std::string pattern;  // the prefix when `prepend`
    std::string content;
  };
  std::vector<Step> steps_;
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_NORMALIZER_H_
