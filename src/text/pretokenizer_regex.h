// Pre-tokenizer patterns, written for Oniguruma (the engine of Hugging Face tokenizers), run on
// PCRE2 in UTF mode with Unicode properties. The two agree on the syntax these patterns use
// (\p{L}, \p{N}, lookahead, (?i:...), {m,n}); where their classes differ the pattern is rewritten:
// Oniguruma's \s has U+0085 and not U+180E, and its \w is letters, marks, decimal digits and
// connector punctuation.
#ifndef CONVOY_TEXT_PRETOKENIZER_REGEX_H_
#define CONVOY_TEXT_PRETOKENIZER_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy::tokenizer_internal {

// `pattern` with \s, \S, \w and \W spelled out as Oniguruma means them. UNIMPLEMENTED for \S or
// \W inside a character class and for \Q...\E, which this rewriting does not handle.
absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern);

// A compiled pattern. Immutable; matching is thread-safe.
class PretokenizerRegex {
 public:
  // INVALID_ARGUMENT naming the pattern and PCRE2's message when it does not compile.
  static absl::StatusOr<std::unique_ptr<PretokenizerRegex>> Compile(std::string_view pattern);
  ~PretokenizerRegex();
  PretokenizerRegex(const PretokenizerRegex&) = delete;
  PretokenizerRegex& operator=(const PretokenizerRegex&) = delete;

  // Calls on_match(begin, end) for each match in `text`, left to right, without overlap, as an
  // iterator over matches does: after an empty match the search resumes one character later, and
  // an empty match right where the previous match ended is skipped.
  // REQUIRES: `text` is valid UTF-8 (it is not checked again). An error only when PCRE2 gives up
  // (its match or memory limits): RESOURCE_EXHAUSTED.
  absl::Status ForEachMatch(std::string_view text,
                            absl::FunctionRef<void(size_t begin, size_t end)> on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  PretokenizerRegex() = default;
  std::string pattern_;   // as given, for messages
  void* code_ = nullptr;  // pcre2_code_8, kept out of the header
  bool jit_ = false;
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_PRETOKENIZER_REGEX_H_
