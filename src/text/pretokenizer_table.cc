// The pre-tokenizer regexes, in one place: GPT-2's (Hugging Face's ByteLevel), and the table of
// GGUF pre-tokenizer names (llama.cpp's tokenizer.ggml.pre) this module knows, with the splits of
// those models' own tokenizer.json files.
#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/pretokenizer.h"
#include "text/string_views.h"

namespace convoy::tokenizer_internal {
namespace {

// GPT-2 (Hugging Face's ByteLevel pre-tokenizer with use_regex).
constexpr std::string_view kGpt2Split =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
// Llama 3: case-insensitive contractions, numbers in groups of up to three.
constexpr std::string_view kLlama3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: as Llama 3, with every digit alone.
constexpr std::string_view kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum class Shape {
  // ByteLevel with GPT-2's split. "default" reads so too, as transformers reads a GGUF file whose
  // pre-tokenizer it does not know (llama.cpp's "default" has splits of its own).
  kGpt2,
  kDigitsGpt2,      // every digit alone, then GPT-2's split (StarCoder's tokenizer and its heirs)
  kSplitThenBytes,  // one regex split, then ByteLevel without a split of its own
};

struct Entry {
  std::string_view name;
  Shape shape;
  std::string_view pattern;  // kSplitThenBytes
  bool ignore_merges;
};

constexpr std::array kTable = {
    Entry{"default", Shape::kGpt2, {}, false},
    Entry{"gpt-2", Shape::kGpt2, {}, false},
    Entry{"smollm", Shape::kDigitsGpt2, {}, false},
    Entry{"starcoder", Shape::kDigitsGpt2, {}, false},
    Entry{"refact", Shape::kDigitsGpt2, {}, false},
    Entry{"llama3", Shape::kSplitThenBytes, kLlama3Split, true},
    Entry{"llama-v3", Shape::kSplitThenBytes, kLlama3Split, true},
    Entry{"llama-bpe", Shape::kSplitThenBytes, kLlama3Split, true},
    Entry{"falcon3", Shape::kSplitThenBytes, kLlama3Split, true},
    Entry{"qwen2", Shape::kSplitThenBytes, kQwen2Split, false},
    Entry{"deepseek-r1-qwen", Shape::kSplitThenBytes, kQwen2Split, false},
};

}  // namespace

std::string_view Gpt2SplitPattern() { return kGpt2Split; }

absl::StatusOr<PreTokenizer> PreTokenizerForGgufName(std::string_view name, bool* ignore_merges) {
  if (name.empty()) name = "default";
  for (const Entry& entry : kTable) {
    if (entry.name != name) continue;
    PreTokenizer pre;
    switch (entry.shape) {
      case Shape::kGpt2:
        RETURN_IF_ERROR(pre.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/true));
        break;
      case Shape::kDigitsGpt2:
        RETURN_IF_ERROR(pre.AddDigits(/*individual_digits=*/true));
        RETURN_IF_ERROR(pre.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/true));
        break;
      case Shape::kSplitThenBytes:
        RETURN_IF_ERROR(pre.AddSplit(entry.pattern, /*is_regex=*/true, SplitBehavior::kIsolated,
                                     /*invert=*/false));
        RETURN_IF_ERROR(pre.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/false));
        break;
    }
    *ignore_merges = entry.ignore_merges;
    return pre;
  }
  std::string known;
  for (const Entry& entry : kTable)
    absl::StrAppend(&known, known.empty() ? "" : ", ", ToAbsl(entry.name));
  return absl::UnimplementedError(
      absl::StrCat("GGUF pre-tokenizer \"", ToAbsl(name), "\" is not known; known: ", known));
}

}  // namespace convoy::tokenizer_internal
