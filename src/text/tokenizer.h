// Tokenizers for BPE vocabularies, with the behaviour of Hugging Face tokenizers (the reference the
// tests compare with): byte-level BPE (GPT-2, SmolLM, Llama 3, Qwen2) and SentencePiece-style BPE
// with byte fallback (Llama 2, TinyLlama, Mistral). Text stays at the edge (DESIGN.md): front ends
// turn text into ids with Encode and ids back into text with Decode or, while generating, with one
// IncrementalDetokenizer per request (detokenizer.h).
//
// A Tokenizer is immutable once built; every method is thread-safe.
#ifndef CONVOY_TEXT_TOKENIZER_H_
#define CONVOY_TEXT_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "text/tokenizer_spec.h"

namespace convoy {

namespace tokenizer_internal {
struct TokenizerParts;
}  // namespace tokenizer_internal

// What tokenizer.json does not say: the names of BOS and EOS, which Hugging Face keeps in
// tokenizer_config.json. Empty: BOS is the first token the post-processor puts before the text,
// if any; EOS is unknown.
struct HuggingFaceTokenizerExtras {
  std::string bos_token;
  std::string eos_token;
};

class Tokenizer {
 public:
  // A Hugging Face tokenizer.json (its text). Supported: model BPE (byte-level or with
  // byte_fallback / unk_token, ignore_merges); added_tokens with their flags; normalizers
  // Prepend, Replace (string pattern), NFC, NFD, NFKC, NFKD, Sequence; pre-tokenizers ByteLevel,
  // Split, Digits, Metaspace, Sequence; post-processors TemplateProcessing, ByteLevel,
  // RobertaProcessing, BertProcessing, Sequence (for single sequences); decoders ByteLevel,
  // Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence. Errors name the JSON field:
  // INVALID_ARGUMENT for a malformed file, UNIMPLEMENTED for a component outside that list (e.g.
  // the Lowercase normalizer, WordPiece).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHuggingFaceJson(
      std::string_view json, const HuggingFaceTokenizerExtras& extras = {});
  // The same, from a file; errors start with the path. NOT_FOUND when it does not exist.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHuggingFaceJsonFile(
      const std::string& path, const HuggingFaceTokenizerExtras& extras = {});
  // From GGUF metadata (tokenizer_spec.h). INVALID_ARGUMENT naming the field for an inconsistent
  // spec, UNIMPLEMENTED for another model or an unknown pre-tokenizer name.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromSpec(const TokenizerSpec& spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The ids of `text`. Added and special tokens written in the text (e.g. "<|im_end|>") become
  // their ids. With `add_special`, the tokens the tokenizer adds around a sequence (BOS for Llama
  // 2) are added. INVALID_ARGUMENT naming the byte offset when `text` is not valid UTF-8;
  // RESOURCE_EXHAUSTED only if the regex engine gives up on a pathological text.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special) const;

  // The text of `ids`, as Hugging Face's decode(ids, skip_special_tokens) gives it (bytes that do
  // not form UTF-8 become U+FFFD). With `skip_special`, special tokens give no text.
  // INVALID_ARGUMENT naming the id for an id that is not a token (Hugging Face drops those).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special = false) const;

  // Ids are in [0, vocab_size()); an id without a token in between (rare) is not valid.
  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> unk_id() const;
  std::optional<int32_t> pad_id() const;
  // Whether Encode with `add_special` puts BOS first / EOS last.
  bool add_bos() const;
  bool add_eos() const;

  // The token's string as the vocabulary spells it ("Ġthe", "▁the", "<|im_end|>", "<0x0A>").
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // The id of a token spelled so (any token, special or not).
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Whether `id` is a special token (skipped by Decode with skip_special).
  bool IsSpecial(int32_t id) const;

  // The bytes token `id` adds to a text it does not begin, as the output's text holds them (what
  // constrained decoding matches against): a byte-level token's bytes, a byte-fallback token's
  // one byte, a SentencePiece piece with its "▁" as a space. Empty for a special token and for an
  // id that is no token.
  std::string TokenBytes(int32_t id) const;

 private:
  friend class IncrementalDetokenizer;
  explicit Tokenizer(std::unique_ptr<tokenizer_internal::TokenizerParts> parts);
  // Checks the parts and fills the tables derived from them.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      std::unique_ptr<tokenizer_internal::TokenizerParts> parts);

  std::unique_ptr<tokenizer_internal::TokenizerParts> parts_;
};

}  // namespace convoy

#endif  // CONVOY_TEXT_TOKENIZER_H_
