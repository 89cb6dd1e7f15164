// y = x W^T with W kept in its GGUF blocks and x quantized to 8 bits: the CPU's product for
// quantized weights. Batch-invariant, as gemm_f32.h. Each type is computed under one of two
// contracts: the interleaved group contract (the 32-value types: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0)
// or the superblock contract (the K types: Q2_K, Q3_K, Q4_K, Q5_K and Q6_K); each names every
// rounding, so every path gives the same bits. The weights are repacked at load, 16 rows
// interleaved (quant_packed.h).
//
// Activations (QuantizedRows, the group form). For a group of 32 values x of a row: amax = max |x|
// (NaN if any x is NaN); a group with amax < 2^-100 is all zeros (scale 0); otherwise dx = amax /
// 127 and xq[i] = clamp(round_half_even(x[i] * (127 / amax)), -127, 127), a NaN product clamping to
// -127.
//
// ---- The interleaved group contract (the 32-value types): one fp32 step per group of 32 (two
// with an m), 16 weight rows at once (quant_packed.h). Weights: per block, integers q with d and m
// its fp16 fields as floats, so that every value is w = d * q (+ m):
//   Q4_0: q = nibble - 8        Q4_1: q = nibble, and m
//   Q5_0: q = 5 bits - 16       Q5_1: q = 5 bits, and m
//   Q8_0: q = the int8
// Activations: the group form, and S[g] = the integer sum of group g's xq. Output y[r][j]:
//   acc = 0;  for g = 0 .. G-1:
//     P = sum of q * xq over group g (exact);   acc = fma(float(P), d[g] * dx[g], acc)
//     (Q4_1, Q5_1:)  acc = fma(m[g], dx[g] * float(S[g]), acc)
//   y = acc
//
// ---- The superblock contract (the K types): the block's sub-block scales applied in integers,
// one fp32 step per 256 values (llama.cpp's K-type products do the same).
//
// Weights. Each block of 256 values is unpacked exactly into 256 integers q, and for each
// sub-block of 16 values j an integer scale sc[j] and an integer factor mn[j], and two fp32
// factors d and dm, so that every value of sub-block j is w = d * sc[j] * q + dm * mn[j] in real
// arithmetic:
//   Q4_K: q 0..15; sc[j], mn[j] = the 6-bit scale and min of the sub-block of 32 holding it
//         (j / 2); d = d, dm = -dmin
//   Q5_K: q 0..31; the rest as Q4_K
//   Q6_K: q 0..63; sc[j] = mn[j] = its int8 scale; d = d, dm = -32 * d (exact)
//   Q2_K: q 0..3; sc[j], mn[j] = the low and high nibbles of sub-block j's scale byte;
//         d = d, dm = -dmin
//   Q3_K: q 0..7 (the 2 low bits, plus 4 where the high bit is set); sc[j] = mn[j] = its 6-bit
//         scale - 32; d = d, dm = -4 * d (exact)
//
// Activations (QuantizedRows, the superblock form): each superblock of 256 values of a row is
// quantized as a group is above, with amax and the scale dxs over its 256 values; S[j] = the
// integer sum of the xq of its sub-block j of 16.
//
// Output y[r][j], with B = k / 256 superblocks:
//   acc = 0;  for b = 0 .. B-1:
//     I = sum over j of sc[j] * (sum of q * xq over sub-block j's 16 values)   (exact in int32)
//     M = sum over j of mn[j] * S[j]                                           (exact in int32)
//     acc = fma(float(I), d * dxs[b], acc);   acc = fma(float(M), dm * dxs[b], acc)
//   y = acc
// every operation rounded to fp32 (float(I) rounds when |I| > 2^24). The kernels compute 16
// weight rows at once, one per lane (quant_packed.h): _mm512_dpbusd_epi32 and
// _mm512_mullo_epi32 for I, _mm512_dpwssd_epi32 for M (AVX2: maddubs, madd and mullo); the
// portable path std::fma.
//
// ---- Every contract: y[r][j] depends on row r of x and row j of W only: not on m, on the other
// rows, on the number of threads, nor on which path runs; the bits are the same. Non-finite
// scales in a block (a corrupt file) make the outputs that read it NaN or infinite, and nothing
// else.
//
// Work: threads split the weight rows in groups of 16; a superblock type's tile is unpacked once
// into a thread-local buffer for several activation rows (one row reads it straight from the
// packed bytes), and every activation row runs against it.
#ifndef CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_
#define CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/gguf_file.h"

namespace convoy {

// Whether QuantMatmul runs weights of `type` natively: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K.
bool QuantMatmulSupports(GgmlType type);

// Activations quantized for QuantMatmul, as the contracts above say: m rows of k values, each
// group of 32 as int8 with one fp32 scale, plus the integer sum of each group (the group form);
// and where k is a multiple of 256 and it is asked for, each superblock of 256 as int8 with one
// fp32 scale, plus the integer sum of each sub-block of 16 (the superblock form).
class QuantizedRows {
 public:
  static constexpr int64_t kGroup = 32;
  static constexpr int64_t kSuperblock = 256;

  // `x`: m rows of k floats, row-major (leading dimension k). With `superblocks` and k % 256 == 0
  // the superblock form is made too. REQUIRES: m >= 0, k > 0, k % 32 == 0. Reuses its buffers:
  // no allocation once they are large enough.
  void Quantize(const float* x, int64_t m, int64_t k, bool superblocks = true);

  int64_t m() const { return m_; }
  int64_t k() const { return k_; }
  // Row r: k int8 values; k / 32 scales (dx).
  const int8_t* values(int64_t r) const { return values_.data() + r * k_; }
  const float* scales(int64_t r) const { return scales_.data() + r * (k_ / kGroup); }
  // Row r: the integer sum of each group's xq (k / 32).
  const int32_t* group_sums(int64_t r) const { return group_sums_.data() + r * (k_ / kGroup); }

  // Whether the superblock form was made; then row r has k int8 values, k / 256 scales (dxs)
  // and k / 16 sub-block sums (S).
  bool has_superblocks() const { return has_superblocks_; }
  const int8_t* superblock_values(int64_t r) const { return sb_values_.data() + r * k_; }
  const float* superblock_scales(int64_t r) const {
    return sb_scales_.data() + r * (k_ / kSuperblock);
  }
  const int16_t* superblock_sums(int64_t r) const { return sb_sums_.data() + r * (k_ / 16); }

 private:
  int64_t m_ = 0;
  int64_t k_ = 0;
  bool has_superblocks_ = false;
  std::vector<int8_t> values_;
  std::vector<float> scales_;
  std::vector<int32_t> group_sums_;
  std::vector<int8_t> sb_values_;
  std::vector<float> sb_scales_;
  std::vector<int16_t> sb_sums_;
};

// Which code computes the product; the results are the same bits either way (but for the payload
// bits of a NaN output). A path the CPU lacks falls back to the next one below it that it has.
enum class QuantPath {
  // The first of the paths below that the CPU has (checked once, at run time). The environment
  // variable CONVOY_QUANT_PATH, read once, caps it: "avx2" or "portable" (for A/B measurements;
  // another value is named on stderr and ignored).
  kBest,
  kAvx512Vnni,  // AVX-512 F, BW, VL and VNNI, with AVX2, FMA and F16C
  kAvx2,        // AVX2, FMA and F16C
  kPortable,    // plain C++, std::fma
};

// Whether the CPU has what `path` needs (kBest and kPortable: always).
bool QuantPathAvailable(QuantPath path);

// Whether `type` is computed under the superblock contract (the K types): its products need the
// activations' superblock form.
bool QuantUsesSuperblocks(GgmlType type);

// A weight matrix held for QuantMatmul: n rows of k values in `type`'s blocks, copied from the
// file's rows (64-byte aligned) and repacked 16 rows at a time (quant_packed.h), in the same bytes
// but for the last group's padding rows.
class QuantWeights {
 public:
  // Row j at rows + j * row_bytes (row_bytes = k / block_elements * block_bytes); any alignment.
  // REQUIRES: QuantMatmulSupports(type); k a positive multiple of the type's block; n >= 1.
  QuantWeights(GgmlType type, const std::byte* rows, int64_t n, int64_t k);

  GgmlType type() const { return type_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t row_bytes() const { return row_bytes_; }
  // Bytes held.
  int64_t bytes() const { return bytes_; }
  // Row j as the file stores it: row_bytes() bytes at `out`.
  void CopyRow(int64_t j, std::byte* out) const;
  // The bytes held: the packed form.
  const std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  GgmlType type_;
  int64_t n_, k_, row_bytes_, bytes_;
  std::unique_ptr<std::byte[], Free> data_;
};

// y[r * ldy + j] = sum over i of x[r][i] * W[j][i] for r < x.m(), j < w.n(), as the type's
// contract says. Parallel over the OpenMP threads, splitting the outputs, when the product is
// large enough to pay for waking them. REQUIRES: x.k() == w.k(); ldy >= w.n(); x has its
// superblock form if QuantUsesSuperblocks(w.type()).
void QuantMatmul(const QuantWeights& w, const QuantizedRows& x, float* y, int64_t ldy,
                 QuantPath path = QuantPath::kBest);

// The same on the file's rows as they are: `w` points at row 0 of W, n rows of k values in
// `type`'s blocks, row j at w + j * row_bytes; any alignment; copied into a QuantWeights first
// (for tests and fuzzers: a server holds its QuantWeights).
// REQUIRES: QuantMatmulSupports(type); x.k() == k; k a multiple of the type's block; ldy >= n.
void QuantMatmul(GgmlType type, const std::byte* w, int64_t n, int64_t k, const QuantizedRows& x,
                 float* y, int64_t ldy, QuantPath path = QuantPath::kBest);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_QUANT_MATMUL_H_
