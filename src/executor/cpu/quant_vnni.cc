#include "executor/cpu/quant_vnni.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/x86_intrinsics.h"
#include "executor/cpu/quant_matmul.h"

// Compiled for these whatever the build's -march; called only after Avx512VnniAvailable().
#define CONVOY_TARGET_VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace convoy::quant {
namespace {

// ---- Integer sums: lane l of a group's 8 holds the sum of q * xq over its values 4l .. 4l + 3.
// A 512-bit vector holds the same group of two weight rows: the first row's in lanes 0-7.

CONVOY_TARGET_VNNI __m512i Dot(__m512i q, __m512i x) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, x);
}

// The group's 32 activations, for both rows.
CONVOY_TARGET_VNNI __m512i Activations(const int8_t* xq) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
}

CONVOY_TARGET_VNNI __m512i Join(const uint8_t* a, const uint8_t* b) {
  const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

CONVOY_TARGET_VNNI __m512 Join(const float* a, const float* b) {
  const __m256d low = _mm256_castps_pd(_mm256_loadu_ps(a));
  const __m256d high = _mm256_castps_pd(_mm256_loadu_ps(b));
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(low), high, 1));
}

// The 8 floats at p in both halves.
CONVOY_TARGET_VNNI __m512 Twice(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}

CONVOY_TARGET_VNNI __m256 Half(__m512 v, int i) {
  if (i == 0) return _mm512_castps512_ps256(v);
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Outputs [r0, r0 + kRows) x [0, count) from the accumulators acc[i][p] of activation row r0 + i
// and weight rows 2p, 2p + 1 (a vector each): the contract's offset terms added first (weight row
// w's offsets at offsets[w], OffsetStride(k) floats), then each output's last sum. The offset terms
// of all the pairs run side by side: each is a chain of fused multiply-adds, and one chain alone
// would wait on each one's latency. Outputs at and past `count` are dropped (their weight rows
// repeat the last real one).
template <int kRows, int kPairs>
CONVOY_TARGET_VNNI __attribute__((always_inline)) inline void Store(
    __m512 (&acc)[kRows][kPairs], int count, int64_t k, const float* const* offsets,
    const QuantizedRows& x, int64_t r0, float* y, int64_t ldy) {
  __m512 off[kRows][kPairs];
  for (int i = 0; i < kRows; ++i) {
    for (int p = 0; p < kPairs; ++p) off[i][p] = _mm512_setzero_ps();
  }
  const int64_t stride = OffsetStride(k);
  for (int64_t t = 0; t < stride; t += 8) {
    __m512 mn[kPairs];
    for (int p = 0; p < kPairs; ++p) mn[p] = Join(offsets[2 * p] + t, offsets[2 * p + 1] + t);
    for (int i = 0; i < kRows; ++i) {
      const __m512 xsum = Twice(x.half_sums(r0 + i) + t);
      for (int p = 0; p < kPairs; ++p) off[i][p] = _mm512_fmadd_ps(mn[p], xsum, off[i][p]);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int p = 0; p < kPairs; ++p) acc[i][p] = _mm512_add_ps(acc[i][p], off[i][p]);
  }
  for (int i = 0; i < kRows; ++i) {
    for (int o = 0; o < count; ++o) {
      y[(r0 + i) * ldy + o] = HorizontalSumAvx2(Half(acc[i][o / 2], o % 2));
    }
  }
}

// ---- The tile kernel: quant_matmul.cc's TileAvx2 on the same unpacked rows, two rows a vector,
// kRows activation rows at a time: a group's weights and scales are loaded once for all of them,
// and each (activation row, weight row) pair keeps its own accumulator, so every output sees the
// contract's operations in its order whatever kRows is. rows: 2 * kPairs (the last real one
// repeated to fill); the activation rows r0 .. r0 + kRows - 1.
template <int kPairs, int kRows>
CONVOY_TARGET_VNNI void TileVnniRows(const UnpackedRow* rows, int count, int64_t k,
                                     const QuantizedRows& x, int64_t r0, float* y, int64_t ldy) {
  const int64_t groups = k / 32;
  const int8_t* xq[kRows];
  const float* dx[kRows];
  __m512 acc[kRows][kPairs];
  for (int i = 0; i < kRows; ++i) {
    xq[i] = x.values(r0 + i);
    dx[i] = x.scales(r0 + i);
    for (int p = 0; p < kPairs; ++p) acc[i][p] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512i q[kPairs];
    __m512 s[kPairs];
    for (int p = 0; p < kPairs; ++p) {
      const UnpackedRow& a = rows[2 * p];
      const UnpackedRow& b = rows[2 * p + 1];
      q[p] = Join(a.q + 32 * g, b.q + 32 * g);
      s[p] = Join(a.scales + 8 * g, b.scales + 8 * g);
    }
    for (int i = 0; i < kRows; ++i) {
      const __m512i xv = Activations(xq[i] + 32 * g);
      const __m512 dxv = _mm512_set1_ps(dx[i][g]);
      for (int p = 0; p < kPairs; ++p) {
        const __m512 sums = _mm512_cvtepi32_ps(Dot(q[p], xv));
        acc[i][p] = _mm512_fmadd_ps(sums, _mm512_mul_ps(s[p], dxv), acc[i][p]);
      }
    }
  }
  const float* offsets[2 * kPairs];
  for (int w = 0; w < 2 * kPairs; ++w) offsets[w] = rows[w].offsets;
  Store(acc, count, k, offsets, x, r0, y, ldy);
}

// Every activation row: four at a time, then the rest one at a time.
template <int kPairs>
CONVOY_TARGET_VNNI void TileVnni(const UnpackedRow* rows, int count, int64_t k,
                                 const QuantizedRows& x, float* y, int64_t ldy) {
  constexpr int kRowsAtOnce = 4;
  int64_t r = 0;
  for (; r + kRowsAtOnce <= x.m(); r += kRowsAtOnce) {
    TileVnniRows<kPairs, kRowsAtOnce>(rows, count, k, x, r, y, ldy);
  }
  for (; r < x.m(); ++r) TileVnniRows<kPairs, 1>(rows, count, k, x, r, y, ldy);
}

void TileVnniAny(const UnpackedRow* rows, int count, int64_t k, const QuantizedRows& x, float* y,
                 int64_t ldy) {
  UnpackedRow filled[4];
  for (int i = 0; i < 4; ++i) filled[i] = rows[i < count ? i : count - 1];
  if (count > 2) return TileVnni<2>(filled, count, k, x, y, ldy);
  TileVnni<1>(filled, count, k, x, y, ldy);
}

// How far ahead of the tile it reads the one-row kernel asks for the blocks (as many bytes a step
// as it reads). Without it the kernel waited on its loads most of the time (decode of the default
// model, then Q4_1 on these kernels, on a Xeon whose L3 holds the whole model: 11.8-12.1 ms a
// token without, 7.5-8.5 with; 4 and 8 KiB and 2 to 4 tiles ahead all within that range, in a
// noisy shared machine).
constexpr int64_t kPrefetchBytes = 8192;

// ---- The one-row kernel for the K types (Q2_K and Q3_K): as DirectVnni, two weight rows a
// vector and group after group, one block of 256 values (8 groups) of both rows at a time. Each
// type gives the quants of group j of blocks a and b as 64 bytes (a's 32, then b's), and the
// block pair's scales: the products c = s * dx of its groups (the contract's fp32 products, 8 at
// a time) and the offsets of its 16 half-groups, [a's 8, b's 8] for the first 8 half-groups of
// the block (the contract's t = 2i) and for the last 8 (t = 2i + 1). k is a multiple of 256:
// every t is a real one, so the offsets' fused multiply-adds run block after block, in the
// contract's order.

struct KPairScales {
  __m512 c[2];  // the type's layout; GroupScale spreads group j's over its 16 lanes
  __m512 offsets_low, offsets_high;
};

CONVOY_TARGET_VNNI __m512 Negate(__m512 v) {  // the sign flipped, as quant_unpack.cc's Negate
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

// q plus `value` where bit j of the 32 bytes at a (a's values) and at b (b's) is set: a bit of
// every value kept apart from its other bits (Q3_K's third). The bit `value` is
// clear in q.
CONVOY_TARGET_VNNI __m512i AddBitPlane(__m512i q, const std::byte* a, const std::byte* b, int j,
                                       int value) {
  const __m512i bits =
      Join(reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const uint8_t*>(b));
  const __mmask64 set = _mm512_test_epi8_mask(bits, _mm512_set1_epi8(static_cast<char>(1 << j)));
  return _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(static_cast<char>(value)));
}

// The fp16 field at byte `at` of blocks a and b as 16 floats each (exact, as Half): [0] a's, [1]
// b's.
struct FieldPair {
  __m512 v[2];
};

CONVOY_TARGET_VNNI FieldPair Fields(const std::byte* a, const std::byte* b, int at) {
  uint16_t bits_a, bits_b;
  std::memcpy(&bits_a, a + at, 2);
  std::memcpy(&bits_b, b + at, 2);
  const __m128 both = _mm_cvtph_ps(
      _mm_cvtsi32_si128(static_cast<int>(bits_a | (static_cast<uint32_t>(bits_b) << 16))));
  return {{_mm512_broadcastss_ps(both), _mm512_broadcastss_ps(_mm_movehdup_ps(both))}};
}

// Q2_K and Q3_K: a scale s and an offset mn per half-group of 16 values. From each row's 16
// (s[0] and mn[0] a's, [1] b's): c[0] holds a's 16 products (half-group h's with dx[h / 2]), c[1]
// b's.
struct KSixteen {
  static CONVOY_TARGET_VNNI KPairScales Pair(const __m512* s, const __m512* mn, const float* dx) {
    const __m512 dx_halves =
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                              _mm512_castps256_ps512(_mm256_loadu_ps(dx)));
    KPairScales out;
    for (int i = 0; i < 2; ++i) out.c[i] = _mm512_mul_ps(s[i], dx_halves);
    out.offsets_low = _mm512_shuffle_f32x4(mn[0], mn[1], 0x44);   // [a's 0-7, b's 0-7]
    out.offsets_high = _mm512_shuffle_f32x4(mn[0], mn[1], 0xEE);  // [a's 8-15, b's 8-15]
    return out;
  }
  static CONVOY_TARGET_VNNI __m512 GroupScale(const KPairScales& scales, int j) {
    const __m512i pick =
        _mm512_add_epi32(_mm512_set1_epi32(2 * j),
                         _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 16, 16, 16, 16, 17, 17, 17, 17));
    return _mm512_permutex2var_ps(scales.c[0], pick, scales.c[1]);
  }
};

// Q2_K's and Q3_K's low two bits of group j = 4h + i: bits 2i, 2i + 1 of the 32 bytes at qs + 32h
// (qs_a a's, qs_b b's).
CONVOY_TARGET_VNNI __m512i TwoBits(const std::byte* qs_a, const std::byte* qs_b, int j) {
  const int h = j / 4, i = j % 4;
  const __m512i bytes = Join(reinterpret_cast<const uint8_t*>(qs_a + 32 * h),
                             reinterpret_cast<const uint8_t*>(qs_b + 32 * h));
  return _mm512_and_si512(_mm512_srli_epi16(bytes, 2 * i), _mm512_set1_epi8(0x03));
}

// Q2_K: 16 bytes of scales at the start (half-group t's sc in the low nibble of byte t, its mi in
// the high one), the quants at byte 16, d at 80 and dmin at 82; s = d * sc, mn = -(dmin * mi), as
// quant_unpack.cc's ScaleVectors.
struct Q2_K : KSixteen {
  static constexpr int kBytes = 84;
  static CONVOY_TARGET_VNNI KPairScales Scales(const std::byte* a, const std::byte* b,
                                               const float* dx) {
    const FieldPair d = Fields(a, b, 80), dmin = Fields(a, b, 82);
    __m512 s[2], mn[2];
    for (int i = 0; i < 2; ++i) {
      const __m512i bytes =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i == 0 ? a : b)));
      const __m512i sc = _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F));
      s[i] = _mm512_mul_ps(d.v[i], _mm512_cvtepi32_ps(sc));
      mn[i] = Negate(_mm512_mul_ps(dmin.v[i], _mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4))));
    }
    return Pair(s, mn, dx);
  }
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b, int j) {
    return TwoBits(a + 16, b + 16, j);
  }
};

// Q3_K: s = d * F::Sc(block) (the block's 16 integer factors as floats) with d the fp16
// field at byte F::kDAt, and mn = F::kMnPerS * s. Inlined: GCC kept it a call, which returned the
// scales through memory (Q6_K's former one-row kernel on cached weights: 18-21 GB/s against 21-25
// GB/s inlined, in a noisy shared machine).
template <typename F>
CONVOY_TARGET_VNNI __attribute__((always_inline)) inline KPairScales ProportionalScales(
    const std::byte* a, const std::byte* b, const float* dx) {
  const FieldPair d = Fields(a, b, F::kDAt);
  __m512 s[2], mn[2];
  for (int i = 0; i < 2; ++i) {
    s[i] = _mm512_mul_ps(d.v[i], F::Sc(i == 0 ? a : b));
    mn[i] = _mm512_mul_ps(_mm512_set1_ps(F::kMnPerS), s[i]);
  }
  return KSixteen::Pair(s, mn, dx);
}

// Q3_K: the third bits at the start (bit j of byte l: value l of group j's), the low two at byte
// 32, the 6-bit scales at 96 and d at 108; s = d * (sc - 32), mn = -4 * s, as
// quant_unpack.cc's ScaleVectors.
struct Q3_K : KSixteen {
  static constexpr int kBytes = 110, kDAt = 108;
  static constexpr float kMnPerS = -4.0f;
  // Scale i keeps its low nibble in byte i % 8 (the low nibble for i < 8) and its top 2 bits at
  // bit 2 * (i / 4) of byte 8 + i % 4 of the 12 bytes at byte 96. (sc - 32) is exact in floats
  // as in integers.
  static CONVOY_TARGET_VNNI __m512 Sc(const std::byte* block) {
    uint64_t low;
    uint32_t high;
    std::memcpy(&low, block + 96, 8);
    std::memcpy(&high, block + 104, 4);
    const __m128i bytes =
        _mm_insert_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(low)), static_cast<int>(high), 2);
    const __m512i nibbles = _mm512_cvtepu8_epi32(
        _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)));
    const __m512i tops = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(
        bytes, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11)));
    const __m512i low4 = _mm512_and_si512(
        _mm512_srlv_epi32(nibbles,
                          _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4)),
        _mm512_set1_epi32(0x0F));
    const __m512i top2 = _mm512_and_si512(
        _mm512_srlv_epi32(tops, _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6)),
        _mm512_set1_epi32(0x03));
    const __m512i sc = _mm512_or_si512(low4, _mm512_slli_epi32(top2, 4));
    return _mm512_sub_ps(_mm512_cvtepi32_ps(sc), _mm512_set1_ps(32.0f));
  }
  static CONVOY_TARGET_VNNI KPairScales Scales(const std::byte* a, const std::byte* b,
                                               const float* dx) {
    return ProportionalScales<Q3_K>(a, b, dx);
  }
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b, int j) {
    return AddBitPlane(TwoBits(a + 32, b + 32, j), a, b, j, 0x04);
  }
};

// rows: 2 * kPairs weight rows (the last real one repeated to fill).
template <typename F, int kPairs>
CONVOY_TARGET_VNNI void DirectKVnni(const std::byte* const* rows, int count, int64_t k,
                                    const QuantizedRows& x, float* y, int64_t ldy,
                                    const std::byte* ahead) {
  const int64_t blocks = k / 256;
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    const float* xsum = x.half_sums(r);
    __m512 acc[kPairs], off[kPairs];
    for (int p = 0; p < kPairs; ++p) acc[p] = off[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < blocks; ++i) {
      const char* next = reinterpret_cast<const char*>(ahead + i * (2 * kPairs * F::kBytes));
      for (int o = 0; o < 2 * kPairs * F::kBytes; o += 64) _mm_prefetch(next + o, _MM_HINT_T0);
      const std::byte* a[kPairs];
      const std::byte* b[kPairs];
      KPairScales scales[kPairs];
      for (int p = 0; p < kPairs; ++p) {
        a[p] = rows[2 * p] + i * F::kBytes;
        b[p] = rows[2 * p + 1] + i * F::kBytes;
        scales[p] = F::Scales(a[p], b[p], dx + 8 * i);
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i xv = Activations(xq + 256 * i + 32 * j);
        for (int p = 0; p < kPairs; ++p) {
          const __m512 sums = _mm512_cvtepi32_ps(Dot(F::Quants(a[p], b[p], j), xv));
          acc[p] = _mm512_fmadd_ps(sums, F::GroupScale(scales[p], j), acc[p]);
        }
      }
      const __m512 xsum_low = Twice(xsum + 16 * i), xsum_high = Twice(xsum + 16 * i + 8);
      for (int p = 0; p < kPairs; ++p) {
        off[p] = _mm512_fmadd_ps(scales[p].offsets_low, xsum_low, off[p]);
        off[p] = _mm512_fmadd_ps(scales[p].offsets_high, xsum_high, off[p]);
      }
    }
    for (int i = 0; i < count; ++i) {
      y[r * ldy + i] = HorizontalSumAvx2(Half(_mm512_add_ps(acc[i / 2], off[i / 2]), i % 2));
    }
  }
}

template <typename F>
void DirectKVnniAny(const std::byte* w, int64_t row_bytes, int count, int64_t k,
                    const QuantizedRows& x, float* y, int64_t ldy) {
  const std::byte* rows[4];
  for (int i = 0; i < 4; ++i) rows[i] = w + (i < count ? i : count - 1) * row_bytes;
  if (count > 2) return DirectKVnni<F, 2>(rows, count, k, x, y, ldy, w + kPrefetchBytes);
  DirectKVnni<F, 1>(rows, count, k, x, y, ldy, w + kPrefetchBytes);
}

}  // namespace

bool Avx512VnniAvailable() {
  // __builtin_cpu_supports reports the AVX-512 features only where the OS saves their state.
  static const bool available = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }();
  return available;
}

DirectFn FindDirectVnni(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return DirectKVnniAny<Q2_K>;
    case GgmlType::kQ3_K:
      return DirectKVnniAny<Q3_K>;
    default:
      return nullptr;
  }
}

TileFn FindTileVnni() { return TileVnniAny; }

}  // namespace convoy::quant
