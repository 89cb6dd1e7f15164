#include "executor/cuda/device_model.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "common/half.h"
#include "convoy/status_macros.h"
#include "executor/cuda/cuda_check.h"
#include "kernels/fill_random.cuh"
#include "model/tensor_rows.h"

namespace convoy::cuda {
namespace {

constexpr int64_t kAlignment = 256;  // bytes

int64_t AlignUp(int64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

// Converts `t` to the 16-bit type and copies it to `dst` (plus `element_offset` elements).
absl::Status UploadTensor(const TensorView& t, kernels::HalfType dtype, const void* dst,
                          int64_t element_offset, int64_t expected_elements) {
  if (t.NumElements() != expected_elements) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor %s has %d elements, expected %d",
                                                      t.name, t.NumElements(), expected_elements));
  }
  // Any storage, quantized blocks included, read as fp32 first (tensor_rows.h).
  std::vector<float> values(expected_elements);
  ViewRowsToFloat(t, 0, ViewRows(t), values.data());
  std::vector<uint16_t> host(expected_elements);
  for (int64_t i = 0; i < expected_elements; ++i) {
    host[i] = dtype == kernels::HalfType::kBF16 ? FloatToBF16(values[i]) : FloatToFP16(values[i]);
  }
  void* target = static_cast<uint16_t*>(const_cast<void*>(dst)) + element_offset;
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(target, host.data(), host.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status Fill(const void* dst, int64_t elements, kernels::HalfType dtype, float scale,
                  float offset, uint64_t seed) {
  kernels::FillRandomParams p;
  p.data = const_cast<void*>(dst);
  p.num_elements = elements;
  p.scale = scale;
  p.offset = offset;
  p.seed = seed;
  p.dtype = dtype;
  CUDA_RETURN_IF_ERROR(kernels::LaunchFillRandom(p, nullptr));
  return absl::OkStatus();
}

}  // namespace

std::vector<float> RopeInverseFrequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<float> result(dim / 2);
  const RopeScaling& s = config.rope_scaling;
  const bool llama3 = s.rope_type == "llama3";
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (int64_t i = 0; i < dim / 2; ++i) {
    double inv = 1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / dim);
    if (llama3) {
      const double wavelen = 2.0 * std::numbers::pi / inv;
      if (wavelen > low_wavelen) {
        inv /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        inv = (1.0 - smooth) * inv / s.factor + smooth * inv;
      }
    }
    result[i] = static_cast<float>(inv);
  }
  return result;
}

absl::Status DeviceModel::Allocate(const ModelConfig& config, kernels::HalfType dtype) {
  config_ = config;
  dtype_ = dtype;
  const int64_t h = config.hidden_size, v = config.vocab_size, in = config.intermediate_size;
  const int64_t qkv_rows = config.q_size() + 2 * config.kv_size();
  int64_t bytes = 0;
  auto reserve = [&](int64_t elements) {
    const int64_t at = bytes;
    bytes += AlignUp(elements * 2);
    return at;
  };
  const int64_t embed_at = reserve(v * h);
  const int64_t norm_at = reserve(h);
  const int64_t head_at = config.tie_word_embeddings ? embed_at : reserve(v * h);
  struct LayerOffsets {
    int64_t input_norm, qkv, o, post_norm, gate_up, down;
    int64_t qkv_bias = -1, q_norm = -1, k_norm = -1;
  };
  std::vector<LayerOffsets> offsets(config.num_hidden_layers);
  for (auto& o : offsets) {
    o.input_norm = reserve(h);
    o.qkv = reserve(qkv_rows * h);
    o.o = reserve(h * config.q_size());
    o.post_norm = reserve(h);
    o.gate_up = reserve(2 * in * h);
    o.down = reserve(h * in);
    if (config.attention_bias) o.qkv_bias = reserve(qkv_rows);
    if (config.qk_norm) {
      o.q_norm = reserve(config.head_dim);
      o.k_norm = reserve(config.head_dim);
    }
  }
  ASSIGN_OR_RETURN(storage_, DeviceBuffer::Allocate(bytes));
  const auto* base = storage_.as<const std::byte>();
  embed_tokens_ = base + embed_at;
  final_norm_ = base + norm_at;
  lm_head_ = base + head_at;
  layers_.clear();
  auto at = [&](int64_t offset) -> const void* { return offset < 0 ? nullptr : base + offset; };
  for (const auto& o : offsets) {
    layers_.push_back({base + o.input_norm, base + o.qkv, base + o.o, base + o.post_norm,
                       base + o.gate_up, base + o.down, at(o.qkv_bias), at(o.q_norm),
                       at(o.k_norm)});
  }
  const std::vector<float> inv_freq = RopeInverseFrequencies(config);
  ASSIGN_OR_RETURN(inv_freq_, DeviceBuffer::Allocate(inv_freq.size() * sizeof(float)));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(inv_freq_.get(), inv_freq.data(), inv_freq.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceModel>> DeviceModel::Upload(const ModelWeights& weights,
                                                                 kernels::HalfType dtype) {
  const ModelConfig& c = weights.config();
  std::unique_ptr<DeviceModel> model(new DeviceModel());
  RETURN_IF_ERROR(model->Allocate(c, dtype));
  const int64_t h = c.hidden_size, in = c.intermediate_size;
  RETURN_IF_ERROR(
      UploadTensor(weights.embed_tokens(), dtype, model->embed_tokens_, 0, c.vocab_size * h));
  RETURN_IF_ERROR(UploadTensor(weights.norm(), dtype, model->final_norm_, 0, h));
  if (!c.tie_word_embeddings) {
    RETURN_IF_ERROR(UploadTensor(weights.lm_head(), dtype, model->lm_head_, 0, c.vocab_size * h));
  }
  for (size_t i = 0; i < weights.layers().size(); ++i) {
    const LayerWeights& w = weights.layers()[i];
    const DeviceLayer& d = model->layers_[i];
    RETURN_IF_ERROR(UploadTensor(w.input_layernorm, dtype, d.input_norm, 0, h));
    RETURN_IF_ERROR(UploadTensor(w.q_proj, dtype, d.qkv, 0, c.q_size() * h));
    RETURN_IF_ERROR(UploadTensor(w.k_proj, dtype, d.qkv, c.q_size() * h, c.kv_size() * h));
    RETURN_IF_ERROR(
        UploadTensor(w.v_proj, dtype, d.qkv, (c.q_size() + c.kv_size()) * h, c.kv_size() * h));
    RETURN_IF_ERROR(UploadTensor(w.o_proj, dtype, d.o_proj, 0, h * c.q_size()));
    RETURN_IF_ERROR(UploadTensor(w.post_attention_layernorm, dtype, d.post_norm, 0, h));
    RETURN_IF_ERROR(UploadTensor(w.gate_proj, dtype, d.gate_up, 0, in * h));
    RETURN_IF_ERROR(UploadTensor(w.up_proj, dtype, d.gate_up, in * h, in * h));
    RETURN_IF_ERROR(UploadTensor(w.down_proj, dtype, d.down_proj, 0, h * in));
    if (d.qkv_bias != nullptr) {
      RETURN_IF_ERROR(UploadTensor(w.q_bias, dtype, d.qkv_bias, 0, c.q_size()));
      RETURN_IF_ERROR(UploadTensor(w.k_bias, dtype, d.qkv_bias, c.q_size(), c.kv_size()));
      RETURN_IF_ERROR(
          UploadTensor(w.v_bias, dtype, d.qkv_bias, c.q_size() + c.kv_size(), c.kv_size()));
    }
    if (d.q_norm != nullptr) {
      RETURN_IF_ERROR(UploadTensor(w.q_norm, dtype, d.q_norm, 0, c.head_dim));
      RETURN_IF_ERROR(UploadTensor(w.k_norm, dtype, d.k_norm, 0, c.head_dim));
    }
  }
  return model;
}

absl::StatusOr<std::unique_ptr<DeviceModel>> DeviceModel::Random(const ModelConfig& config,
                                                                 kernels::HalfType dtype,
                                                                 uint64_t seed) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<DeviceModel> model(new DeviceModel());
  RETURN_IF_ERROR(model->Allocate(config, dtype));
  const int64_t h = config.hidden_size, in = config.intermediate_size;
  // Uniform on [-a, a] has standard deviation a / sqrt(3).
  const auto amplitude = [](int64_t fan_in) {
    return static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in)));
  };
  uint64_t stream = seed * 1000003u;
  RETURN_IF_ERROR(Fill(model->embed_tokens_, config.vocab_size * h, dtype, 1.0f, 0.0f, ++stream));
  RETURN_IF_ERROR(Fill(model->final_norm_, h, dtype, 0.1f, 1.0f, ++stream));
  if (!config.tie_word_embeddings) {
    RETURN_IF_ERROR(
        Fill(model->lm_head_, config.vocab_size * h, dtype, amplitude(h), 0.0f, ++stream));
  }
  for (const DeviceLayer& d : model->layers_) {
    const int64_t qkv_rows = config.q_size() + 2 * config.kv_size();
    RETURN_IF_ERROR(Fill(d.input_norm, h, dtype, 0.1f, 1.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.qkv, qkv_rows * h, dtype, amplitude(h), 0.0f, ++stream));
    RETURN_IF_ERROR(
        Fill(d.o_proj, h * config.q_size(), dtype, amplitude(config.q_size()), 0.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.post_norm, h, dtype, 0.1f, 1.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.gate_up, 2 * in * h, dtype, amplitude(h), 0.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.down_proj, h * in, dtype, amplitude(in), 0.0f, ++stream));
    if (d.qkv_bias != nullptr) {
      RETURN_IF_ERROR(Fill(d.qkv_bias, qkv_rows, dtype, 0.1f, 0.0f, ++stream));
    }
    if (d.q_norm != nullptr) {
      RETURN_IF_ERROR(Fill(d.q_norm, config.head_dim, dtype, 0.1f, 1.0f, ++stream));
      RETURN_IF_ERROR(Fill(d.k_norm, config.head_dim, dtype, 0.1f, 1.0f, ++stream));
    }
  }
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return model;
}

}  // namespace convoy::cuda
