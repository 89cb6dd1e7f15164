// Element-wise parts of the Llama forward pass on the CPU, each parallel over rows.
#ifndef CONVOY_EXECUTOR_CPU_OPS_H_
#define CONVOY_EXECUTOR_CPU_OPS_H_

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace convoy {

// Below this many elements an element-wise pass runs on the calling thread: waking the OpenMP team
// costs more than the work, and on a busy machine every parallel region waits for its slowest
// thread to be scheduled.
inline constexpr int64_t kMinParallelWork = int64_t{1} << 16;

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim` floats.
// `out` may alias `x`.
void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out);

// x[r] += delta[r], then out[r] = RmsNorm(x[r]): the residual add and the next norm in one pass.
// `out` must not alias `x` or `delta`.
void AddRmsNorm(float* x, const float* delta, const float* weight, int64_t rows, int64_t dim,
                float eps, float* out);

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]; gate_up rows hold gate then up.
void SiluMul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// out[r, i] = gelu(gate_up[r, i]) * gate_up[r, inter + i], GELU with the tanh approximation
// (PyTorch's gelu(approximate="tanh"), Gemma's GeGLU).
void GeluTanhMul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// x[i] = cap * tanh(x[i] / cap) for i < n.
void SoftCap(float* x, int64_t n, float cap);

// x[r] += y[r] over rows x dim.
void AddInPlace(float* x, const float* y, int64_t n);

// Rotary embedding tables in the layout Hugging Face Llama uses (rotate-half, not interleaved):
// the angle of pair i at position p is p * inv_freq[i], computed in fp32 as transformers does,
// with the frequencies and the cos/sin factor that model/rope_frequencies.h derives from the
// config (its rope scaling applied there).
class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& config);
  // rotary_dim / 2.
  int64_t half_dim() const { return static_cast<int64_t>(inv_freq_.size()); }
  // Fills cos and sin (half_dim floats each) for `position`.
  void Angles(int64_t position, float* cos_out, float* sin_out) const;
  // Rotates the first rotary_dim floats (ModelConfig::RotaryDim; pairs i and i + rotary_dim / 2)
  // of `num_heads` heads of head_dim floats at `x` in place with precomputed cos/sin
  // (rotary_dim / 2 each); the rest of each head passes unchanged.
  static void Apply(float* x, int64_t num_heads, int64_t head_dim, int64_t rotary_dim,
                    const float* cos_v, const float* sin_v);
  // Every dimension rotates.
  static void Apply(float* x, int64_t num_heads, int64_t head_dim, const float* cos_v,
                    const float* sin_v) {
    Apply(x, num_heads, head_dim, head_dim, cos_v, sin_v);
  }

 private:
  std::vector<float> inv_freq_;
  float scale_;  // multiplies cos and sin (LongRoPE's attention factor)
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_OPS_H_
