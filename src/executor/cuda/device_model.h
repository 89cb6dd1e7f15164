// The model's weights in device memory, in one allocation, in one 16-bit type. The query, key and
// value projections are fused into one [q_size + 2 kv_size, hidden] matrix and the gate and up
// projections into one [2 intermediate, hidden] matrix (gate rows first), so each is one product;
// Qwen2's query, key and value biases likewise into one vector.
#ifndef CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_
#define CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/cuda/device_buffer.h"
#include "kernels/half_type.cuh"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace convoy::cuda {

struct DeviceLayer {
  const void* input_norm = nullptr;  // [hidden]
  const void* qkv = nullptr;         // [q_size + 2 kv_size, hidden]
  const void* o_proj = nullptr;      // [hidden, q_size]
  const void* post_norm = nullptr;   // [hidden]
  const void* gate_up = nullptr;     // [2 intermediate, hidden]
  const void* down_proj = nullptr;   // [hidden, intermediate]
  // Only in a family with them (ModelConfig::attention_bias, qk_norm); null otherwise.
  const void* qkv_bias = nullptr;  // [q_size + 2 kv_size]: Qwen2's
  const void* q_norm = nullptr;    // [head_dim], every query head's RMS norm weight: Qwen3's
  const void* k_norm = nullptr;    // [head_dim], every key head's
};

class DeviceModel {
 public:
  // Converts and uploads `weights`; the host weights may be released afterwards.
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Upload(const ModelWeights& weights,
                                                             kernels::HalfType dtype);
  // Random weights generated on the device (benchmarks: no file behind them). Projections are
  // uniform with standard deviation about 1 / sqrt(fan_in); norms are near 1.
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Random(const ModelConfig& config,
                                                             kernels::HalfType dtype,
                                                             uint64_t seed);

  const ModelConfig& config() const { return config_; }
  kernels::HalfType dtype() const { return dtype_; }
  const void* embed_tokens() const { return embed_tokens_; }  // [vocab, hidden]
  const void* final_norm() const { return final_norm_; }
  const void* lm_head() const { return lm_head_; }  // [vocab, hidden]
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  const float* inv_freq() const { return inv_freq_.as<float>(); }  // [head_dim / 2]
  int64_t weight_bytes() const { return static_cast<int64_t>(storage_.size()); }

 private:
  DeviceModel() = default;
  // Lays out every tensor in one allocation and uploads the rope frequencies.
  absl::Status Allocate(const ModelConfig& config, kernels::HalfType dtype);

  ModelConfig config_;
  kernels::HalfType dtype_ = kernels::HalfType::kBF16;
  DeviceBuffer storage_;
  DeviceBuffer inv_freq_;
  const void* embed_tokens_ = nullptr;
  const void* final_norm_ = nullptr;
  const void* lm_head_ = nullptr;
  std::vector<DeviceLayer> layers_;
};

// The rotary inverse frequencies, with Llama 3 scaling when the config asks for it.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_DEVICE_MODEL_H_
