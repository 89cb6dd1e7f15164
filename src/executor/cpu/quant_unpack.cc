#include "executor/cpu/quant_unpack.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "common/half.h"
#include "executor/cpu/quant_matmul.h"

// The AVX2 unpackers are compiled for AVX2 whatever the build's -march, and only called after the
// caller checked the CPU.
#define CONVOY_TARGET_AVX2 __attribute__((target("avx2")))
#define CONVOY_TARGET_AVX2_FMA_F16C __attribute__((target("avx2,fma,f16c")))

namespace convoy::quant {
namespace {

// Block layouts are described in model/gguf_dequantize.cc. Each format below gives:
//   Scales(block, lanes, offsets): the 8-lane scale vectors of the block's groups and its
//     per-16 offsets, in fp32 as quant_matmul.h's table says (shared by both paths, so the
//     floats are the same);
//   Quants(block, q): the block's quants, one byte each; with AVX2, GroupAvx2(block, j) gives
//     group j's in a register, and ScaleVectors(block) the scales and offsets in registers
//     (KVectors), the same products as Scales.

float Half(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return FP16ToFloat(bits);
}

uint8_t Byte(const std::byte* p, int i) { return static_cast<uint8_t>(p[i]); }

// Group g's lanes: s0 for its first 16 values, s1 for the second 16.
void SetLanes(float* lanes, int g, float s0, float s1) {
  for (int l = 0; l < 4; ++l) {
    lanes[8 * g + l] = s0;
    lanes[8 * g + 4 + l] = s1;
  }
}

// Sixteen per-16 scales: lanes and offsets from scale i and offset i of 16.
void SetSixteen(const float* scale, const float* offset, float* lanes, float* offsets) {
  for (int g = 0; g < 8; ++g) SetLanes(lanes, g, scale[2 * g], scale[2 * g + 1]);
  std::memcpy(offsets, offset, 16 * sizeof(float));
}

CONVOY_TARGET_AVX2 __m256i Load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

CONVOY_TARGET_AVX2 void Store256(uint8_t* q, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), v);
}

// Bits [shift, shift + width) of every byte of v (shift + width <= 8), moved to bit `to`.
template <int kWidth>
CONVOY_TARGET_AVX2 __m256i Field(__m256i v, int shift, int to) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>((1 << kWidth) - 1));
  const __m256i field = _mm256_and_si256(_mm256_srli_epi16(v, shift), mask);
  return _mm256_slli_epi16(field, to);  // the field stays inside its byte
}

// Eight bytes at p (unsigned), or the 32-bit words lo and hi, as 8 floats.
CONVOY_TARGET_AVX2 __m256 BytesToFloats(uint64_t bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes))));
}

CONVOY_TARGET_AVX2 uint64_t Words(uint32_t lo, uint32_t hi) {
  return static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
}

CONVOY_TARGET_AVX2 __m256 Negate(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }

// The lanes and offsets of a 256-value block from its sixteen per-16 scales and offsets (0-7 in
// s0 and o0, 8-15 in s1 and o1): group g's lanes are scales 2g (x4) and 2g + 1 (x4).
CONVOY_TARGET_AVX2 void SetSixteenAvx2(__m256 s0, __m256 s1, __m256 o0, __m256 o1, float* lanes,
                                       float* offsets) {
  for (int p = 0; p < 4; ++p) {
    const __m256i pick =
        _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
    _mm256_storeu_ps(lanes + 8 * p, _mm256_permutevar8x32_ps(s0, pick));
    _mm256_storeu_ps(lanes + 32 + 8 * p, _mm256_permutevar8x32_ps(s1, pick));
  }
  _mm256_storeu_ps(offsets, o0);
  _mm256_storeu_ps(offsets + 8, o1);
}

// ---- The 256-value types: eight groups per block. Value 32 * g + l of the block is value l of
// group g.

// A 256-value block's scales and offsets in registers, as its ScaleVectors gives them: s[0], s[1]
// hold the sixteen half-groups' s (0-7, then 8-15) and mn[0], mn[1] their mn.
struct KVectors {
  __m256 s[2];
  __m256 mn[2];
};

// mn = factor * s for the sixteen half-groups (Q3_K's -4): one product each.
CONVOY_TARGET_AVX2 KVectors Proportional(KVectors v, float factor) {
  for (int i = 0; i < 2; ++i) v.mn[i] = _mm256_mul_ps(_mm256_set1_ps(factor), v.s[i]);
  return v;
}

// Q2_K and Q3_K: value 128 * h + 32 * j + l (group 4h + j) takes bits 2j, 2j + 1 of byte
// 32 * h + l of the 64 bytes at qs.
void TwoBits(const std::byte* qs, uint8_t* q) {
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * j + l] = (Byte(qs, 32 * h + l) >> (2 * j)) & 3;
    }
  }
}

// TwoBits' group j = 4h + i.
CONVOY_TARGET_AVX2 __m256i TwoBitsAvx2(const std::byte* qs, int j) {
  return Field<2>(Load256(qs + 32 * (j / 4)), 2 * (j % 4), 0);
}

struct Q2_K {
  static constexpr int kElements = 256, kBytes = 84;
  static void Scales(const std::byte* b, float* lanes, float* offsets) {
    const float d = Half(b + 80), dmin = Half(b + 82);
    float scale[16], offset[16];
    for (int i = 0; i < 16; ++i) {
      scale[i] = d * static_cast<float>(Byte(b, i) & 0x0F);
      offset[i] = -(dmin * static_cast<float>(Byte(b, i) >> 4));
    }
    SetSixteen(scale, offset, lanes, offsets);
  }
  static CONVOY_TARGET_AVX2 KVectors ScaleVectors(const std::byte* b) {
    uint64_t w[2];
    std::memcpy(w, b, 16);
    const uint64_t low4 = 0x0F0F0F0F0F0F0F0Full;
    const __m256 d = _mm256_set1_ps(Half(b + 80)), dmin = _mm256_set1_ps(Half(b + 82));
    KVectors v;
    for (int i = 0; i < 2; ++i) {
      v.s[i] = _mm256_mul_ps(d, BytesToFloats(w[i] & low4));
      v.mn[i] = Negate(_mm256_mul_ps(dmin, BytesToFloats((w[i] >> 4) & low4)));
    }
    return v;
  }
  static void Quants(const std::byte* b, uint8_t* q) { TwoBits(b + 16, q); }
  static CONVOY_TARGET_AVX2 __m256i GroupAvx2(const std::byte* b, int j) {
    return TwoBitsAvx2(b + 16, j);
  }
};

// Q3_K: the third bit of group g's value l is bit g of byte l of hmask; sixteen 6-bit scales
// (biased by 32) in 12 bytes: the low nibble of scale i in byte i % 8 (low nibble for i < 8), its
// top 2 bits at bit 2 * (i / 4) of byte 8 + i % 4.
struct Q3_K {
  static constexpr int kElements = 256, kBytes = 110;
  static void Scales(const std::byte* b, float* lanes, float* offsets) {
    const std::byte* packed = b + 96;
    const float d = Half(b + 108);
    float scale[16], offset[16];
    for (int i = 0; i < 16; ++i) {
      const int nibble = (Byte(packed, i % 8) >> (4 * (i / 8))) & 0x0F;
      const int top = (Byte(packed, 8 + i % 4) >> (2 * (i / 4))) & 3;
      scale[i] = d * static_cast<float>((nibble | (top << 4)) - 32);
      offset[i] = -4.0f * scale[i];
    }
    SetSixteen(scale, offset, lanes, offsets);
  }
  static CONVOY_TARGET_AVX2 KVectors ScaleVectors(const std::byte* b) {
    uint32_t w[3];
    std::memcpy(w, b + 96, 12);
    const uint32_t low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    // Scales 4a .. 4a + 3 take their top bits from bits 2a, 2a + 1 of bytes 8..11.
    const uint64_t first =
        Words((w[0] & low4) | ((w[2] & low2) << 4), (w[1] & low4) | (((w[2] >> 2) & low2) << 4));
    const uint64_t second = Words(((w[0] >> 4) & low4) | (((w[2] >> 4) & low2) << 4),
                                  ((w[1] >> 4) & low4) | (((w[2] >> 6) & low2) << 4));
    const __m256 d = _mm256_set1_ps(Half(b + 108)), bias = _mm256_set1_ps(32.0f);
    // (scale - 32) is exact in floats as in integers.
    KVectors v;
    v.s[0] = _mm256_mul_ps(d, _mm256_sub_ps(BytesToFloats(first), bias));
    v.s[1] = _mm256_mul_ps(d, _mm256_sub_ps(BytesToFloats(second), bias));
    return Proportional(v, -4.0f);
  }
  static void Quants(const std::byte* b, uint8_t* q) {
    TwoBits(b + 32, q);
    for (int g = 0; g < 8; ++g) {
      for (int l = 0; l < 32; ++l) q[32 * g + l] |= ((Byte(b, l) >> g) & 1) << 2;
    }
  }
  static CONVOY_TARGET_AVX2 __m256i GroupAvx2(const std::byte* b, int j) {
    return _mm256_or_si256(TwoBitsAvx2(b + 32, j), Field<1>(Load256(b), j, 2));
  }
};

void ZeroPadding(int64_t k, const UnpackedRow& out) {
  for (int64_t i = k / 16; i < OffsetStride(k); ++i) out.offsets[i] = 0.0f;
}

template <typename F>
void UnpackPortable(const std::byte* row, int64_t k, const UnpackedRow& destination) {
  const UnpackedRow out = destination;  // a local copy: the byte stores cannot alias it
  for (int64_t i = 0; i < k / F::kElements; ++i) {
    const std::byte* block = row + i * F::kBytes;
    F::Scales(block, out.scales + i * (F::kElements / 4), out.offsets + i * (F::kElements / 16));
    F::Quants(block, out.q + i * F::kElements);
  }
  ZeroPadding(k, out);
}

// The scales from ScaleVectors' registers.
template <typename F>
CONVOY_TARGET_AVX2 void ScalesAvx2(const std::byte* block, float* lanes, float* offsets) {
  const KVectors v = F::ScaleVectors(block);
  SetSixteenAvx2(v.s[0], v.s[1], v.mn[0], v.mn[1], lanes, offsets);
}

template <typename F>
CONVOY_TARGET_AVX2 void UnpackAvx2(const std::byte* row, int64_t k,
                                   const UnpackedRow& destination) {
  const UnpackedRow out = destination;
  for (int64_t i = 0; i < k / F::kElements; ++i) {
    const std::byte* block = row + i * F::kBytes;
    ScalesAvx2<F>(block, out.scales + i * (F::kElements / 4),
                  out.offsets + i * (F::kElements / 16));
    // Every group made before any is stored: the stores (bytes) could alias the block, and would
    // make the groups sharing a load read it again.
    __m256i q[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) q[j] = F::GroupAvx2(block, j);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) Store256(out.q + i * F::kElements + 32 * j, q[j]);
  }
  ZeroPadding(k, out);
}

// ---- One activation row against a 256-value type, straight from the blocks: one block (8 groups)
// a step. Per block the scales come as vectors (F::ScaleVectors, the unpacker's products), the 8
// groups' products c = s * dx are made at once (the contract's fp32 products, lane for lane) and
// each group's 8 lanes taken from them; the offsets' two fused multiply-adds of the block (t = 2i
// and 2i + 1: k is a multiple of 256, so there is no padding) run into their own 8 lanes, added to
// the accumulators at the end, as the contract says.

// Group j's 8 lanes of c from the block's products, stored in `c`: c of half-group h at c[h].
CONVOY_TARGET_AVX2 __m256 GroupScale(const float* c, int j) {
  // [c[2j], c[2j + 1]] four times, then lanes 0-3 take the first and 4-7 the second.
  const __m256 pairs =
      _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(c + 2 * j)));
  return _mm256_permutevar_ps(pairs, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

template <typename F>
CONVOY_TARGET_AVX2_FMA_F16C void DirectKAvx2(const std::byte* row, int64_t k,
                                             const QuantizedRows& x, float* y, int64_t ldy) {
  const int64_t blocks = k / 256;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    const float* xsum = x.half_sums(r);
    __m256 acc = _mm256_setzero_ps(), off = _mm256_setzero_ps();
    for (int64_t i = 0; i < blocks; ++i) {
      const std::byte* block = row + i * F::kBytes;
      const KVectors v = F::ScaleVectors(block);
      const __m256 dxv = _mm256_loadu_ps(dx + 8 * i);
      alignas(32) float c[16];
      // Half-groups 2g and 2g + 1 take dx[g].
      const __m256 dx_low =
          _mm256_permutevar8x32_ps(dxv, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
      const __m256 dx_high =
          _mm256_permutevar8x32_ps(dxv, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
      _mm256_store_ps(c, _mm256_mul_ps(v.s[0], dx_low));
      _mm256_store_ps(c + 8, _mm256_mul_ps(v.s[1], dx_high));
      const __m256 offsets_low = v.mn[0], offsets_high = v.mn[1];
      off = _mm256_fmadd_ps(offsets_low, _mm256_loadu_ps(xsum + 16 * i), off);
      off = _mm256_fmadd_ps(offsets_high, _mm256_loadu_ps(xsum + 16 * i + 8), off);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i xv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 256 * i + 32 * j));
        const __m256i pairs = _mm256_maddubs_epi16(F::GroupAvx2(block, j), xv);
        const __m256 sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        acc = _mm256_fmadd_ps(sums, GroupScale(c, j), acc);
      }
    }
    y[r * ldy] = HorizontalSumAvx2(_mm256_add_ps(acc, off));
  }
}

template <typename F>
void DirectKAvx2Any(const std::byte* w, int64_t row_bytes, int count, int64_t k,
                    const QuantizedRows& x, float* y, int64_t ldy) {
  for (int i = 0; i < count; ++i) DirectKAvx2<F>(w + i * row_bytes, k, x, y + i, ldy);
}

template <typename F>
constexpr Format MakeFormat() {
  return {F::kElements, F::kBytes, UnpackPortable<F>, UnpackAvx2<F>, DirectKAvx2Any<F>};
}

constexpr Format kQ2_K = MakeFormat<Q2_K>();
constexpr Format kQ3_K = MakeFormat<Q3_K>();

}  // namespace

const Format* FindFormat(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return &kQ2_K;
    case GgmlType::kQ3_K:
      return &kQ3_K;
    default:
      return nullptr;
  }
}

}  // namespace convoy::quant
