// A Llama model directory (config.json + one or several safetensors files), memory-mapped and
// checked against the architecture: every tensor present, with the expected shape and a known
// dtype.
#ifndef CONVOY_MODEL_MODEL_WEIGHTS_H_
#define CONVOY_MODEL_MODEL_WEIGHTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace convoy {

// Views into the mapped files; Hugging Face layout (a projection's weight is [out, in]).
struct LayerWeights {
  TensorView input_layernorm;           // [hidden]
  TensorView q_proj, k_proj, v_proj;    // [q_size, hidden], [kv_size, hidden] x2
  TensorView o_proj;                    // [hidden, q_size]
  TensorView post_attention_layernorm;  // [hidden]
  TensorView gate_proj, up_proj;        // [intermediate, hidden] x2
  TensorView down_proj;                 // [hidden, intermediate]
};

// The tensors of a Llama model in Hugging Face names and order (embeddings, layers, final norm,
// lm_head), with their shapes ([out, in] for projections); lm_head.weight only when the
// embeddings are not tied.
struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<TensorShape> LlamaTensorShapes(const ModelConfig& config);

class ModelWeights {
 public:
  // Reads `dir`/config.json and either `dir`/model.safetensors or the shards listed in
  // `dir`/model.safetensors.index.json. Errors name the file, the tensor, what was expected and
  // what was found. Tensors may be F32, F16 or BF16, each in its own dtype. Tensors that a Llama
  // does not use (and lm_head.weight when the embeddings are tied) are ignored.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  const TensorView& embed_tokens() const { return embed_tokens_; }  // [vocab, hidden]
  const TensorView& norm() const { return norm_; }                  // [hidden]
  // [vocab, hidden]; the embedding matrix itself when the embeddings are tied.
  const TensorView& lm_head() const { return lm_head_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }

 private:
  ModelWeights() = default;
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  TensorView embed_tokens_, norm_, lm_head_;
  std::vector<LayerWeights> layers_;
};

}  // namespace convoy

#endif  // CONVOY_MODEL_MODEL_WEIGHTS_H_
