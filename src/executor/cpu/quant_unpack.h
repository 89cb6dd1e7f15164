// GGUF weight rows of the group contract's types unpacked into the form QuantMatmul's kernels
// read: one byte per quant and the scales and offsets of quant_matmul.h's table, in fp32. Internal
// to quant_matmul.cc and its tests.
#ifndef CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_
#define CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/x86_intrinsics.h"  // quant_vnni.cc's AVX-512 intrinsics come through here
#include "model/gguf_file.h"

namespace convoy {
class QuantizedRows;
}  // namespace convoy

namespace convoy::quant {

// One weight row of k values, unpacked. The buffers belong to the caller.
struct UnpackedRow {
  // k quants in value order.
  uint8_t* q;
  // 8 per group of 32: lanes 0-3 the scale of the group's first 16 values, lanes 4-7 the second's
  // (the vector the kernels multiply by the activation's scale). k / 4 floats.
  float* scales;
  // The k / 16 offsets mn, then zeros up to OffsetStride(k).
  float* offsets;
};

// k / 16 rounded up to a multiple of 8: the offsets' and the activations' half-sums' length.
constexpr int64_t OffsetStride(int64_t k) { return (k / 16 + 7) / 8 * 8; }

using UnpackFn = void (*)(const std::byte* row, int64_t k, const UnpackedRow& out);
// y[r * ldy + j] for every row r of x and the `count` (1 to 4) weight rows at w, w + row_bytes,
// ..., read straight from their blocks, with the tile kernel's bits. REQUIRES: AVX2, FMA and
// F16C (Avx2Available()).
using DirectFn = void (*)(const std::byte* w, int64_t row_bytes, int count, int64_t k,
                          const QuantizedRows& x, float* y, int64_t ldy);

// y[r * ldy + w] for every row r of x and the `count` (1 to 4) unpacked rows.
using TileFn = void (*)(const UnpackedRow* rows, int count, int64_t k, const QuantizedRows& x,
                        float* y, int64_t ldy);

struct Format {
  int64_t block_elements;
  int64_t block_bytes;
  UnpackFn unpack_portable;
  UnpackFn unpack_avx2;  // REQUIRES: the CPU has AVX2. Writes the same bytes as unpack_portable.
  DirectFn direct_avx2;  // REQUIRES: AVX2, FMA and F16C
};

// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): the contract's last sum (quant_matmul.h).
__attribute__((target("avx2,fma"))) inline float HorizontalSumAvx2(__m256 v) {
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// The contract's offset term of one weight row, in 8 lanes: off[l] = fma(offsets[8t + l],
// xsum[8t + l], off[l]) for t = 0 .. stride / 8 - 1, in that order.
__attribute__((target("avx2,fma"))) inline __m256 OffsetSumAvx2(const float* offsets,
                                                                const float* xsum, int64_t stride) {
  __m256 off = _mm256_setzero_ps();
  for (int64_t t = 0; t < stride / 8; ++t) {
    off = _mm256_fmadd_ps(_mm256_loadu_ps(offsets + 8 * t), _mm256_loadu_ps(xsum + 8 * t), off);
  }
  return off;
}

// The group contract's types' formats (Q2_K and Q3_K); nullptr for the others.
const Format* FindFormat(GgmlType type);

}  // namespace convoy::quant

#endif  // CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_
