#include "executor/cuda/device_model.h"

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "convoy/status_macros.h"
#include "executor/cuda/cuda_check.h"
#include "kernels/fill_random.cuh"
#include "model/gguf_file.h"
#include "model/rope_frequencies.h"
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

absl::StatusOr<DeviceBuffer> UploadFloats(const std::vector<float>& values) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(values.size() * sizeof(float)));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(buffer.get(), values.data(), values.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
  return buffer;
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

namespace {

// The tensors a matrix is made of, rows in order (q, k, v; gate, up; or one).
using Components = std::vector<const TensorView*>;

// Whether every component is in GGUF blocks the kernels run, with whole blocks per row.
bool Packable(const Components& components, int64_t cols) {
  if (components.empty()) return false;
  for (const TensorView* t : components) {
    if (t->dtype != DType::kQuantized ||
        !kernels::IsGgufBlockType(static_cast<int32_t>(t->quant_type)) ||
        cols % kernels::GgufBlockElements(static_cast<kernels::GgufBlockType>(t->quant_type)) !=
            0) {
      return false;
    }
  }
  return true;
}

// A matrix's place in the allocation: `half_at`, or its parts' offsets (in DeviceMatrix::Part's
// `blocks`, as integers until the allocation exists).
struct MatrixPlan {
  int64_t half_at = -1;
  std::vector<DeviceMatrix::Part> parts;
  std::vector<int64_t> part_at;
};

template <typename Reserve>
MatrixPlan PlanMatrix(int64_t rows, int64_t cols, const Components& packed_components,
                      Reserve&& reserve_bytes) {
  MatrixPlan plan;
  if (!Packable(packed_components, cols)) {
    plan.half_at = reserve_bytes(rows * cols * 2);
    return plan;
  }
  for (const TensorView* t : packed_components) {
    const auto type = static_cast<kernels::GgufBlockType>(t->quant_type);
    const int64_t component_rows = t->NumElements() / cols;
    if (!plan.parts.empty() && plan.parts.back().type == type) {
      plan.parts.back().rows += component_rows;
    } else {
      plan.parts.push_back({nullptr, type, component_rows});
    }
  }
  for (const DeviceMatrix::Part& part : plan.parts) {
    plan.part_at.push_back(reserve_bytes(kernels::GgufRowBytes(part.type, cols) * part.rows));
  }
  return plan;
}

DeviceMatrix Place(const MatrixPlan& plan, const std::byte* base) {
  DeviceMatrix m;
  if (plan.half_at >= 0) {
    m.half = base + plan.half_at;
    return m;
  }
  m.parts = plan.parts;
  for (size_t i = 0; i < m.parts.size(); ++i) m.parts[i].blocks = base + plan.part_at[i];
  return m;
}

// Uploads a matrix made of `components` ([rows, cols] together): converted to the 16-bit type, or
// each component's blocks copied as they are into its part.
absl::Status UploadMatrix(const Components& components, const DeviceMatrix& m, int64_t cols,
                          kernels::HalfType dtype) {
  int64_t element_offset = 0;
  size_t part = 0;
  int64_t part_byte_offset = 0;
  for (const TensorView* t : components) {
    const int64_t elements = t->NumElements();
    if (elements % cols != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %s has %d elements, not a whole number of rows of %d", t->name, elements, cols));
    }
    if (!m.packed()) {
      RETURN_IF_ERROR(UploadTensor(*t, dtype, m.half, element_offset, elements));
      element_offset += elements;
      continue;
    }
    const auto type = static_cast<kernels::GgufBlockType>(t->quant_type);
    if (part < m.parts.size() && m.parts[part].type != type) {
      ++part;
      part_byte_offset = 0;
    }
    const int64_t bytes = kernels::GgufRowBytes(type, cols) * (elements / cols);
    if (part >= m.parts.size() || static_cast<int64_t>(t->num_bytes) != bytes) {
      return absl::InternalError(absl::StrFormat(
          "tensor %s: %d bytes of %s blocks do not fit the device layout (%d expected)", t->name,
          t->num_bytes, GgmlTypeName(t->quant_type), bytes));
    }
    auto* target = static_cast<std::byte*>(const_cast<void*>(m.parts[part].blocks));
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(target + part_byte_offset, t->data, bytes, cudaMemcpyHostToDevice));
    part_byte_offset += bytes;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceModel::Allocate(const ModelConfig& config, kernels::HalfType dtype,
                                   const ModelWeights* packed_from) {
  config_ = config;
  dtype_ = dtype;
  const int64_t h = config.hidden_size, v = config.vocab_size, in = config.intermediate_size;
  const int64_t qkv_rows = config.q_size() + 2 * config.kv_size();
  int64_t bytes = 0;
  auto reserve_bytes = [&](int64_t n) {
    const int64_t at = bytes;
    bytes += AlignUp(n);
    return at;
  };
  auto reserve = [&](int64_t elements) { return reserve_bytes(elements * 2); };
  const int64_t embed_at = reserve(v * h);
  const int64_t norm_at = reserve(h);
  // A tied lm_head shares the 16-bit embedding unless it is kept in blocks.
  const Components head_components =
      packed_from == nullptr ? Components() : Components{&packed_from->lm_head()};
  MatrixPlan head;
  if (config.tie_word_embeddings && !Packable(head_components, h)) {
    head.half_at = embed_at;
  } else {
    head = PlanMatrix(v, h, head_components, reserve_bytes);
  }
  struct LayerPlan {
    int64_t input_norm, post_norm;
    MatrixPlan qkv, o, gate_up, down;
    int64_t qkv_bias = -1, q_norm = -1, k_norm = -1, pre_ffn_norm = -1, post_ffn_norm = -1;
  };
  std::vector<LayerPlan> plans(config.num_hidden_layers);
  for (size_t i = 0; i < plans.size(); ++i) {
    LayerPlan& o = plans[i];
    // The components a packed layout is planned from: none without `packed_from`.
    Components qkv, o_proj, gate_up, down;
    if (packed_from != nullptr) {
      const LayerWeights& w = packed_from->layers()[i];
      qkv = {&w.q_proj, &w.k_proj, &w.v_proj};
      o_proj = {&w.o_proj};
      gate_up = {&w.gate_proj, &w.up_proj};
      down = {&w.down_proj};
    }
    o.input_norm = reserve(h);
    o.qkv = PlanMatrix(qkv_rows, h, qkv, reserve_bytes);
    o.o = PlanMatrix(h, config.q_size(), o_proj, reserve_bytes);
    o.post_norm = reserve(h);
    o.gate_up = PlanMatrix(2 * in, h, gate_up, reserve_bytes);
    o.down = PlanMatrix(h, in, down, reserve_bytes);
    if (config.attention_bias) o.qkv_bias = reserve(qkv_rows);
    if (config.qk_norm) {
      o.q_norm = reserve(config.head_dim);
      o.k_norm = reserve(config.head_dim);
    }
    if (config.sandwich_norms) {
      o.pre_ffn_norm = reserve(h);
      o.post_ffn_norm = reserve(h);
    }
  }
  ASSIGN_OR_RETURN(storage_, DeviceBuffer::Allocate(bytes));
  const auto* base = storage_.as<const std::byte>();
  embed_tokens_ = base + embed_at;
  final_norm_ = base + norm_at;
  lm_head_ = Place(head, base);
  layers_.clear();
  auto at = [&](int64_t offset) -> const void* { return offset < 0 ? nullptr : base + offset; };
  for (const LayerPlan& o : plans) {
    layers_.push_back({base + o.input_norm, Place(o.qkv, base), Place(o.o, base),
                       base + o.post_norm, Place(o.gate_up, base), Place(o.down, base),
                       at(o.qkv_bias), at(o.q_norm), at(o.k_norm), at(o.pre_ffn_norm),
                       at(o.post_ffn_norm)});
  }
  rope_scale_ = RopeCosSinScale(config);
  ASSIGN_OR_RETURN(inv_freq_, UploadFloats(RopeInverseFrequencies(config)));
  if (!config.layer_sliding.empty()) {
    // Gemma 3's sliding layers: their own base, no scaling (as the CPU executor's local table).
    ModelConfig local = config;
    local.rope_theta = config.rope_local_theta;
    local.rope_scaling = RopeScaling();
    ASSIGN_OR_RETURN(local_inv_freq_, UploadFloats(RopeInverseFrequencies(local)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceModel>> DeviceModel::Upload(const ModelWeights& weights,
                                                                 kernels::HalfType dtype,
                                                                 bool native) {
  const ModelConfig& c = weights.config();
  std::unique_ptr<DeviceModel> model(new DeviceModel());
  RETURN_IF_ERROR(model->Allocate(c, dtype, native ? &weights : nullptr));
  const int64_t h = c.hidden_size, in = c.intermediate_size;
  RETURN_IF_ERROR(
      UploadTensor(weights.embed_tokens(), dtype, model->embed_tokens_, 0, c.vocab_size * h));
  RETURN_IF_ERROR(UploadTensor(weights.norm(), dtype, model->final_norm_, 0, h));
  if (!c.tie_word_embeddings || model->lm_head_.packed()) {
    RETURN_IF_ERROR(UploadMatrix({&weights.lm_head()}, model->lm_head_, h, dtype));
  }
  for (size_t i = 0; i < weights.layers().size(); ++i) {
    const LayerWeights& w = weights.layers()[i];
    const DeviceLayer& d = model->layers_[i];
    RETURN_IF_ERROR(UploadTensor(w.input_layernorm, dtype, d.input_norm, 0, h));
    RETURN_IF_ERROR(UploadMatrix({&w.q_proj, &w.k_proj, &w.v_proj}, d.qkv, h, dtype));
    RETURN_IF_ERROR(UploadMatrix({&w.o_proj}, d.o_proj, c.q_size(), dtype));
    RETURN_IF_ERROR(UploadTensor(w.post_attention_layernorm, dtype, d.post_norm, 0, h));
    RETURN_IF_ERROR(UploadMatrix({&w.gate_proj, &w.up_proj}, d.gate_up, h, dtype));
    RETURN_IF_ERROR(UploadMatrix({&w.down_proj}, d.down_proj, in, dtype));
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
    if (d.pre_ffn_norm != nullptr) {
      RETURN_IF_ERROR(UploadTensor(w.pre_feedforward_layernorm, dtype, d.pre_ffn_norm, 0, h));
      RETURN_IF_ERROR(UploadTensor(w.post_feedforward_layernorm, dtype, d.post_ffn_norm, 0, h));
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
  // Norms that scale by about 1, whatever offset the kernels add to them.
  const float norm_mean = static_cast<float>(1.0 - config.norm_weight_offset);
  RETURN_IF_ERROR(Fill(model->embed_tokens_, config.vocab_size * h, dtype, 1.0f, 0.0f, ++stream));
  RETURN_IF_ERROR(Fill(model->final_norm_, h, dtype, 0.1f, norm_mean, ++stream));
  if (!config.tie_word_embeddings) {
    RETURN_IF_ERROR(
        Fill(model->lm_head_.half, config.vocab_size * h, dtype, amplitude(h), 0.0f, ++stream));
  }
  for (const DeviceLayer& d : model->layers_) {
    const int64_t qkv_rows = config.q_size() + 2 * config.kv_size();
    RETURN_IF_ERROR(Fill(d.input_norm, h, dtype, 0.1f, norm_mean, ++stream));
    RETURN_IF_ERROR(Fill(d.qkv.half, qkv_rows * h, dtype, amplitude(h), 0.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.o_proj.half, h * config.q_size(), dtype, amplitude(config.q_size()),
                         0.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.post_norm, h, dtype, 0.1f, norm_mean, ++stream));
    RETURN_IF_ERROR(Fill(d.gate_up.half, 2 * in * h, dtype, amplitude(h), 0.0f, ++stream));
    RETURN_IF_ERROR(Fill(d.down_proj.half, h * in, dtype, amplitude(in), 0.0f, ++stream));
    if (d.qkv_bias != nullptr) {
      RETURN_IF_ERROR(Fill(d.qkv_bias, qkv_rows, dtype, 0.1f, 0.0f, ++stream));
    }
    if (d.q_norm != nullptr) {
      RETURN_IF_ERROR(Fill(d.q_norm, config.head_dim, dtype, 0.1f, norm_mean, ++stream));
      RETURN_IF_ERROR(Fill(d.k_norm, config.head_dim, dtype, 0.1f, norm_mean, ++stream));
    }
    if (d.pre_ffn_norm != nullptr) {
      RETURN_IF_ERROR(Fill(d.pre_ffn_norm, h, dtype, 0.1f, norm_mean, ++stream));
      RETURN_IF_ERROR(Fill(d.post_ffn_norm, h, dtype, 0.1f, norm_mean, ++stream));
    }
  }
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return model;
}

}  // namespace convoy::cuda
