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

// kSigned: q is int8; vpdpbusd wants its first operand unsigned, so |q| (128 fits) multiplies x
// with q's sign (x is never -128). Where q is 0 the product is 0 whatever x is.
template <bool kSigned>
CONVOY_TARGET_VNNI __m512i Dot(__m512i q, __m512i x) {
  const __m512i zero = _mm512_setzero_si512();
  if (kSigned) {
    const __m512i signed_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(q), zero, x);
    return _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(q), signed_x);
  }
  return _mm512_dpbusd_epi32(zero, q, x);
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

CONVOY_TARGET_VNNI __m256 Half(__m512 v, int i) {
  if (i == 0) return _mm512_castps512_ps256(v);
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Output i of every activation row from the accumulators of kPairs row pairs: the contract's
// offsets added (row i's at offsets[i]), then its last sum. Outputs at and past `count` are
// dropped (their rows repeat the last real one).
template <bool kOffsets, int kPairs>
CONVOY_TARGET_VNNI __attribute__((always_inline)) inline void Finish(const __m512* acc, int count,
                                                                     const float* const* offsets,
                                                                     const float* xsum,
                                                                     int64_t stride, float* y) {
  for (int i = 0; i < count; ++i) {
    __m256 v = Half(acc[i / 2], i % 2);
    if (kOffsets) v = _mm256_add_ps(v, OffsetSumAvx2(offsets[i], xsum, stride));
    y[i] = HorizontalSumAvx2(v);
  }
}

// ---- The tile kernel: quant_matmul.cc's TileAvx2 on the same unpacked rows, two rows a vector.
// rows: 2 * kPairs (the last real one repeated to fill).
template <bool kSigned, bool kOffsets, int kPairs>
CONVOY_TARGET_VNNI void TileVnni(const UnpackedRow* rows, int count, int64_t k,
                                 const QuantizedRows& x, float* y, int64_t ldy) {
  const int64_t groups = k / 32;
  const float* offsets[2 * kPairs];
  for (int i = 0; i < 2 * kPairs; ++i) offsets[i] = rows[i].offsets;
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    __m512 acc[kPairs];
    for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m512i xv = Activations(xq + 32 * g);
      const __m512 dxv = _mm512_set1_ps(dx[g]);
      for (int p = 0; p < kPairs; ++p) {
        const UnpackedRow& a = rows[2 * p];
        const UnpackedRow& b = rows[2 * p + 1];
        const __m512 sums = _mm512_cvtepi32_ps(Dot<kSigned>(Join(a.q + 32 * g, b.q + 32 * g), xv));
        const __m512 c = _mm512_mul_ps(Join(a.scales + 8 * g, b.scales + 8 * g), dxv);
        acc[p] = _mm512_fmadd_ps(sums, c, acc[p]);
      }
    }
    Finish<kOffsets, kPairs>(acc, count, offsets, x.half_sums(r), OffsetStride(k), y + r * ldy);
  }
}

template <bool kSigned, bool kOffsets>
void TileVnniAny(const UnpackedRow* rows, int count, int64_t k, const QuantizedRows& x, float* y,
                 int64_t ldy) {
  UnpackedRow filled[4];
  for (int i = 0; i < 4; ++i) filled[i] = rows[i < count ? i : count - 1];
  if (count > 2) return TileVnni<kSigned, kOffsets, 2>(filled, count, k, x, y, ldy);
  TileVnni<kSigned, kOffsets, 1>(filled, count, k, x, y, ldy);
}

// ---- The one-row kernel for the 32-value types: blocks straight into registers, the same block
// of two weight rows at a time (a and b). Each type gives its quants as 64 bytes (a's 32 values in
// value order, then b's) and, from the two fp16 fields at the start of a's block and of b's as
// floats ([d, m or quant bits] of a, then of b), their offsets mn: [a's, a's, b's, b's].

// 16 bytes of nibbles at a and at b: [a's low nibbles, a's high, b's low, b's high].
CONVOY_TARGET_VNNI __m512i NibblePair(const std::byte* a, const std::byte* b) {
  const __m128i bytes_a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i bytes_b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(bytes_a), bytes_b, 1);
  const __m512i twice = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3),
                                                 _mm512_castsi256_si512(both));
  // The 16-bit words of the second and fourth 128 bits: their high nibbles.
  const __m512i shifted = _mm512_mask_srli_epi16(twice, 0xFF00FF00u, twice, 4);
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
}

// Q5's fifth bits: bit j of the little-endian 32-bit word at qh is value j's.
CONVOY_TARGET_VNNI __m512i AddFifthBits(__m512i q, const std::byte* qh_a, const std::byte* qh_b) {
  uint32_t bits_a, bits_b;
  std::memcpy(&bits_a, qh_a, 4);
  std::memcpy(&bits_b, qh_b, 4);
  const __mmask64 set = _cvtu64_mask64(bits_a | (static_cast<uint64_t>(bits_b) << 32));
  return _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(0x10));  // bit 4 is clear in q
}

struct Q4_0 {
  static constexpr int kBytes = 18;
  static constexpr bool kSigned = false;
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b) {
    return NibblePair(a + 2, b + 2);
  }
  static CONVOY_TARGET_VNNI __m128 Offset(__m128 halves) {
    return _mm_moveldup_ps(_mm_mul_ps(_mm_set1_ps(-8.0f), halves));
  }
};

struct Q4_1 {
  static constexpr int kBytes = 20;
  static constexpr bool kSigned = false;
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b) {
    return NibblePair(a + 4, b + 4);
  }
  static CONVOY_TARGET_VNNI __m128 Offset(__m128 halves) { return _mm_movehdup_ps(halves); }
};

struct Q5_0 {
  static constexpr int kBytes = 22;
  static constexpr bool kSigned = false;
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b) {
    return AddFifthBits(NibblePair(a + 6, b + 6), a + 2, b + 2);
  }
  static CONVOY_TARGET_VNNI __m128 Offset(__m128 halves) {
    return _mm_moveldup_ps(_mm_mul_ps(_mm_set1_ps(-16.0f), halves));
  }
};

struct Q5_1 {
  static constexpr int kBytes = 24;
  static constexpr bool kSigned = false;
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b) {
    return AddFifthBits(NibblePair(a + 8, b + 8), a + 4, b + 4);
  }
  static CONVOY_TARGET_VNNI __m128 Offset(__m128 halves) { return _mm_movehdup_ps(halves); }
};

struct Q8_0 {
  static constexpr int kBytes = 34;
  static constexpr bool kSigned = true;
  static CONVOY_TARGET_VNNI __m512i Quants(const std::byte* a, const std::byte* b) {
    return Join(reinterpret_cast<const uint8_t*>(a + 2), reinterpret_cast<const uint8_t*>(b + 2));
  }
  static CONVOY_TARGET_VNNI __m128 Offset(__m128 halves) { return halves; }  // none
};

// Blocks a and b's d in lanes 0 and 2 (exact, as the AVX2 kernel's conversion); each block's
// offset stored twice at offsets_a and offsets_b, for the types that have one.
template <typename F>
CONVOY_TARGET_VNNI __m128 PairScales(const std::byte* a, const std::byte* b, float* offsets_a,
                                     float* offsets_b) {
  uint32_t head_a, head_b;
  std::memcpy(&head_a, a, 4);
  std::memcpy(&head_b, b, 4);
  const __m128i heads =
      _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(head_a)), static_cast<int>(head_b), 1);
  const __m128 halves = _mm_cvtph_ps(heads);  // [d, second field] of a, then of b
  if (!F::kSigned) {
    const __m128 offsets = F::Offset(halves);
    _mm_storel_pi(reinterpret_cast<__m64*>(offsets_a), offsets);
    _mm_storeh_pi(reinterpret_cast<__m64*>(offsets_b), offsets);
  }
  return halves;
}

// How far ahead of the tile it reads the one-row kernel asks for the blocks (as many bytes a step
// as it reads). Without it the kernel waited on its loads most of the time (decode of the default
// model on a Xeon whose L3 holds the whole model: 11.8-12.1 ms a token without, 7.5-8.5 with; 4
// and 8 KiB and 2 to 4 tiles ahead all within that range, in a noisy shared machine).
constexpr int64_t kPrefetchBytes = 8192;

// rows: 2 * kPairs weight rows (the last real one repeated to fill); offsets[i]: OffsetStride(k)
// floats for row i's.
template <typename F, int kPairs>
CONVOY_TARGET_VNNI void DirectVnni(const std::byte* const* rows, int count, int64_t k,
                                   const QuantizedRows& x, float* y, int64_t ldy,
                                   float* const* offsets, const std::byte* ahead) {
  const int64_t groups = k / 32;
  const int64_t stride = OffsetStride(k);
  // [c of row a x 8, c of row b x 8] from [c of a, _, c of b, _]
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
  if (!F::kSigned) {
    for (int i = 0; i < 2 * kPairs; ++i) {
      for (int64_t j = k / 16; j < stride; ++j) offsets[i][j] = 0.0f;
    }
  }
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    __m512 acc[kPairs];
    for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m512i xv = Activations(xq + 32 * g);
      const __m128 dxv = _mm_set1_ps(dx[g]);
      // The blocks kPrefetchBytes ahead, as many bytes a step as this one reads.
      const char* next = reinterpret_cast<const char*>(ahead + g * (2 * kPairs * F::kBytes));
      for (int o = 0; o < 2 * kPairs * F::kBytes; o += 64) _mm_prefetch(next + o, _MM_HINT_T0);
      for (int p = 0; p < kPairs; ++p) {
        const std::byte* a = rows[2 * p] + g * F::kBytes;
        const std::byte* b = rows[2 * p + 1] + g * F::kBytes;
        const __m512 sums = _mm512_cvtepi32_ps(Dot<F::kSigned>(F::Quants(a, b), xv));
        const __m128 d = PairScales<F>(a, b, offsets[2 * p] + 2 * g, offsets[2 * p + 1] + 2 * g);
        // c = d * dx, the AVX2 kernel's product.
        const __m512 c = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(d, dxv)));
        acc[p] = _mm512_fmadd_ps(sums, c, acc[p]);
      }
    }
    Finish<!F::kSigned, kPairs>(acc, count, offsets, x.half_sums(r), stride, y + r * ldy);
  }
}

template <typename F>
void DirectVnniAny(const std::byte* w, int64_t row_bytes, int count, int64_t k,
                   const QuantizedRows& x, float* y, int64_t ldy) {
  thread_local std::vector<float> storage;
  const int64_t stride = OffsetStride(k);
  if (static_cast<int64_t>(storage.size()) < 4 * stride) storage.resize(4 * stride);
  const std::byte* rows[4];
  float* offsets[4];
  for (int i = 0; i < 4; ++i) {
    rows[i] = w + (i < count ? i : count - 1) * row_bytes;
    offsets[i] = storage.data() + i * stride;
  }
  if (count > 2) return DirectVnni<F, 2>(rows, count, k, x, y, ldy, offsets, w + kPrefetchBytes);
  DirectVnni<F, 1>(rows, count, k, x, y, ldy, offsets, w + kPrefetchBytes);
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
    case GgmlType::kQ4_0:
      return DirectVnniAny<Q4_0>;
    case GgmlType::kQ4_1:
      return DirectVnniAny<Q4_1>;
    case GgmlType::kQ5_0:
      return DirectVnniAny<Q5_0>;
    case GgmlType::kQ5_1:
      return DirectVnniAny<Q5_1>;
    case GgmlType::kQ8_0:
      return DirectVnniAny<Q8_0>;
    default:
      return nullptr;
  }
}

TileFn FindTileVnni(bool is_signed) {
  return is_signed ? TileVnniAny<true, false> : TileVnniAny<false, true>;
}

}  // namespace convoy::quant
