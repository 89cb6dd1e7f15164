#include "executor/cpu/ops.h"

#include <cmath>

#include "common/simd.h"
#include "model/rope_frequencies.h"

namespace convoy {

namespace {

// One row of RmsNorm over x, or, with `delta`, over x + delta, which is also written to `sum`
// (it may alias x). Sums of squares in sixteen fp32 lanes, added up in double.
inline void NormRow(const float* x, const float* delta, float* sum_out, const float* weight,
                    int64_t dim, float eps, float* out) {
  int64_t i = 0;
  double sum = 0.0;
#if defined(__AVX512F__)
  __m512 squares = _mm512_setzero_ps();
  for (; i + 16 <= dim; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    if (delta != nullptr) {
      v = _mm512_add_ps(v, _mm512_loadu_ps(delta + i));
      _mm512_storeu_ps(sum_out + i, v);
    }
    squares = _mm512_fmadd_ps(v, v, squares);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, squares);
  for (float lane : lanes) sum += lane;
#endif
  for (; i < dim; ++i) {
    float v = x[i];
    if (delta != nullptr) sum_out[i] = v = v + delta[i];
    sum += static_cast<double>(v) * v;
  }
  const float* normed = delta != nullptr ? sum_out : x;
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / dim + eps));
  i = 0;
#if defined(__AVX512F__)
  const __m512 vscale = _mm512_set1_ps(scale);
  for (; i + 16 <= dim; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(normed + i), vscale);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(weight + i), v));
  }
#endif
  for (; i < dim; ++i) out[i] = weight[i] * (normed[i] * scale);
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
             float* out) {
#pragma omp parallel for schedule(static) if (rows * dim >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    NormRow(x + r * dim, nullptr, nullptr, weight, dim, eps, out + r * dim);
  }
}

void AddRmsNorm(float* x, const float* delta, const float* weight, int64_t rows, int64_t dim,
                float eps, float* out) {
#pragma omp parallel for schedule(static) if (rows * dim >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    NormRow(x + r * dim, delta + r * dim, x + r * dim, weight, dim, eps, out + r * dim);
  }
}

void SiluMul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
#pragma omp parallel for schedule(static) if (rows * inter >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    int64_t i = 0;
#if defined(__AVX512F__)
    // libm's expf, one value at a time, took a tenth of a prefill step.
    for (; i < inter; i += 16) {
      const __mmask16 mask = TailMask(inter, i);
      const __m512 gv = _mm512_maskz_loadu_ps(mask, g + i);
      const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
      const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
      _mm512_mask_storeu_ps(o + i, mask, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, u + i)));
    }
#endif
    for (; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

RopeTable::RopeTable(const ModelConfig& config)
    : inv_freq_(RopeInverseFrequencies(config)), scale_(RopeCosSinScale(config)) {}

void GeluTanhMul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  // sqrt(2 / pi), as PyTorch's kBeta.
  constexpr float kBeta = static_cast<float>(0.7978845608028654);
  constexpr float kKappa = 0.044715f;
#pragma omp parallel for schedule(static) if (rows * inter >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) {
      const float x = g[i];
      const float inner = kBeta * (x + kKappa * x * x * x);
      o[i] = 0.5f * x * (1.0f + std::tanh(inner)) * u[i];
    }
  }
}

void SoftCap(float* x, int64_t n, float cap) {
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void RopeTable::Angles(int64_t position, float* cos_out, float* sin_out) const {
  const float p = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float angle = p * inv_freq_[i];  // rounded to fp32, as in transformers
    cos_out[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale_;
    sin_out[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale_;
  }
}

void RopeTable::Apply(float* x, int64_t num_heads, int64_t head_dim, int64_t rotary_dim,
                      const float* cos_v, const float* sin_v) {
  const int64_t half = rotary_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * cos_v[i] - b * sin_v[i];
      v[i + half] = b * cos_v[i] + a * sin_v[i];
    }
  }
}

}  // namespace convoy
