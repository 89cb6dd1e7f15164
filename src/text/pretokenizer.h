// The pre-tokenizer: splits text (a run between added tokens, after normalization) into pieces
// that the BPE model encodes one at a time. It follows Hugging Face tokenizers' pre-tokenizers
// step for step: each step splits every piece of the previous one further, and empty pieces are
// dropped.
#ifndef CONVOY_TEXT_PRETOKENIZER_H_
#define CONVOY_TEXT_PRETOKENIZER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "text/pretokenizer_regex.h"

namespace convoy::tokenizer_internal {

// What a split does with the delimiters it matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// When Metaspace prepends its replacement character to a piece that does not start with it.
enum class PrependScheme { kAlways, kFirst, kNever };

struct PieceSpan {
  size_t begin = 0;
  size_t end = 0;
};

// Pieces of one run of text. `text` is the run or, after a step that rewrites it, `storage`.
struct PieceList {
  std::string_view text;
  std::string storage;
  std::vector<PieceSpan> spans;  // non-empty, in order, not overlapping
  // Whether spans[0] begins where the encoded text begins (Metaspace's "first" scheme).
  bool first_at_text_start = false;

  std::string_view piece(size_t i) const {
    return text.substr(spans[i].begin, spans[i].end - spans[i].begin);
  }
};

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Steps, in the order they run. Split: on a regex (Oniguruma syntax) or a literal string;
  // `invert` makes the matches the pieces and the text between them the delimiters.
  absl::Status AddSplit(std::string_view pattern, bool is_regex, SplitBehavior behavior,
                        bool invert);
  // Every numeric character (\p{N}) alone, or runs of them together.
  absl::Status AddDigits(bool individual_digits);
  // Replaces ' ' with `replacement` (one character), prepends it by `scheme`, and, when `split`,
  // starts a piece at each replacement character.
  absl::Status AddMetaspace(std::string_view replacement, PrependScheme scheme, bool split);
  // GPT-2's split (when `use_regex`) after prepending ' ' to pieces that lack it (when
  // `add_prefix_space`). The mapping of bytes to the byte-level alphabet is left to the model,
  // which then works on raw bytes: so this must be the last step (FAILED_PRECONDITION otherwise).
  absl::Status AddByteLevel(bool add_prefix_space, bool use_regex);

  // Whether the pieces are to be read as bytes in GPT-2's byte-level alphabet.
  bool byte_level() const { return byte_level_; }

  // Splits `text` (valid UTF-8; it must outlive `out`) into `out`, replacing its contents.
  // `at_text_start`: `text` begins the text being encoded. Errors only from the regex engine.
  absl::Status Split(std::string_view text, bool at_text_start, PieceList* out) const;

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  bool byte_level_ = false;
};

// GPT-2's split, which the ByteLevel pre-tokenizer uses when use_regex is set.
std::string_view Gpt2SplitPattern();

// The pre-tokenizer that llama.cpp names `name` (GGUF key tokenizer.ggml.pre) for a byte-level BPE
// vocabulary, as the Hugging Face tokenizer.json of those models has it: regex splits, then
// byte-level. `*ignore_merges`: whether those models' BPE takes a piece that is itself a token as
// is (Llama 3). UNIMPLEMENTED naming the name when the table does not know it.
absl::StatusOr<PreTokenizer> PreTokenizerForGgufName(std::string_view name, bool* ignore_merges);

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_PRETOKENIZER_H_
