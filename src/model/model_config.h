// The architecture of a Llama-family model, read from a Hugging Face config.json.
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

struct RopeScaling {
  // "default" (none) or "llama3" (Llama 3.1 / 3.2 frequency scaling).
  std::string rope_type = "default";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads unless config.json says otherwise
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
  int64_t kv_size() const { return num_key_value_heads * head_dim; }
  // Parameters in the weights (embeddings counted once when tied).
  int64_t NumParameters() const;

  // Checks that the shape is a coherent Llama; the message names the field.
  absl::Status Validate() const;
};

// Parses config.json text and validates it. `source` names the file in error messages. Only
// Llama without biases, with SiLU and with no or "llama3" RoPE scaling is accepted.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);
// Serializes to config.json text that Hugging Face transformers' LlamaConfig loads. The text is
// a function of `config` alone (stable bytes for the same config).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_CONFIG_H_
