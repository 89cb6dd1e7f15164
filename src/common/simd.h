// Small AVX-512 (and AVX2) helpers shared by the CPU kernels.
#ifndef CONVOY_COMMON_SIMD_H_
#define CONVOY_COMMON_SIMD_H_

namespace convoy {
// 2^f for f in [-0.5, 0.5], highest power first (Exp16, Exp8): relative error about 1e-6.
inline constexpr float kExp2Polynomial[8] = {1.525273380405984e-05f,  1.5403530393381608e-04f,
                                             1.3333558146428443e-03f, 9.618129107628477e-03f,
                                             5.550410866482158e-02f,  2.402265069591007e-01f,
                                             6.931471805599453e-01f,  1.0f};
}  // namespace convoy

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CONVOY_SIMD_AVX2 1

namespace convoy {

// exp of 8 lanes, Exp16's polynomial and range reduction on AVX2 (which has no scalef: 2^whole
// is built in the exponent bits). Lanes below -87 give 0, lanes above 88.7 infinity, a NaN lane
// about 1e-38 as in Exp16.
inline __m256 Exp8(__m256 v) {
  const __m256 low = _mm256_set1_ps(-87.0f);
  // t is clamped to 128 so that large lanes make the infinite exponent rather than overflow it.
  const __m256 t =
      _mm256_min_ps(_mm256_mul_ps(_mm256_max_ps(v, low), _mm256_set1_ps(1.44269504088896341f)),
                    _mm256_set1_ps(128.0f));
  const __m256 whole = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, whole);  // in [-0.5, 0.5]
  __m256 p = _mm256_set1_ps(kExp2Polynomial[0]);
  for (int k = 1; k < 8; ++k) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Polynomial[k]));
  // whole is in [-126, 128]: 128 makes the all-ones exponent, infinity.
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(whole), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  return _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(v, low, _CMP_LT_OQ));
}

// The sum of the 8 lanes.
inline float HorizontalSum8(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s4 = _mm_hadd_ps(s4, s4);
  s4 = _mm_hadd_ps(s4, s4);
  return _mm_cvtss_f32(s4);
}

}  // namespace convoy
#endif

#if defined(__AVX512F__)
#include "common/x86_intrinsics.h"

namespace convoy {

// The sum of the 16 lanes.
inline float HorizontalSum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));  // swap the 256-bit halves
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));  // swap 128-bit lanes in each half
  __m128 s4 = _mm512_castps512_ps128(v);
  s4 = _mm_hadd_ps(s4, s4);
  s4 = _mm_hadd_ps(s4, s4);
  return _mm_cvtss_f32(s4);
}

}  // namespace convoy

#endif  // __AVX512F__

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace convoy {

// x[i] *= scale for i < n; returns the largest result (-inf for n = 0).
inline float ScaleAndMax(float* x, int64_t n, float scale) {
  int64_t i = 0;
  float best = -INFINITY;
#if defined(__AVX512F__)
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vbest = _mm512_set1_ps(-INFINITY);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vscale);
    _mm512_storeu_ps(x + i, v);
    vbest = _mm512_max_ps(vbest, v);
  }
  best = _mm512_reduce_max_ps(vbest);
#endif
  for (; i < n; ++i) {
    x[i] *= scale;
    best = std::max(best, x[i]);
  }
  return best;
}

#if defined(__AVX512F__)
// exp of 16 lanes: a degree-7 polynomial for 2^f after range reduction (relative error about 1e-6);
// lanes below -87 give 0 as expf's do, lanes above 88.7 give infinity; a NaN lane gives about 1e-38
// (the max with -87 takes the bound), not NaN.
inline __m512 Exp16(__m512 v) {
  const __m512 t =
      _mm512_mul_ps(_mm512_max_ps(v, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(1.44269504088896341f));
  const __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, whole);  // in [-0.5, 0.5]
  __m512 p = _mm512_set1_ps(kExp2Polynomial[0]);
  for (int k = 1; k < 8; ++k) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Polynomial[k]));
  const __m512 e = _mm512_scalef_ps(p, whole);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.0f), _CMP_LT_OQ), e,
                              _mm512_setzero_ps());
}

// The mask of the first min(n - i, 16) lanes.
inline __mmask16 TailMask(int64_t n, int64_t i) {
  return n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}
#endif

// x[i] = exp(x[i] - shift) for i < n; returns their sum. With AVX-512 sixteen at a time (Exp16),
// with AVX2 eight (Exp8).
inline float ExpShiftedSum(float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.0f;
#if defined(__AVX512F__)
  const __m512 vshift = _mm512_set1_ps(shift);
  __m512 vsum = _mm512_setzero_ps();
  for (; i < n; i += 16) {
    const __mmask16 mask = TailMask(n, i);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vshift));
    _mm512_mask_storeu_ps(x + i, mask, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(mask, e));
  }
  sum = HorizontalSum(vsum);
#elif defined(CONVOY_SIMD_AVX2)
  const __m256 vshift = _mm256_set1_ps(shift);
  __m256 vsum = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  sum = HorizontalSum8(vsum);
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

// dst[i] = bf16(src[i]), rounding to nearest even, in parallel over the OpenMP threads. With
// AVX512-BF16 the hardware converts (denormal inputs become zero); otherwise FloatToBF16.
inline void ConvertToBF16(const float* src, uint16_t* dst, int64_t n) {
#if defined(__AVX512BF16__)
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
#endif
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n, i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, src + i);
    _mm256_mask_storeu_epi16(dst + i, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
#else
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBF16(src[i]);
#endif
}

}  // namespace convoy
#endif  // CONVOY_COMMON_SIMD_H_
