// GGUF quantized blocks decoded to floats, one group of 32 consecutive values at a time, on the
// host and on the device: the one decoder the CUDA kernels of quantized weights use
// (quant_gemv.cuh), and the one a plain C++ test holds to the reference dequantizer
// (model/gguf_dequantize.h) bit for bit. Includable from plain C++.
//
// Bit-exactness: each value is computed with the reference's fp32 operations in its order, each
// rounded on its own. On the device the products and sums are __fmul_rn / __fadd_rn, which nvcc
// never fuses; host code that includes this header and needs the reference's bits compiles with
// -ffp-contract=off (as model/gguf_dequantize.cc does), or the compiler may fuse them.
//
// Block layouts (all little-endian; "half" is an IEEE fp16 scale, d the block's scale, q a
// value's quant; value v of a block, group g = v / 32, lane l = v % 32):
//   Q4_0 (32 values, 18 bytes): half d; 16 bytes of nibbles, value l < 16 the low nibble of byte
//        l, value l + 16 its high nibble. x = d * (q - 8).
//   Q4_1 (32, 20): half d, half m; nibbles as Q4_0. x = d * q + m.
//   Q5_0 (32, 22): half d; 4 bytes of fifth bits (bit l for value l); nibbles. x = d * (q - 16).
//   Q5_1 (32, 24): half d, half m; fifth bits; nibbles. x = d * q + m.
//   Q8_0 (32, 34): half d; 32 int8. x = q * d.
//   Q2_K (256, 84): 16 scale bytes (per 16 values: scale low nibble, min high nibble), 64 bytes of
//        2-bit quants, half d, half dmin. With h = g / 4, j = g % 4: q = bits 2j..2j+1 of quant
//        byte 32 h + l; x = (d * scale) * q - (dmin * min).
//   Q3_K (256, 110): 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes of sixteen 6-bit
//        scales, half d. Low 2 bits as Q2_K's; the high bit is bit 4 h + j of byte l; scale s
//        (per 16 values) has its low nibble in byte s % 8 (high nibble for s >= 8) and its top two
//        bits at bit 2 (s / 4) of byte 8 + s % 4. x = (d * (scale - 32)) * (low - (high ? 0 : 4)).
//   Q4_K (256, 144): half d, half dmin; 12 bytes of eight 6-bit scales and mins (one each per
//        group); 128 bytes of nibbles, 32 per pair of groups: group g takes the low (g even) or
//        high nibbles of bytes 32 (g / 2) .. + 31. Group g < 4 keeps its scale in the low 6 bits of
//        byte g and its min in those of byte g + 4; group g >= 4 the low 4 bits of each in the low
//        and high nibble of byte g + 4 and the top 2 in the top bits of bytes g - 4 and g.
//        x = (d * scale) * q - (dmin * min).
//   Q5_K (256, 176): as Q4_K, with 32 bytes of fifth bits between the scales and the nibbles: bit
//        g of byte l is the fifth bit of value l of group g.
//   Q6_K (256, 210): 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales (per 16
//        values), half d. With h = g / 4, j = g % 4: the low nibble is the low (j < 2) or high
//        nibble of byte 64 h + 32 (j % 2) + l, the high pair bits 2j..2j+1 of byte 128 + 32 h + l.
//        x = (d * scale) * (q - 32).
#ifndef CONVOY_KERNELS_GGUF_BLOCKS_CUH_
#define CONVOY_KERNELS_GGUF_BLOCKS_CUH_

#include <cstdint>

#include "common/half.h"          // FP16ToFloatPortable
#include "kernels/half_type.cuh"  // CONVOY_HOST_DEVICE

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace convoy::kernels {

// The GGUF block types the kernels execute, numbered as ggml numbers them.
enum class GgufBlockType : int32_t {
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
};

// Values decoded per call: every block holds a whole number of groups.
inline constexpr int kGgufGroup = 32;

// Whether `ggml_type` (a ggml type number) is one of GgufBlockType's.
CONVOY_HOST_DEVICE constexpr bool IsGgufBlockType(int32_t ggml_type) {
  return ggml_type == 2 || ggml_type == 3 || (ggml_type >= 6 && ggml_type <= 8) ||
         (ggml_type >= 10 && ggml_type <= 14);
}

CONVOY_HOST_DEVICE constexpr int GgufBlockElements(GgufBlockType type) {
  return static_cast<int32_t>(type) >= 10 ? 256 : 32;
}

CONVOY_HOST_DEVICE constexpr int GgufBlockBytes(GgufBlockType type) {
  switch (type) {
    case GgufBlockType::kQ4_0:
      return 18;
    case GgufBlockType::kQ4_1:
      return 20;
    case GgufBlockType::kQ5_0:
      return 22;
    case GgufBlockType::kQ5_1:
      return 24;
    case GgufBlockType::kQ8_0:
      return 34;
    case GgufBlockType::kQ2_K:
      return 84;
    case GgufBlockType::kQ3_K:
      return 110;
    case GgufBlockType::kQ4_K:
      return 144;
    case GgufBlockType::kQ5_K:
      return 176;
    case GgufBlockType::kQ6_K:
      return 210;
  }
  return 0;
}

// Bytes of a row of k values (k a multiple of the type's block).
CONVOY_HOST_DEVICE constexpr int64_t GgufRowBytes(GgufBlockType type, int64_t k) {
  return k / GgufBlockElements(type) * GgufBlockBytes(type);
}

namespace gguf {

// fp32 operations rounded one at a time, never fused.
CONVOY_HOST_DEVICE inline float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CONVOY_HOST_DEVICE inline float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
CONVOY_HOST_DEVICE inline float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// The IEEE fp16 at b[0], b[1], exactly (NaN stays NaN).
CONVOY_HOST_DEVICE inline float Half(const uint8_t* b) {
  const uint16_t bits = static_cast<uint16_t>(b[0] | (b[1] << 8));
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  return FP16ToFloatPortable(bits);
#endif
}

// Nibble l (0..31) of a 32-value block's 16 bytes of nibbles.
CONVOY_HOST_DEVICE inline int Nibble32(const uint8_t* qs, int l) {
  return l < 16 ? (qs[l] & 0x0F) : (qs[l - 16] >> 4);
}

// Fifth bit of value l from 4 bytes of high bits.
CONVOY_HOST_DEVICE inline int FifthBit(const uint8_t* qh, int l) {
  return ((qh[l / 8] >> (l % 8)) & 1) << 4;
}

// Q4_K's and Q5_K's 6-bit scale and min of group g from the 12 packed bytes.
CONVOY_HOST_DEVICE inline void KScaleMin(const uint8_t* s, int g, int& scale, int& min) {
  if (g < 4) {
    scale = s[g] & 63;
    min = s[g + 4] & 63;
  } else {
    scale = (s[g + 4] & 0x0F) | ((s[g - 4] >> 6) << 4);
    min = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
  }
}

// Q3_K's 6-bit scale s (0..15) from its 12 packed bytes.
CONVOY_HOST_DEVICE inline int Q3KScale(const uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0x0F) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

}  // namespace gguf

// Values 32 g .. 32 g + 31 of the block at `block` (REQUIRES: 0 <= g < the type's groups per
// block) to out[0 .. 31], with the reference dequantizer's bits. `block` needs no alignment.
template <GgufBlockType kType>
CONVOY_HOST_DEVICE inline void DecodeGgufGroup(const uint8_t* block, int g, float* out) {
  using gguf::Add;
  using gguf::Half;
  using gguf::Mul;
  using gguf::Sub;
  const uint8_t* b = block;
  if constexpr (kType == GgufBlockType::kQ4_0) {
    const float d = Half(b);
    for (int l = 0; l < 32; ++l) out[l] = Mul(d, static_cast<float>(gguf::Nibble32(b + 2, l) - 8));
  } else if constexpr (kType == GgufBlockType::kQ4_1) {
    const float d = Half(b), m = Half(b + 2);
    for (int l = 0; l < 32; ++l) {
      out[l] = Add(Mul(d, static_cast<float>(gguf::Nibble32(b + 4, l))), m);
    }
  } else if constexpr (kType == GgufBlockType::kQ5_0) {
    const float d = Half(b);
    for (int l = 0; l < 32; ++l) {
      const int q = gguf::Nibble32(b + 6, l) | gguf::FifthBit(b + 2, l);
      out[l] = Mul(d, static_cast<float>(q - 16));
    }
  } else if constexpr (kType == GgufBlockType::kQ5_1) {
    const float d = Half(b), m = Half(b + 2);
    for (int l = 0; l < 32; ++l) {
      const int q = gguf::Nibble32(b + 8, l) | gguf::FifthBit(b + 4, l);
      out[l] = Add(Mul(d, static_cast<float>(q)), m);
    }
  } else if constexpr (kType == GgufBlockType::kQ8_0) {
    const float d = Half(b);
    for (int l = 0; l < 32; ++l) out[l] = Mul(static_cast<float>(static_cast<int8_t>(b[2 + l])), d);
  } else if constexpr (kType == GgufBlockType::kQ2_K) {
    const float d = Half(b + 80), dmin = Half(b + 82);
    const int h = g / 4, j = g % 4;
    for (int half = 0; half < 2; ++half) {
      const uint8_t sc = b[2 * g + half];
      const float dl = Mul(d, static_cast<float>(sc & 0x0F));
      const float ml = Mul(dmin, static_cast<float>(sc >> 4));
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
        out[l] = Sub(Mul(dl, static_cast<float>(q)), ml);
      }
    }
  } else if constexpr (kType == GgufBlockType::kQ3_K) {
    const float d = Half(b + 108);
    const int h = g / 4, j = g % 4;
    for (int half = 0; half < 2; ++half) {
      const float dl = Mul(d, static_cast<float>(gguf::Q3KScale(b + 96, 2 * g + half) - 32));
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int low = (b[32 + 32 * h + l] >> (2 * j)) & 3;
        const bool high = ((b[l] >> (4 * h + j)) & 1) != 0;
        out[l] = Mul(dl, static_cast<float>(low - (high ? 0 : 4)));
      }
    }
  } else if constexpr (kType == GgufBlockType::kQ4_K || kType == GgufBlockType::kQ5_K) {
    constexpr bool kFifth = kType == GgufBlockType::kQ5_K;
    const float d = Half(b), dmin = Half(b + 2);
    int scale, min;
    gguf::KScaleMin(b + 4, g, scale, min);
    const float ds = Mul(d, static_cast<float>(scale));
    const float dm = Mul(dmin, static_cast<float>(min));
    const uint8_t* nibbles = b + (kFifth ? 48 : 16) + 32 * (g / 2);
    const int shift = 4 * (g % 2);
    for (int l = 0; l < 32; ++l) {
      int q = (nibbles[l] >> shift) & 0x0F;
      if constexpr (kFifth) q |= ((b[16 + l] >> g) & 1) << 4;
      out[l] = Sub(Mul(ds, static_cast<float>(q)), dm);
    }
  } else if constexpr (kType == GgufBlockType::kQ6_K) {
    const float d = Half(b + 208);
    const int h = g / 4, j = g % 4;
    const uint8_t* ql = b + 64 * h + 32 * (j % 2);
    const uint8_t* qh = b + 128 + 32 * h;
    for (int half = 0; half < 2; ++half) {
      const float ds = Mul(d, static_cast<float>(static_cast<int8_t>(b[192 + 2 * g + half])));
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int low = j < 2 ? (ql[l] & 0x0F) : (ql[l] >> 4);
        const int high = (qh[l] >> (2 * j)) & 3;
        out[l] = Mul(ds, static_cast<float>((low | (high << 4)) - 32));
      }
    }
  }
}

template <GgufBlockType kType>
struct GgufBlockTag {
  static constexpr GgufBlockType value = kType;
};

// Calls fn(GgufBlockTag<type>()): inside a generic lambda, decltype(tag)::value is `type` as a
// constant. `fn` returns void. Host code only (launchers, tests).
template <typename Fn>
inline void DispatchGgufBlockType(GgufBlockType type, Fn&& fn) {
  switch (type) {
    case GgufBlockType::kQ4_0:
      return fn(GgufBlockTag<GgufBlockType::kQ4_0>());
    case GgufBlockType::kQ4_1:
      return fn(GgufBlockTag<GgufBlockType::kQ4_1>());
    case GgufBlockType::kQ5_0:
      return fn(GgufBlockTag<GgufBlockType::kQ5_0>());
    case GgufBlockType::kQ5_1:
      return fn(GgufBlockTag<GgufBlockType::kQ5_1>());
    case GgufBlockType::kQ8_0:
      return fn(GgufBlockTag<GgufBlockType::kQ8_0>());
    case GgufBlockType::kQ2_K:
      return fn(GgufBlockTag<GgufBlockType::kQ2_K>());
    case GgufBlockType::kQ3_K:
      return fn(GgufBlockTag<GgufBlockType::kQ3_K>());
    case GgufBlockType::kQ4_K:
      return fn(GgufBlockTag<GgufBlockType::kQ4_K>());
    case GgufBlockType::kQ5_K:
      return fn(GgufBlockTag<GgufBlockType::kQ5_K>());
    case GgufBlockType::kQ6_K:
      return fn(GgufBlockTag<GgufBlockType::kQ6_K>());
  }
}

// Values 32 g .. 32 g + 31 of a row of GGUF blocks (g counted from the row's start).
template <GgufBlockType kType>
CONVOY_HOST_DEVICE inline void DecodeGgufRowGroup(const uint8_t* row, int64_t g, float* out) {
  constexpr int kGroupsPerBlock = GgufBlockElements(kType) / kGgufGroup;
  DecodeGgufGroup<kType>(row + g / kGroupsPerBlock * GgufBlockBytes(kType),
                         static_cast<int>(g % kGroupsPerBlock), out);
}

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_GGUF_BLOCKS_CUH_
