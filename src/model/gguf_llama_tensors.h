// A model's tensors from a GGUF file, under Hugging Face names and in Hugging Face layout, each in
// its own storage: F32, F16, BF16, or its quantized blocks (DType::kQuantized).
#ifndef CONVOY_MODEL_GGUF_LLAMA_TENSORS_H_
#define CONVOY_MODEL_GGUF_LLAMA_TENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace convoy {

// The GGUF name of a Hugging Face tensor of a family ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight", "...q_proj.bias" -> "blk.3.attn_q.bias", "...q_norm.weight" ->
// "blk.3.attn_q_norm.weight"); empty for a name that is not one.
// With `sandwich_norms` (Gemma 3), the layer norms take that family's GGUF names:
// post_attention_layernorm -> post_attention_norm, pre_feedforward_layernorm -> ffn_norm,
// post_feedforward_layernorm -> post_ffw_norm.
std::string GgufLlamaTensorName(const std::string& hf_name, bool sandwich_norms = false);

// Owns the file and the converted tensors; views stay valid as long as this object.
class GgufLlamaTensors {
 public:
  // Makes a view for every tensor of LlamaTensorShapes(config), pointing into the mapping: F32,
  // F16 and BF16 tensors as they are, quantized ones as their blocks (DType::kQuantized, with
  // quant_type; only types with a dequantizer, so that every view can be read as fp32 with
  // tensor_rows.h). attn_q and attn_k are copies with llama.cpp's rotary row permutation undone
  // (its converter interleaves the two halves of each head's rows for its rope kernels; the
  // executors rotate halves, as Hugging Face does); rows move whole, blocks and all. Errors name
  // the file, the GGUF and the Hugging Face tensor, what was expected and what was found:
  // INVALID_ARGUMENT for a missing tensor or a wrong shape, UNIMPLEMENTED for a type without a
  // dequantizer, or for a bias or per-head norm tensor that the family does not have.
  static absl::StatusOr<std::unique_ptr<GgufLlamaTensors>> Load(std::unique_ptr<GgufFile> file,
                                                                const ModelConfig& config);

  const GgufFile& file() const { return *file_; }
  // Hugging Face name -> view ([out, in] for projections).
  const std::map<std::string, TensorView>& views() const { return views_; }

 private:
  GgufLlamaTensors() = default;
  absl::Status AddTensor(const std::string& hf_name, const std::vector<int64_t>& expected_shape,
                         int64_t rotary_heads, bool sandwich_norms);

  std::unique_ptr<GgufFile> file_;
  // The permuted copies that views point into; a vector's data does not move when the outer
  // vector grows.
  std::vector<std::vector<std::byte>> row_buffers_;
  std::map<std::string, TensorView> views_;
};

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_LLAMA_TENSORS_H_
