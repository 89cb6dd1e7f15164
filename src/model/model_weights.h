// A model of one of the families of ModelFamilies() (model_config.h), memory-mapped and checked
// against the architecture (every tensor present, with
// the expected shape and a known dtype): either a Hugging Face directory (config.json + one or
// several safetensors files) or a single GGUF file.
#ifndef CONVOY_MODEL_MODEL_WEIGHTS_H_
#define CONVOY_MODEL_MODEL_WEIGHTS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace convoy {

// Views into the mapped files; Hugging Face layout (a projection's weight is [out, in]).
struct LayerWeights {
  TensorView input_layernorm;         // [hidden]
  TensorView q_proj, k_proj, v_proj;  // [q_size, hidden], [kv_size, hidden] x2
  // Only when config.attention_bias (Qwen2): [q_size], [kv_size] x2; empty views otherwise.
  TensorView q_bias, k_bias, v_bias;
  // Only when config.qk_norm (Qwen3): each head's RMS norm weight, [head_dim]; empty otherwise.
  TensorView q_norm, k_norm;
  TensorView o_proj;  // [hidden, q_size]
  // [hidden]: the MLP's input norm, or with config.sandwich_norms (Gemma 3) the attention output's
  // norm.
  TensorView post_attention_layernorm;
  // Only with config.sandwich_norms: the MLP's input and output norms, [hidden]; empty otherwise.
  TensorView pre_feedforward_layernorm, post_feedforward_layernorm;
  TensorView gate_proj, up_proj;  // [intermediate, hidden] x2
  TensorView down_proj;           // [hidden, intermediate]
  // Only when config.fused_projections (Phi-3): the stored matrices, [q_size + 2 kv_size, hidden]
  // and [2 intermediate, hidden]; q_proj, k_proj, v_proj, gate_proj and up_proj are then views
  // of their rows (no copies). Empty views otherwise.
  TensorView qkv_proj, gate_up_proj;
};

// The tensors of a model in Hugging Face names and order (embeddings, layers, final norm,
// lm_head), with their shapes ([out, in] for projections); lm_head.weight only when the
// embeddings are not tied; the QKV biases and the per-head Q/K norms only in a family that has
// them (ModelConfig::attention_bias, qk_norm); qkv_proj and gate_up_proj in place of q_proj,
// k_proj, v_proj, gate_proj and up_proj in a family that stores them fused
// (ModelConfig::fused_projections); pre/post_feedforward_layernorm in a family with sandwich norms.
// Llama's tensors are every family's core, hence the names.
struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<TensorShape> LlamaTensorShapes(const ModelConfig& config);
// How many tensors LlamaTensorShapes(config) has, and the one at `index` (0 <= index < that
// count) without making the others. The loaders walk them one at a time and stop at the first
// one missing, so a layer count read from a file costs what the file holds, not what it claims.
int64_t LlamaTensorCount(const ModelConfig& config);
TensorShape LlamaTensorShape(const ModelConfig& config, int64_t index);

class GgufFile;
class GgufLlamaTensors;

class ModelWeights {
 public:
  // `path` is a directory or a GGUF file.
  //
  // A directory: reads `path`/config.json and either `path`/model.safetensors or the shards
  // listed in `path`/model.safetensors.index.json. Tensors may be F32, F16 or BF16, each in its
  // own dtype.
  //
  // A file: reads it as GGUF (general.architecture one of ModelFamilies()' names; see
  // gguf_llama_config.h for the metadata read). Every tensor is a view into the mapping in its own
  // storage (copies for attn_q and attn_k, whose rows llama.cpp permutes), in Hugging Face names
  // and layout: F32, F16, BF16, or quantized blocks (DType::kQuantized: Q4_0, Q4_1, Q5_0, Q5_1,
  // Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), which an executor runs as they are or reads as fp32 with
  // tensor_rows.h. Loading costs the mapping, not a conversion.
  //
  // Errors name the file, the tensor (or key), what was expected and what was found: a tensor
  // the family needs and the file lacks (a qwen2 file without attn_q.bias) is missing; a bias or
  // a per-head norm the family does not have is UNIMPLEMENTED. Other tensors the family does not
  // use (and lm_head.weight when the embeddings are tied) are ignored.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(const std::string& path);
  ~ModelWeights();

  const ModelConfig& config() const { return config_; }
  // The path Load was given: a model directory or a GGUF file.
  const std::string& dir() const { return dir_; }
  // The GGUF file (its metadata holds the tokenizer, tokenizer.ggml.*); nullptr for a
  // safetensors directory.
  const GgufFile* gguf_file() const;
  const TensorView& embed_tokens() const { return embed_tokens_; }  // [vocab, hidden]
  const TensorView& norm() const { return norm_; }                  // [hidden]
  // [vocab, hidden]; the embedding matrix itself when the embeddings are tied.
  const TensorView& lm_head() const { return lm_head_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }

 private:
  ModelWeights();
  static absl::StatusOr<std::unique_ptr<ModelWeights>> LoadGguf(const std::string& path);
  // Fills the views from `index` (Hugging Face name -> view), checking every tensor of
  // LlamaTensorShapes(config_); `where` names what was searched in errors.
  absl::Status AssignViews(const std::map<std::string, const TensorView*>& index,
                           const std::string& where);

  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unique_ptr<GgufLlamaTensors> gguf_;
  TensorView embed_tokens_, norm_, lm_head_;
  std::vector<LayerWeights> layers_;
};

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_WEIGHTS_H_
