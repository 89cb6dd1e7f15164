// Small AVX-512 helpers shared by the CPU kernels.
#ifndef CONVOY_COMMON_SIMD_H_
#define CONVOY_COMMON_SIMD_H_

#if defined(__AVX512F__)
// gcc 12's AVX-512 intrinsics build their "undefined" vectors from themselves, which
// -Wuninitialized reports wherever they are inlined; the header is not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

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

#include <cstdint>

#include "common/half.h"

namespace convoy {

// dst[i] = bf16(src[i]), rounding to nearest even, in parallel over the OpenMP threads. With
// AVX512-BF16 the hardware converts (denormal inputs become zero); otherwise FloatToBF16.
inline void ConvertToBF16(const float* src, uint16_t* dst, int64_t n) {
#if defined(__AVX512BF16__)
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask =
        n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(mask, src + i);
    _mm256_mask_storeu_epi16(dst + i, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
#else
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBF16(src[i]);
#endif
}

}  // namespace convoy
#endif  // CONVOY_COMMON_SIMD_H_
