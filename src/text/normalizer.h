// The normalizers of a tokenizer.json, with Hugging Face's meaning: Prepend and Replace (the
// SentencePiece-style ones: Llama 2, Mistral prepend "▁", then replace " " with "▁") and the four
// Unicode normalization forms, NFC (Qwen's), NFD, NFKC and NFKD, through utf8proc. Others
// (Lowercase, Strip, BertNormalizer, ...) the loader refuses, naming them.
#ifndef CONVOY_TEXT_NORMALIZER_H_
#define CONVOY_TEXT_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

namespace convoy::tokenizer_internal {

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

class Normalizer {
 public:
  // `prefix` before a non-empty text.
  void AddPrepend(std::string_view prefix);
  // Every occurrence of `pattern` (non-empty), left to right without overlap, with `content`.
  void AddReplace(std::string_view pattern, std::string_view content);
  // The text in Unicode normalization form `form`. Text that is not valid UTF-8 (which Hugging
  // Face's tokenizers cannot be given) passes unchanged.
  void AddUnicodeForm(UnicodeForm form);

  bool empty() const { return steps_.empty(); }
  std::string Normalize(std::string_view text) const;

 private:
  enum class Kind { kPrepend, kReplace, kUnicode };
  struct Step {
    Kind kind;
    std::string pattern;  // the prefix when kPrepend
    std::string content;
    UnicodeForm form = UnicodeForm::kNfc;
  };
  std::vector<Step> steps_;
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_NORMALIZER_H_
