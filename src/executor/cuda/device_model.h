// The model's weights in device memory, in one allocation, in one 16-bit type. The query, key and
// value projections are fused into one [q_size + 2 kv_size, hidden] matrix and the gate and up
// projections into one [2 intermediate, hidden] matrix (gate rows first), so each is one product;
// Qwen2's query, key and value biases likewise into one vector.
//
// With native weights, a projection (and the lm_head) whose tensors are all in GGUF blocks the
// kernels run (kernels/gguf_blocks.cuh) keeps the file's blocks, byte for byte: a fused matrix is
// then one part per run of components of the same type (a Q4_K_M file stores V in Q6_K beside a
// Q4_K Q and K). The token embedding stays 16-bit (a lookup reads a few rows; a tied quantized
// embedding is kept twice, 16-bit for lookups and in blocks for the lm_head), as do the norms and
// biases, and any matrix with a component in another type.
#ifndef CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_
#define CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/cuda/device_buffer.h"
#include "kernels/gguf_blocks.cuh"
#include "kernels/half_type.cuh"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace convoy::cuda {

// A projection's weight, [rows, cols]: 16-bit at `half`, or (native weights) consecutive row ranges
// of GGUF blocks, `parts`, each of one type, its rows back to back.
struct DeviceMatrix {
  struct Part {
    const void* blocks = nullptr;
    kernels::GgufBlockType type = kernels::GgufBlockType::kQ8_0;
    int64_t rows = 0;
  };
  const void* half = nullptr;
  std::vector<Part> parts;  // empty when `half` is set

  bool packed() const { return half == nullptr; }
};

// Norm weights are uploaded as stored: ModelConfig::norm_weight_offset is the kernels' to add.
struct DeviceLayer {
  const void* input_norm = nullptr;  // [hidden]
  DeviceMatrix qkv;                  // [q_size + 2 kv_size, hidden]
  DeviceMatrix o_proj;               // [hidden, q_size]
  // [hidden]: the MLP's input norm, or with sandwich norms (Gemma 3) the attention output's.
  const void* post_norm = nullptr;
  DeviceMatrix gate_up;    // [2 intermediate, hidden]
  DeviceMatrix down_proj;  // [hidden, intermediate]
  // Only in a family with them (ModelConfig::attention_bias, qk_norm); null otherwise.
  const void* qkv_bias = nullptr;  // [q_size + 2 kv_size]: Qwen2's
  const void* q_norm = nullptr;    // [head_dim], every query head's RMS norm weight: Qwen3's
  const void* k_norm = nullptr;    // [head_dim], every key head's
  // Only with ModelConfig::sandwich_norms (Gemma 3): the MLP's input and output norms, [hidden].
  const void* pre_ffn_norm = nullptr;
  const void* post_ffn_norm = nullptr;
};

class DeviceModel {
 public:
  // Converts and uploads `weights`; the host weights may be released afterwards. `native`: keep
  // quantized projections in their blocks (above).
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Upload(const ModelWeights& weights,
                                                             kernels::HalfType dtype,
                                                             bool native = false);
  // Random weights generated on the device (benchmarks: no file behind them). Projections are
  // uniform with standard deviation about 1 / sqrt(fan_in); norms are near 1.
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Random(const ModelConfig& config,
                                                             kernels::HalfType dtype,
                                                             uint64_t seed);

  const ModelConfig& config() const { return config_; }
  kernels::HalfType dtype() const { return dtype_; }
  const void* embed_tokens() const { return embed_tokens_; }  // [vocab, hidden]
  const void* final_norm() const { return final_norm_; }
  const DeviceMatrix& lm_head() const { return lm_head_; }  // [vocab, hidden]
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  // [RotaryDim() / 2]: model/rope_frequencies.h's, on the device; for a sliding-window layer of a
  // model whose sliding layers have a rope base of their own (Gemma 3), that base's.
  const float* inv_freq(bool sliding_layer = false) const {
    return (sliding_layer && local_inv_freq_.get() != nullptr ? local_inv_freq_ : inv_freq_)
        .as<float>();
  }
  float rope_scale() const { return rope_scale_; }  // multiplies cos and sin (LongRoPE)
  int64_t weight_bytes() const { return static_cast<int64_t>(storage_.size()); }

 private:
  DeviceModel() = default;
  // Lays out every tensor in one allocation and uploads the rope frequencies. With `packed_from`,
  // the projections of those weights that the kernels run in their blocks are laid out packed.
  absl::Status Allocate(const ModelConfig& config, kernels::HalfType dtype,
                        const ModelWeights* packed_from = nullptr);

  ModelConfig config_;
  kernels::HalfType dtype_ = kernels::HalfType::kBF16;
  DeviceBuffer storage_;
  DeviceBuffer inv_freq_, local_inv_freq_;
  float rope_scale_ = 1.0f;
  const void* embed_tokens_ = nullptr;
  const void* final_norm_ = nullptr;
  DeviceMatrix lm_head_;
  std::vector<DeviceLayer> layers_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_
