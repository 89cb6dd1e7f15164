// The architecture of a model, read from a Hugging Face config.json (or, through
// gguf_llama_config.h, from a GGUF file's metadata): its family and its shape.
#ifndef CONVOY_MODEL_MODEL_CONFIG_H_
#define CONVOY_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy {

// kQuantized: a GGUF tensor kept in its quantized blocks (TensorView::quant_type says which);
// only GGUF views have it, never a safetensors file or a config.
enum class DType { kF32, kF16, kBF16, kQuantized };

// "F32", "F16", "BF16" as safetensors spells them ("QUANTIZED" for kQuantized).
const char* DTypeName(DType dtype);
// Bytes per element; 0 for kQuantized, whose blocks hold several.
int DTypeSize(DType dtype);

// The MLP's gate activation: SiLU (Llama) or GELU with the tanh approximation (Gemma's GeGLU;
// config.json "gelu_pytorch_tanh").
enum class Activation { kSilu, kGeluTanh };

struct RopeScaling {
  // "default" (none), "llama3" (Llama 3.1 / 3.2 frequency scaling) or "longrope" (Phi-3's
  // LongRoPE; config.json's "longrope" or "su").
  std::string rope_type = "default";
  // llama3:
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and longrope: the context the model was pretrained on.
  int64_t original_max_position_embeddings = 8192;
  // longrope: rotary frequency i is divided by short_factor[i] or long_factor[i] (rotary_dim / 2
  // each; which one, ModelConfig::LongRopeFactors says), and cos and sin are multiplied by
  // attention_factor (transformers' default: sqrt(1 + ln(s) / ln(original)) with s =
  // max_position_embeddings / original_max_position_embeddings, 1 when s <= 1).
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  double attention_factor = 1.0;
};

// A family of decoder-only models that the executors run: Llama's layout (RMS norms, rotary
// embeddings, grouped-query attention, a SiLU-gated MLP) and where a family departs from it. The
// executors read the departures from ModelConfig, never the family's name.
struct ModelFamily {
  // config.json's model_type ("llama", "qwen2", "mistral").
  const char* name;
  // config.json's architectures entry ("LlamaForCausalLM"): what ModelConfig::architecture holds,
  // and how the model describes itself (GetModelInfo, convoy info).
  const char* architecture;
  // Biases on the query, key and value projections (q_proj.bias ...; GGUF attn_q.bias ...).
  bool attention_bias;
  // An RMS norm over each head's queries and keys before the rotary embedding (q_norm.weight,
  // k_norm.weight; GGUF attn_q_norm.weight, attn_k_norm.weight), with rms_norm_eps.
  bool qk_norm;
  // llama.cpp's converter interleaves the two halves of each head's Q and K rows for its rope
  // kernel (Llama, Mistral); the GGUF loader undoes it. Families it writes unpermuted use
  // NEOX-style rope, rotate-half as Hugging Face does, which is what the executors run for every
  // family.
  bool gguf_permuted_qk;
  // The query, key and value projections stored as one matrix (self_attn.qkv_proj.weight, rows
  // q | k | v; GGUF attn_qkv.weight), and the gate and up projections as one
  // (mlp.gate_up_proj.weight, rows gate | up; GGUF ffn_up.weight holding both): Phi-3. The loader
  // splits them at row boundaries into the views every family has.
  bool fused_projections;
  // config.json's sliding_window, when not null, limits each token's attention to the latest
  // sliding_window positions, its own included (Mistral, Phi-3). Other families' configs may carry
  // the field without it applying (Qwen's applies only with use_sliding_window, which is refused).
  bool sliding_window;
  // A GGUF file's general.architecture, the prefix of its keys ("llama.context_length"). Mistral
  // shares "llama" with Llama: such a file is Mistral when it sets a sliding window.
  const char* gguf_architecture;
  // Accepts LongRoPE scaling (config.json rope_scaling "longrope" or "su"; GGUF
  // rope_factors_short.weight and rope_factors_long.weight): Phi-3. Other families refuse it, so
  // that an executor that runs a family never meets it unawares.
  bool long_rope;
  // Accepts partial rotary embeddings (config.json partial_rotary_factor below 1; GGUF
  // rope.dimension_count below the head size): Phi-4-mini. Other families refuse them.
  bool partial_rotary;
  // Gemma 3's departures, all false (kSilu) for the others:
  Activation activation;
  // Norms around both halves of a layer: post_attention_layernorm normalizes the attention's
  // output before the residual add, pre_feedforward_layernorm is the MLP's input norm and
  // post_feedforward_layernorm normalizes its output (GGUF post_attention_norm, ffn_norm,
  // post_ffw_norm).
  bool sandwich_norms;
  // Gemma's RMS norms scale by 1 + weight: a Hugging Face checkpoint stores the offsets from 1
  // (llama.cpp's converter adds the 1, so a GGUF stores the scales).
  bool norm_weight_offsets;
  // Embeddings multiplied by sqrt(hidden_size); queries scaled by query_pre_attn_scalar^-0.5;
  // layers of two kinds (config.json layer_types: "sliding_attention" with the window and rope
  // base rope_local_base_freq, "full_attention" with rope_theta); the final logits soft-capped
  // by final_logit_softcapping where set. (Its configs also tie the embeddings unless
  // tie_word_embeddings says otherwise.)
  bool gemma_attention;
};

// Every family convoy serves: Llama, Qwen2 (Qwen2.5), Qwen3, Phi-3, Mistral, Gemma 3 (text).
const std::vector<ModelFamily>& ModelFamilies();
// The family with this architecture ("Qwen2ForCausalLM") or this config.json model_type
// ("qwen2"); nullptr when none.
const ModelFamily* FindModelFamilyByArchitecture(const std::string& architecture);
const ModelFamily* FindModelFamilyByName(const std::string& name);
// The family of a GGUF file whose general.architecture is `gguf_architecture` and whose sliding
// window (attention.sliding_window, 0 when absent) is `sliding_window`: of the families with that
// GGUF architecture, the one that has sliding windows when the window is set, else the first one.
// nullptr when none has that GGUF architecture.
const ModelFamily* FindModelFamilyByGgufArchitecture(const std::string& gguf_architecture,
                                                     int64_t sliding_window);
// "llama", "qwen2", ... (config.json model types), "LlamaForCausalLM", ..., or the GGUF
// architectures, each once, for error messages.
std::string SupportedFamilyNames();
std::string SupportedArchitectures();
std::string SupportedGgufArchitectures();

struct ModelConfig {
  // The family's architecture (ModelFamily::architecture); attention_bias, qk_norm and
  // fused_projections are its departures from Llama, copied from the family when the config is
  // read.
  std::string architecture = "LlamaForCausalLM";
  bool attention_bias = false;
  bool qk_norm = false;
  bool fused_projections = false;
  // Each token attends to the latest sliding_window positions (its own included); 0: to every
  // earlier position. Only in a family with ModelFamily::sliding_window. With layer_sliding not
  // empty, only in the layers it marks.
  int64_t sliding_window = 0;
  // Gemma 3 (ModelFamily::activation, sandwich_norms, norm_weight_offsets, gemma_attention);
  // the defaults are every other family's.
  Activation activation = Activation::kSilu;
  bool sandwich_norms = false;
  // Added to every RMS norm weight as stored (1 for a Gemma Hugging Face checkpoint, 0 for its
  // GGUF, whose converter added it).
  double norm_weight_offset = 0.0;
  // The embeddings are multiplied by this (Gemma: sqrt(hidden_size)).
  double embedding_scale = 1.0;
  // Scores are q . k / sqrt(query_pre_attn_scalar); 0 means head_dim.
  double query_pre_attn_scalar = 0.0;
  // Per layer, whether it is a sliding-window layer (Gemma 3's layer_types); empty: every layer
  // is, when sliding_window > 0.
  std::vector<bool> layer_sliding;
  // The rope base of the sliding-window layers when layer_sliding is not empty.
  double rope_local_theta = 10000.0;
  // logits = c * tanh(logits / c) with c this; 0: none.
  double final_logit_softcapping = 0.0;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads unless config.json says otherwise
  // The rotary embedding turns the first rotary_dim dimensions of each query and key head (pairs
  // i and i + rotary_dim / 2) and leaves the others; 0 means head_dim. head_dim *
  // partial_rotary_factor, rounded down as transformers does (GGUF: rope.dimension_count). Only in
  // a family with ModelFamily::partial_rotary.
  int64_t rotary_dim = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  DType torch_dtype = DType::kF32;
  // -1 when config.json has null.
  int64_t bos_token_id = 1;
  // The first of eos_token_ids (config.json may give one id or a list); -1 when null.
  int64_t eos_token_id = 2;
  // Every end-of-sequence id, in config.json's order. Empty means {eos_token_id}; when not empty,
  // its first element equals eos_token_id.
  std::vector<int64_t> eos_token_ids;

  // The tokens that end generation from text: every id of eos_token_ids (or eos_token_id), and
  // `tokenizer_eos` when given, each once.
  std::vector<int32_t> EndOfGenerationIds(std::optional<int32_t> tokenizer_eos) const;

  int64_t q_size() const { return num_attention_heads * head_dim; }
  int64_t RotaryDim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Whether layer `layer` attends through the sliding window.
  bool LayerSliding(int64_t layer) const {
    return sliding_window > 0 &&
           (layer_sliding.empty() || layer_sliding[static_cast<size_t>(layer)]);
  }
  // The window every layer attends through; 0 when some layer attends to every earlier position
  // (no window, or Gemma 3's global layers). K and V wholly before it are never read again.
  int64_t KvWindow() const {
    if (sliding_window <= 0) return 0;
    for (const bool sliding : layer_sliding) {
      if (!sliding) return 0;
    }
    return sliding_window;
  }
  int64_t kv_size() const { return num_key_value_heads * head_dim; }
  // With LongRoPE scaling, the frequency factors every position runs with: long_factor when the
  // context convoy serves (max_position_embeddings, the longest sequence the engine admits)
  // exceeds original_max_position_embeddings, else short_factor. transformers picks per forward
  // pass instead, long_factor once the sequence passes the original context, so a sequence that
  // crosses it would need its cached keys recomputed; convoy chooses once per model, as llama.cpp
  // does per context size, and so agrees with transformers on sequences past the original
  // context (and, for a model whose context is the original one, everywhere). Empty without it.
  const std::vector<double>& LongRopeFactors() const;
  // Parameters in the weights (embeddings counted once when tied).
  int64_t NumParameters() const;

  // The family that `architecture` names (nullptr for none: Validate refuses it).
  const ModelFamily* family() const { return FindModelFamilyByArchitecture(architecture); }

  // Checks that the family is known and agrees with attention_bias, qk_norm, fused_projections
  // and sliding_window, and that the shape is coherent; the message names the field.
  absl::Status Validate() const;
};

// Parses config.json text and validates it. `source` names the file in error messages. Only the
// families of ModelFamilies() (by 'architectures', or by 'model_type' when it is absent), with
// SiLU, a sliding window only in a family that has one (Mistral, Phi-3), no biases but the
// family's own, full rotary embeddings but in a family with ModelFamily::partial_rotary
// (partial_rotary_factor from rope_parameters, rope_scaling or the top level, in that order), and
// no, "llama3" or (in a family with
// ModelFamily::long_rope) "longrope" RoPE scaling are accepted; another architecture is
// UNIMPLEMENTED, naming it and the supported ones. LongRoPE reads rope_scaling's short_factor,
// long_factor, optional factor and attention_factor (as transformers: factor defaults to
// max_position_embeddings / original_max_position_embeddings), and
// original_max_position_embeddings from the top level (where Phi-3's configs have it, and which
// transformers prefers) or else from rope_scaling; short_mscale and long_mscale are ignored, as
// transformers' Phi-3 and llama.cpp's converter ignore them.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);
// Adds generation_config.json's eos_token_id (an id or a list of ids; absent or null: nothing) to
// config.eos_token_ids after config.json's, each once, as transformers' generate() stops at them
// (Phi-3.5-mini's config.json names <|endoftext|> only, its generation_config.json <|end|> too).
// `source` names the file in errors: INVALID_ARGUMENT for text that is not a JSON object, another
// type, or an id outside [0, vocab_size).
absl::Status MergeGenerationConfig(const std::string& json_text, const std::string& source,
                                   ModelConfig& config);
// Serializes to config.json text that Hugging Face transformers loads as the family's config. The
// text is a function of `config` alone (stable bytes for the same config).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_CONFIG_H_
