// A model's ModelConfig from a GGUF file's metadata (general.architecture, the family's own keys
// "<architecture>.*", and "tokenizer.ggml.*") and tensor shapes.
#ifndef CONVOY_MODEL_GGUF_LLAMA_CONFIG_H_
#define CONVOY_MODEL_GGUF_LLAMA_CONFIG_H_

#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "model/model_config.h"

namespace convoy {

// general.architecture must be the GGUF architecture of a family of ModelFamilies() ("llama",
// "qwen2", "qwen3", "phi3", "gemma3"); the config takes that family's architecture and departures
// from Llama ("llama" with attention.sliding_window set is Mistral; gemma3's layer kinds, local
// rope base and query scale are llama.cpp's fixed rules, see ReadGemma, and its
// final_logit_softcapping is read where set). Read, under "<architecture>.":
// attention.sliding_window (0 or absent: none), context_length (as
// max_position_embeddings), embedding_length, block_count, feed_forward_length,
// attention.head_count, attention.layer_norm_rms_epsilon (all required);
// attention.head_count_kv (default head_count), attention.key_length / value_length (default
// embedding_length / head_count; must be equal), rope.freq_base (default 10000),
// rope.dimension_count (the head size, or fewer, even, dimensions in a family with
// ModelFamily::partial_rotary: ModelConfig::rotary_dim),
// rope.scaling.* and rope_freqs.weight (llama3 scaling; see gguf_rope.h), vocab_size (checked).
// LongRoPE (Phi-3): tensors rope_factors_short.weight and rope_factors_long.weight (rotary_dim / 2
// values each) with rope.scaling.original_context_length (required) and rope.scaling.attn_factor
// (default: transformers' attention factor for context_length / original_context_length).
// vocab_size is token_embd.weight's row count; the embeddings are tied when output.weight is
// absent. bos/eos ids come from tokenizer.ggml.*_token_id (-1 when absent); eos_token_ids adds
// eot and eom ids when they differ. torch_dtype says how the weights were stored: F32 when every
// matrix is F32, F16 when they are F16 (or F32), otherwise (quantized or BF16) BF16, the 16-bit
// type that the CPU executor computes quantized models in by default.
//
// Errors name the file and the key (or tensor), and say what was expected and what was found:
// INVALID_ARGUMENT for a missing or mistyped key, UNIMPLEMENTED for another architecture (naming
// it and the supported ones) or a feature that ModelConfig cannot express (mixture of experts,
// linear or YaRN rope scaling, LongRoPE outside Phi-3).
absl::StatusOr<ModelConfig> GgufLlamaConfig(const GgufFile& file);

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_LLAMA_CONFIG_H_
