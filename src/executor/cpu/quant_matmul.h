// y = x W^T with W kept in its GGUF blocks and x quantized to 8 bits per group of 32 values: the
// CPU's product for quantized weights. Batch-invariant, as gemm_f32.h.
//
// Weights. Each group of 32 consecutive values of a weight row is unpacked exactly into 32 small
// integers q and, for each half of 16 values h, a scale s[h] and an offset mn[h] (fp32), so that
// every value is w = s * q + mn in real arithmetic (the dequantizer rounds it once more). With d,
// dmin and m the block's fp16 fields as floats, sc and mi its sub-block scale and min as integers,
// and every product below one fp32 multiplication:
//   Q4_0: q 0..15, s = d, mn = -8 * d           Q4_1: q 0..15, s = d, mn = m
//   Q5_0: q 0..31, s = d, mn = -16 * d          Q5_1: q 0..31, s = d, mn = m
//   Q8_0: q -128..127 (signed), s = d, no mn
//   Q2_K: q 0..3,  s = d * sc, mn = -(dmin * mi)   Q3_K: q 0..7, s = d * (sc - 32), mn = -4 * s
//   Q4_K: q 0..15, s = d * sc, mn = -(dmin * mi)   Q5_K: q 0..31, as Q4_K
//   Q6_K: q 0..63, s = d * sc, mn = -32 * s
//
// Activations (QuantizedRows). For a group of 32 values x of a row: amax = max |x| (NaN if any x
// is NaN); a group with amax < 2^-100 is all zeros (scale 0); otherwise dx = amax / 127 and
// xq[i] = clamp(round_half_even(x[i] * (127 / amax)), -127, 127), a NaN product clamping to -127;
// and for each half of 16, xsum[h] = dx * (the integer sum of its xq).
//
// Contract: output y[r][j], with G = k / 32 groups, the row's offsets mn[0 .. k/16) and xsum[0 ..
// k/16) zero-padded to T * 8 entries (T = ceil(k / 128)), in 8 lanes:
//   acc[l] = 0;  for g = 0 .. G-1, l = 0 .. 7:
//     P = sum of q[32g + 4l + t] * xq[32g + 4l + t] over t = 0..3    (exact, an integer)
//     c = s[2g + l / 4] * dx[g];   acc[l] = fma(float(P), c, acc[l])
//   off[l] = 0;  for t = 0 .. T-1, l = 0 .. 7:  off[l] = fma(mn[8t + l], xsum[8t + l], off[l])
//   v[l] = acc[l] + off[l]       (Q8_0: v[l] = acc[l], no offsets)
//   y = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
// every operation rounded to fp32. So y[r][j] depends on row r of x and row j of W only: not on m,
// on the other rows, on the number of threads, nor on which path runs (the AVX2 one is
// _mm256_maddubs_epi16 + _mm256_madd_epi16 + _mm256_fmadd_ps; the AVX-512 VNNI one
// _mm512_dpbusd_epi32 + _mm256_fmadd_ps; the portable one std::fma); the bits are the same.
// Non-finite scales in a block (a corrupt file) make the outputs that read it NaN or infinite, and
// nothing else.
//
// Work: threads split the weight rows in tiles of a few rows; a tile is unpacked once into a
// thread-local buffer and every activation row runs against it.
#ifndef CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_
#define CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/gguf_file.h"

namespace convoy {

// Whether QuantMatmul runs weights of `type` natively: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K.
bool QuantMatmulSupports(GgmlType type);

// Activations quantized for QuantMatmul, as the contract above says: m rows of k values, each
// group of 32 as int8 with one fp32 scale, plus the fp32 sum of each half-group of 16.
class QuantizedRows {
 public:
  static constexpr int64_t kGroup = 32;

  // `x`: m rows of k floats, row-major (leading dimension k). REQUIRES: m >= 0, k > 0, k % 32 == 0.
  // Reuses its buffers: no allocation once they are large enough.
  void Quantize(const float* x, int64_t m, int64_t k);

  int64_t m() const { return m_; }
  int64_t k() const { return k_; }
  // Row r: k int8 values; k / 32 scales (dx); half_sum_stride() half-group sums, the k / 16 sums
  // followed by zeros.
  const int8_t* values(int64_t r) const { return values_.data() + r * k_; }
  const float* scales(int64_t r) const { return scales_.data() + r * (k_ / kGroup); }
  const float* half_sums(int64_t r) const { return half_sums_.data() + r * half_sum_stride_; }
  int64_t half_sum_stride() const { return half_sum_stride_; }

 private:
  int64_t m_ = 0;
  int64_t k_ = 0;
  int64_t half_sum_stride_ = 0;  // k / 16 rounded up to a multiple of 8
  std::vector<int8_t> values_;
  std::vector<float> scales_;
  std::vector<float> half_sums_;
};

// Which code computes the product; the results are the same bits either way (but for the payload
// bits of a NaN output). A path the CPU lacks falls back to the next one below it that it has.
enum class QuantPath {
  // The first of the paths below that the CPU has (checked once, at run time). The environment
  // variable CONVOY_QUANT_PATH, read once, caps it: "avx2" or "portable" (for A/B measurements;
  // another value is named on stderr and ignored).
  kBest,
  kAvx512Vnni,  // AVX-512 F, BW, VL and VNNI, with AVX2, FMA and F16C (quant_vnni.h)
  kAvx2,        // AVX2, FMA and F16C
  kPortable,    // plain C++, std::fma
};

// Whether the CPU has what `path` needs (kBest and kPortable: always).
bool QuantPathAvailable(QuantPath path);

// y[r * ldy + j] = sum over i of x[r][i] * W[j][i] for r < x.m(), j < n, as the contract says.
// `w` points at row 0 of W: n rows of k values in `type`'s blocks, row j at w + j * row_bytes
// (row_bytes = k / block_elements * block_bytes); any alignment. Parallel over the OpenMP threads,
// splitting the n outputs, when the product is large enough to pay for waking them.
// REQUIRES: QuantMatmulSupports(type); x.k() == k; k a multiple of the type's block; ldy >= n.
void QuantMatmul(GgmlType type, const std::byte* w, int64_t n, int64_t k, const QuantizedRows& x,
                 float* y, int64_t ldy, QuantPath path = QuantPath::kBest);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_
