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
#endif  // CONVOY_COMMON_SIMD_H_
