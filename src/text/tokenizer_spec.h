// A tokenizer as GGUF metadata describes it: plain data that the model module fills from a GGUF
// file (llama.cpp's key for each field is named beside it) and Tokenizer::FromSpec checks and
// builds. Only what GGUF says is here; how it is read follows Hugging Face's conversion of such
// files (transformers' GGUF tokenizer mapping), and llama.cpp where that is silent.
#ifndef CONVOY_TEXT_TOKENIZER_SPEC_H_
#define CONVOY_TEXT_TOKENIZER_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace convoy {

// tokenizer.ggml.token_type, with GGUF's (and SentencePiece's) numbers.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,      // "<unk>": a special token
  kControl = 3,      // "<s>", "<|im_end|>": special tokens, matched whole in text
  kUserDefined = 4,  // added tokens that are not special: matched whole in text, decoded as text
  kUnused = 5,
  kByte = 6,  // "<0x41>": byte fallback tokens
};

struct TokenizerSpec {
  // tokenizer.ggml.model: "gpt2" (byte-level BPE: GPT-2, SmolLM, Llama 3, Qwen2), "llama"
  // (SentencePiece BPE with byte fallback: Llama 2, TinyLlama, Mistral, Phi-3, Gemma 3) or
  // "gemma4" (Gemma 4: as "llama", with merges given and no dummy prefix by default).
  std::string model;
  // tokenizer.ggml.pre: how a "gpt2" vocabulary splits text before BPE ("smollm", "llama-bpe",
  // "qwen2", "gpt-2", "default", ...; empty reads as "default"). Ignored for "llama" and "gemma4".
  std::string pre;
  std::vector<std::string> tokens;     // tokenizer.ggml.tokens: the token of each id
  std::vector<TokenType> token_types;  // tokenizer.ggml.token_type: empty, or one per token
  std::vector<float> scores;           // tokenizer.ggml.scores: empty, or one per token
  // tokenizer.ggml.merges: "left right", best first. Required for "gpt2" and "gemma4"; for "llama",
  // when empty, they are derived from the scores (each token's splits into two tokens, ranked by
  // the token's score), as transformers does for SentencePiece vocabularies.
  std::vector<std::string> merges;
  std::optional<int32_t> bos_id;  // tokenizer.ggml.bos_token_id
  std::optional<int32_t> eos_id;  // tokenizer.ggml.eos_token_id
  std::optional<int32_t> unk_id;  // tokenizer.ggml.unknown_token_id ("llama" only uses it)
  std::optional<int32_t> pad_id;  // tokenizer.ggml.padding_token_id
  // tokenizer.ggml.add_bos_token / add_eos_token: what Encode(text, add_special=true) adds.
  // Absent: BOS for "llama" and "gemma4" (as llama.cpp and transformers assume), nothing for
  // "gpt2".
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  // tokenizer.ggml.add_space_prefix ("llama" and "gemma4"; absent reads as true for "llama", false
  // for "gemma4"): "▁" before each run of text between special tokens, as SentencePiece's dummy
  // prefix and Llama 2's tokenizer.json do, and one leading space dropped again when decoding.
  std::optional<bool> add_space_prefix;
};

}  // namespace convoy

#endif  // CONVOY_TEXT_TOKENIZER_SPEC_H_
