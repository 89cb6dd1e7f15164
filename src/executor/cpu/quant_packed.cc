#include "executor/cpu/quant_packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/x86_intrinsics.h"

// Compiled for these whatever the build's -march; called only after the caller checked the CPU.
// The lambdas in these functions carry the same attribute: a lambda's body is a function of its
// own, compiled for the build's -march otherwise.
#define CONVOY_TARGET_AVX2_FMA __attribute__((target("avx2,fma,f16c")))
#define CONVOY_TARGET_VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define CONVOY_INLINE inline __attribute__((always_inline))

namespace convoy::quant {
namespace {

constexpr int64_t kSuperblock = 256;

// How a unit's bytes change on their way into a tile (and back, inverted).
enum class Transform {
  kNone,
  kFlip,        // every byte's top bit flipped (Q8_0's quants: q + 128)
  kSpreadBits,  // a 32-bit word's bit j moved to bit 8 * (j % 4) + j / 4 (Q5_0/Q5_1's fifth bits)
};

// Where a block's bytes go in a tile: `count` units of `unit` bytes at byte raw_at of the block;
// unit i of row w goes to packed_at + (16 * slot(i) + w) * unit, changed as `transform` says.
struct Field {
  int raw_at, unit, count, packed_at;  // unit: 1, 2 or 4 bytes (a transform: 4)
  int (*slot)(int i);
  Transform transform = Transform::kNone;
};

// Bit j of `word` moved to bit 8 * (j % 4) + j / 4 (or back, with `inverse`).
uint32_t SpreadBits(uint32_t word, bool inverse) {
  uint32_t out = 0;
  for (int j = 0; j < 32; ++j) {
    const int to = 8 * (j % 4) + j / 4;
    if (inverse) {
      out |= ((word >> to) & 1u) << j;
    } else {
      out |= ((word >> j) & 1u) << to;
    }
  }
  return out;
}

// Copies one field's unit from a block into a tile, or back with `to_block`: each size its own
// fixed-size copy (a load takes a second per GB through memcpy calls of a variable size).
void CopyUnit(const Field& field, std::byte* to, const std::byte* from, bool to_block) {
  if (field.unit == 1) {
    *to = *from;
  } else if (field.unit == 2) {
    std::memcpy(to, from, 2);
  } else {
    uint32_t word;
    std::memcpy(&word, from, 4);
    if (field.transform == Transform::kFlip) word ^= 0x80808080u;
    if (field.transform == Transform::kSpreadBits) word = SpreadBits(word, to_block);
    std::memcpy(to, &word, 4);
  }
}

constexpr int InOrder(int i) { return i; }
// Q6_K's quants in the order UnpackVnni reads them, so that a tile is read front to back: for
// each half h and c8 < 8, low-nibble dwords 16h + c8 and 16h + 8 + c8, then high-bit dword
// 8h + c8 (three slots of 64 bytes).
constexpr int Q6KLowSlot(int i) { return 3 * (8 * (i / 16) + i % 8) + (i % 16) / 8; }
constexpr int Q6KHighSlot(int e) { return 3 * e + 2; }
// Q2_K's and Q3_K's quants in the order their kernels read them: for c = 0 .. 7, (Q3_K: third-bit
// dword c, then) quant dwords c and 8 + c, whose values share c's third bits.
constexpr int Q2KQuantSlot(int i) { return 2 * (i % 8) + i / 8; }
constexpr int Q3KBitSlot(int c) { return 3 * c; }
constexpr int Q3KQuantSlot(int i) { return 3 * (i % 8) + 1 + i / 8; }

constexpr Field kQ4KFields[] = {{0, 2, 1, 0, InOrder},
                                {2, 2, 1, 32, InOrder},
                                {4, 4, 3, 64, InOrder},
                                {16, 4, 32, 256, InOrder}};
// Q5_K: Q4_K's, with the 32 bytes of fifth bits (dwords 0-7) before the nibbles.
constexpr Field kQ5KFields[] = {{0, 2, 1, 0, InOrder},
                                {2, 2, 1, 32, InOrder},
                                {4, 4, 3, 64, InOrder},
                                {16, 4, 8, 256, InOrder},
                                {48, 4, 32, 768, InOrder}};
constexpr Field kQ6KFields[] = {{208, 2, 1, 0, InOrder},
                                {192, 1, 16, 32, InOrder},
                                {0, 4, 32, 288, Q6KLowSlot},
                                {128, 4, 16, 288, Q6KHighSlot}};

// Q2_K: the 16 rows' d, their dmin, dwords 0-3 of the 16 scale bytes (sub-blocks 4i .. 4i + 3),
// the 16 dwords of the 64 bytes of 2-bit quants.
constexpr Field kQ2KFields[] = {{80, 2, 1, 0, InOrder},
                                {82, 2, 1, 32, InOrder},
                                {0, 4, 4, 64, InOrder},
                                {16, 4, 16, 320, Q2KQuantSlot}};
// Q3_K: the 16 rows' d, dwords 0-2 of the 12 scale bytes, then the 8 dwords of the 32 bytes of
// third bits and the 16 of the 64 bytes of 2-bit quants.
constexpr Field kQ3KFields[] = {{108, 2, 1, 0, InOrder},
                                {96, 4, 3, 32, InOrder},
                                {0, 4, 8, 224, Q3KBitSlot},
                                {32, 4, 16, 224, Q3KQuantSlot}};

// The 32-value types: the 16 rows' d, then m (Q4_1, Q5_1), then the fifth bits (Q5_0, Q5_1, one
// word a row), then the quants' dwords (4 of nibbles, or Q8_0's 8).
constexpr Field kQ40Fields[] = {{0, 2, 1, 0, InOrder}, {2, 4, 4, 32, InOrder}};
constexpr Field kQ41Fields[] = {
    {0, 2, 1, 0, InOrder}, {2, 2, 1, 32, InOrder}, {4, 4, 4, 64, InOrder}};
constexpr Field kQ50Fields[] = {
    {0, 2, 1, 0, InOrder}, {2, 4, 1, 32, InOrder, Transform::kSpreadBits}, {6, 4, 4, 96, InOrder}};
constexpr Field kQ51Fields[] = {{0, 2, 1, 0, InOrder},
                                {2, 2, 1, 32, InOrder},
                                {4, 4, 1, 64, InOrder, Transform::kSpreadBits},
                                {8, 4, 4, 128, InOrder}};
constexpr Field kQ80Fields[] = {{0, 2, 1, 0, InOrder}, {2, 4, 8, 32, InOrder, Transform::kFlip}};

struct Layout {
  int64_t block_elements, block_bytes;
  const Field* fields;
  int field_count;
};

const Layout& LayoutOf(GgmlType type) {
  static constexpr Layout kQ4K{256, 144, kQ4KFields, 4};
  static constexpr Layout kQ5K{256, 176, kQ5KFields, 5};
  static constexpr Layout kQ6K{256, 210, kQ6KFields, 4};
  static constexpr Layout kQ2K{256, 84, kQ2KFields, 4};
  static constexpr Layout kQ3K{256, 110, kQ3KFields, 4};
  static constexpr Layout kQ40{32, 18, kQ40Fields, 2};
  static constexpr Layout kQ41{32, 20, kQ41Fields, 3};
  static constexpr Layout kQ50{32, 22, kQ50Fields, 3};
  static constexpr Layout kQ51{32, 24, kQ51Fields, 4};
  static constexpr Layout kQ80{32, 34, kQ80Fields, 2};
  switch (type) {
    case GgmlType::kQ4_K:
      return kQ4K;
    case GgmlType::kQ5_K:
      return kQ5K;
    case GgmlType::kQ6_K:
      return kQ6K;
    case GgmlType::kQ2_K:
      return kQ2K;
    case GgmlType::kQ3_K:
      return kQ3K;
    case GgmlType::kQ4_0:
      return kQ40;
    case GgmlType::kQ4_1:
      return kQ41;
    case GgmlType::kQ5_0:
      return kQ50;
    case GgmlType::kQ5_1:
      return kQ51;
    default:
      return kQ80;
  }
}

int64_t TileBytes(GgmlType type) { return kPackedRows * LayoutOf(type).block_bytes; }

// A tile unpacked for the kernels, the same form for every superblock type: the contract's q, the
// scale of each sub-block of 16 values, the factors of the M term as int16 pairs, d and dm in fp32.
struct alignas(64) Tile {
  uint8_t q[64][kPackedRows][4];  // chunk c: values 4c .. 4c + 3 of each row
  int32_t sc[16][kPackedRows];    // sub-block j (values 16j .. 16j + 15) of each row
  // The M factors of sub-blocks 2p (low 16 bits, int16) and 2p + 1 (high 16 bits) of each row.
  uint32_t mn[8][kPackedRows];
  float d[kPackedRows];
  float dm[kPackedRows];
};

// Two int16 in one 32-bit word: `low` in the low half.
constexpr uint32_t Pair(int32_t low, int32_t high) {
  return (static_cast<uint32_t>(low) & 0xFFFF) | (static_cast<uint32_t>(high) << 16);
}

uint16_t HalfAt(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return bits;
}

// ---- Unpacking a tile. The bodies are plain loops, inlined into a function compiled for each
// path so that the compiler vectorizes them with that path's instructions.

// Q4_K: s = d * sc, mn = -(dmin * mi) for both halves of a sub-block of 32 (quant_matmul.h), so
// sc and mi repeat for sub-blocks 2s and 2s + 1 of 16; dm = -dmin.
CONVOY_INLINE void UnpackQ4KScales(const std::byte* tile, Tile* t) {
  // The 12 bytes of eight 6-bit scales and mins, decoded from the three words of the 16 rows side
  // by side (model/gguf_dequantize.cc's ScaleMin, four sub-blocks a word): byte s of
  // scales_low is sub-block s's scale (s < 4), of scales_high sub-block s + 4's; the mins alike.
  uint32_t words[3][kPackedRows];
  std::memcpy(words, tile + 64, sizeof(words));
  for (int w = 0; w < kPackedRows; ++w) {
    const uint32_t w0 = words[0][w], w1 = words[1][w], w2 = words[2][w];
    const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    const uint32_t scales_low = w0 & low6, mins_low = w1 & low6;
    const uint32_t scales_high = (w2 & low4) | (((w0 >> 6) & low2) << 4);
    const uint32_t mins_high = ((w2 >> 4) & low4) | (((w1 >> 6) & low2) << 4);
    for (int s = 0; s < 4; ++s) {
      const int32_t sc_low = static_cast<int32_t>((scales_low >> (8 * s)) & 0xFF);
      const int32_t sc_high = static_cast<int32_t>((scales_high >> (8 * s)) & 0xFF);
      const int32_t mi_low = static_cast<int32_t>((mins_low >> (8 * s)) & 0xFF);
      const int32_t mi_high = static_cast<int32_t>((mins_high >> (8 * s)) & 0xFF);
      t->sc[2 * s][w] = t->sc[2 * s + 1][w] = sc_low;
      t->sc[2 * s + 8][w] = t->sc[2 * s + 9][w] = sc_high;
      t->mn[s][w] = Pair(mi_low, mi_low);
      t->mn[s + 4][w] = Pair(mi_high, mi_high);
    }
  }
}

// Where Q4_K's and Q5_K's nibbles start in a tile (Q5_K's fifth bits at 256).
constexpr int KQuantsAt(GgmlType type) { return type == GgmlType::kQ5_K ? 768 : 256; }

// Q4_K and Q5_K. Nibble dword i = 8 p + c holds values 64 p + 4 c .. + 3 (low nibbles, sub-block
// 2p) and 32 more (high, sub-block 2p + 1); Q5_K's fifth bits of those values are bits 2p and
// 2p + 1 of the bytes of fifth-bit dword c.
CONVOY_INLINE void UnpackQ4K(GgmlType type, const std::byte* tile, Tile* t) {
  for (int w = 0; w < kPackedRows; ++w) {
    t->d[w] = FP16ToFloat(HalfAt(tile + 2 * w));
    t->dm[w] = -FP16ToFloat(HalfAt(tile + 32 + 2 * w));
  }
  UnpackQ4KScales(tile, t);
  const bool fifth = type == GgmlType::kQ5_K;
  for (int i = 0; i < 32; ++i) {
    const int p = i / 8, c = i % 8;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(tile + KQuantsAt(type) + 64 * i);
    const uint8_t* bits = reinterpret_cast<const uint8_t*>(tile + 256 + 64 * c);
    uint8_t* low = &t->q[16 * p + c][0][0];
    uint8_t* high = &t->q[16 * p + 8 + c][0][0];
    for (int b = 0; b < 64; ++b) {
      low[b] = src[b] & 0x0F;
      high[b] = src[b] >> 4;
    }
    if (fifth) {
      for (int b = 0; b < 64; ++b) {
        low[b] |= ((bits[b] >> (2 * p)) & 1) << 4;
        high[b] |= ((bits[b] >> (2 * p + 1)) & 1) << 4;
      }
    }
  }
}

// Q6_K: s = d * sc, mn = -32 * s per sub-block of 16: the M term's factor is sc itself and
// dm = -32 * d (exact).
CONVOY_INLINE void UnpackQ6KScales(const std::byte* tile, Tile* t) {
  const int8_t* scales = reinterpret_cast<const int8_t*>(tile + 32);
  for (int j = 0; j < 16; ++j) {
    for (int w = 0; w < kPackedRows; ++w) t->sc[j][w] = scales[16 * j + w];
  }
  for (int p = 0; p < 8; ++p) {
    for (int w = 0; w < kPackedRows; ++w) {
      t->mn[p][w] = Pair(scales[32 * p + w], scales[32 * p + 16 + w]);
    }
  }
}

CONVOY_INLINE void UnpackQ6K(const std::byte* tile, Tile* t) {
  for (int w = 0; w < kPackedRows; ++w) {
    t->d[w] = FP16ToFloat(HalfAt(tile + 2 * w));
    t->dm[w] = -32.0f * t->d[w];
  }
  UnpackQ6KScales(tile, t);
  // Chunk 32 h + r takes the low (r < 16) or high nibble of low-nibble dword 16 h + r % 16 and
  // bits 2 (r / 8), + 1 of high-bit dword 8 h + r % 8 (model/gguf_dequantize.cc's Q6_K order).
  const uint8_t* quants = reinterpret_cast<const uint8_t*>(tile + 288);
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 32; ++r) {
      const uint8_t* low = quants + 64 * Q6KLowSlot(16 * h + r % 16);
      const uint8_t* high = quants + 64 * Q6KHighSlot(8 * h + r % 8);
      const int shift = 2 * (r / 8);
      uint8_t* q = &t->q[32 * h + r][0][0];
      if (r < 16) {
        for (int b = 0; b < 64; ++b) q[b] = (low[b] & 0x0F) | (((high[b] >> shift) & 3) << 4);
      } else {
        for (int b = 0; b < 64; ++b) q[b] = (low[b] >> 4) | (((high[b] >> shift) & 3) << 4);
      }
    }
  }
}

// Q2_K and Q3_K: quant dword 8h + c (bytes 32h + 4c .. + 3 of a row's 64) holds in bits 2j and
// 2j + 1 of its bytes values 128h + 32j + 4c .. + 3 (chunk 32h + 8j + c, in sub-block 8h + 2j +
// c / 4); Q3_K's third bits of those values are bit 4h + j of the bytes of third-bit dword c.
// Line c of a tile: (Q3_K: third-bit dword c, then) quant dwords c and 8 + c.
constexpr int Q23KLineAt(GgmlType type, int c) {
  return type == GgmlType::kQ2_K ? 320 + 128 * c : 224 + 192 * c;
}
constexpr int Q23KQuantAt(GgmlType type, int h, int c) {
  return Q23KLineAt(type, c) + 64 * (type == GgmlType::kQ3_K ? 1 + h : h);
}

// Q2_K: s = d * sc, mn = -(dmin * mi) per sub-block of 16, sc and mi the low and high nibbles of
// its scale byte (byte j % 4 of scale dword j / 4); dm = -dmin.
CONVOY_INLINE void UnpackQ2KScales(const std::byte* tile, Tile* t) {
  const uint8_t* scales = reinterpret_cast<const uint8_t*>(tile + 64);
  for (int j = 0; j < 16; ++j) {
    for (int w = 0; w < kPackedRows; ++w) t->sc[j][w] = scales[64 * (j / 4) + 4 * w + j % 4] & 15;
  }
  for (int p = 0; p < 8; ++p) {
    for (int w = 0; w < kPackedRows; ++w) {
      const uint8_t* at = scales + 64 * (p / 2) + 4 * w + 2 * (p % 2);
      t->mn[p][w] = Pair(at[0] >> 4, at[1] >> 4);
    }
  }
}

// Scales 4i .. 4i + 3 (0 .. 63, a byte each) of a Q3_K row from its three scale words: scale s's
// low nibble is in byte s % 8 (the low nibble for s < 8), its top two bits in byte 8 + s % 4 at
// bit 2 (s / 4) (model/gguf_dequantize.cc's Q3_KScale).
CONVOY_INLINE uint32_t Q3KScaleWord(uint32_t w0, uint32_t w1, uint32_t w2, int i) {
  const uint32_t nibbles = ((i % 2 == 0 ? w0 : w1) >> (4 * (i / 2))) & 0x0F0F0F0Fu;
  return nibbles | (((w2 >> (2 * i)) & 0x03030303u) << 4);
}

// Q3_K: s = d * (sc - 32), mn = -4 * s per sub-block of 16: the M term's factor is sc - 32 itself
// and dm = -4 * d (exact).
CONVOY_INLINE void UnpackQ3KScales(const std::byte* tile, Tile* t) {
  uint32_t words[3][kPackedRows];
  std::memcpy(words, tile + 32, sizeof(words));
  for (int w = 0; w < kPackedRows; ++w) {
    for (int i = 0; i < 4; ++i) {
      const uint32_t four = Q3KScaleWord(words[0][w], words[1][w], words[2][w], i);
      for (int e = 0; e < 4; ++e) {
        t->sc[4 * i + e][w] = static_cast<int32_t>((four >> (8 * e)) & 0xFF) - 32;
      }
    }
  }
  for (int p = 0; p < 8; ++p) {
    for (int w = 0; w < kPackedRows; ++w) t->mn[p][w] = Pair(t->sc[2 * p][w], t->sc[2 * p + 1][w]);
  }
}

CONVOY_INLINE void UnpackQ23K(GgmlType type, const std::byte* tile, Tile* t) {
  const bool third = type == GgmlType::kQ3_K;
  for (int w = 0; w < kPackedRows; ++w) {
    t->d[w] = FP16ToFloat(HalfAt(tile + 2 * w));
    t->dm[w] = third ? -4.0f * t->d[w] : -FP16ToFloat(HalfAt(tile + 32 + 2 * w));
  }
  if (third) {
    UnpackQ3KScales(tile, t);
  } else {
    UnpackQ2KScales(tile, t);
  }
  for (int i = 0; i < 16; ++i) {
    const int h = i / 8, c = i % 8;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(tile + Q23KQuantAt(type, h, c));
    const uint8_t* bits = reinterpret_cast<const uint8_t*>(tile + Q23KLineAt(type, c));
    for (int j = 0; j < 4; ++j) {
      uint8_t* q = &t->q[32 * h + 8 * j + c][0][0];
      for (int b = 0; b < 64; ++b) q[b] = (src[b] >> (2 * j)) & 3;
      if (third) {
        for (int b = 0; b < 64; ++b) q[b] |= ((bits[b] >> (4 * h + j)) & 1) << 2;
      }
    }
  }
}

// Each byte's bit `bit` (0 .. 7) at bit 4, the other bits anything (the caller masks bit 4).
CONVOY_TARGET_AVX2_FMA __m256i Shift4(__m256i v, int bit) {
  return bit <= 4 ? _mm256_slli_epi16(v, 4 - bit) : _mm256_srli_epi16(v, bit - 4);
}
CONVOY_TARGET_VNNI __m512i Shift4(__m512i v, int bit) {
  return bit <= 4 ? _mm512_slli_epi16(v, 4 - bit) : _mm512_srli_epi16(v, bit - 4);
}

CONVOY_INLINE bool IsQ23K(GgmlType type) {
  return type == GgmlType::kQ2_K || type == GgmlType::kQ3_K;
}

CONVOY_INLINE void UnpackBody(GgmlType type, const std::byte* tile, Tile* t) {
  if (IsQ23K(type)) {
    UnpackQ23K(type, tile, t);
  } else if (type != GgmlType::kQ6_K) {
    UnpackQ4K(type, tile, t);
  } else {
    UnpackQ6K(tile, t);
  }
}

void UnpackPortable(GgmlType type, const std::byte* tile, Tile* t) { UnpackBody(type, tile, t); }

// The four scale dwords of a Q2_K or Q3_K tile: dword i holds the scale bytes of sub-blocks 4i ..
// 4i + 3 (Q2_K: sc | mi << 4; Q3_K: the 6-bit scale, sc + 32, decoded as Q3KScaleWord does). AVX2:
// rows 0-7 of `tile`'s lines (offset it by 32 for rows 8-15).
CONVOY_TARGET_AVX2_FMA inline void Q23KScaleDwords(bool third, const std::byte* tile,
                                                   __m256i* scales) {
  const auto load = [tile](int at) CONVOY_TARGET_AVX2_FMA {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at));
  };
  if (!third) {
    for (int i = 0; i < 4; ++i) scales[i] = load(64 + 64 * i);
    return;
  }
  const __m256i low4w = _mm256_set1_epi32(0x0F0F0F0F), low2w = _mm256_set1_epi32(0x03030303);
  const __m256i w0 = load(32), w1 = load(96), w2 = load(160);
  for (int i = 0; i < 4; ++i) {
    const __m256i nibbles =
        _mm256_and_si256(_mm256_srli_epi32(i % 2 == 0 ? w0 : w1, 4 * (i / 2)), low4w);
    scales[i] = _mm256_or_si256(
        nibbles, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w2, 2 * i), low2w), 4));
  }
}
CONVOY_TARGET_VNNI inline void Q23KScaleDwords(bool third, const std::byte* tile, __m512i* scales) {
  if (!third) {
    for (int i = 0; i < 4; ++i) scales[i] = _mm512_loadu_si512(tile + 64 + 64 * i);
    return;
  }
  const __m512i low4w = _mm512_set1_epi32(0x0F0F0F0F), low2w = _mm512_set1_epi32(0x03030303);
  const __m512i w0 = _mm512_loadu_si512(tile + 32), w1 = _mm512_loadu_si512(tile + 96);
  const __m512i w2 = _mm512_loadu_si512(tile + 160);
  for (int i = 0; i < 4; ++i) {
    const __m512i nibbles =
        _mm512_and_si512(_mm512_srli_epi32(i % 2 == 0 ? w0 : w1, 4 * (i / 2)), low4w);
    scales[i] = _mm512_or_si512(
        nibbles, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w2, 2 * i), low2w), 4));
  }
}

// Sub-block `sub`'s scale byte from the scale dwords (a 32-bit lane each), and its sc: Q2_K's low
// nibble, or Q3_K's 6-bit scale - 32.
CONVOY_TARGET_AVX2_FMA inline __m256i Q23KScaleByte(const __m256i* scales, int sub) {
  return _mm256_and_si256(_mm256_srli_epi32(scales[sub / 4], 8 * (sub % 4)),
                          _mm256_set1_epi32(0xFF));
}
CONVOY_TARGET_AVX2_FMA inline __m256i Q23KSc(bool third, __m256i byte) {
  return third ? _mm256_sub_epi32(byte, _mm256_set1_epi32(32))
               : _mm256_and_si256(byte, _mm256_set1_epi32(15));
}
CONVOY_TARGET_VNNI inline __m512i Q23KScaleByte(const __m512i* scales, int sub) {
  return _mm512_and_si512(_mm512_srli_epi32(scales[sub / 4], 8 * (sub % 4)),
                          _mm512_set1_epi32(0xFF));
}
CONVOY_TARGET_VNNI inline __m512i Q23KSc(bool third, __m512i byte) {
  return third ? _mm512_sub_epi32(byte, _mm512_set1_epi32(32))
               : _mm512_and_si512(byte, _mm512_set1_epi32(15));
}

// UnpackQ23K's bytes with AVX2: rows 8r .. 8r + 7 a vector.
CONVOY_TARGET_AVX2_FMA void UnpackQ23KAvx2(GgmlType type, const std::byte* tile, Tile* t) {
  const bool third = type == GgmlType::kQ3_K;
  const __m256i low2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
  for (int r = 0; r < 2; ++r) {
    const auto load = [tile, r](int at) CONVOY_TARGET_AVX2_FMA {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at + 32 * r));
    };
    const auto store = [](void* to, __m256i v) CONVOY_TARGET_AVX2_FMA {
      _mm256_store_si256(static_cast<__m256i*>(to), v);
    };
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * r)));
    _mm256_store_ps(t->d + 8 * r, d);
    _mm256_store_ps(
        t->dm + 8 * r,
        third ? _mm256_mul_ps(d, _mm256_set1_ps(-4.0f))
              : _mm256_sub_ps(_mm256_setzero_ps(),
                              _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(tile + 32 + 16 * r)))));
    __m256i scales[4];
    Q23KScaleDwords(third, tile + 32 * r, scales);
    __m256i mn[16];
    for (int j = 0; j < 16; ++j) {
      const __m256i byte = Q23KScaleByte(scales, j);
      const __m256i sc = Q23KSc(third, byte);
      store(&t->sc[j][8 * r], sc);
      mn[j] = third ? sc : _mm256_srli_epi32(byte, 4);
    }
    for (int p = 0; p < 8; ++p) {
      const __m256i low = _mm256_and_si256(mn[2 * p], _mm256_set1_epi32(0xFFFF));
      store(&t->mn[p][8 * r], _mm256_or_si256(low, _mm256_slli_epi32(mn[2 * p + 1], 16)));
    }
    for (int c = 0; c < 8; ++c) {
      const __m256i bits = third ? load(Q23KLineAt(type, c)) : _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i v = load(Q23KQuantAt(type, h, c));
        for (int j = 0; j < 4; ++j) {
          __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), low2);
          if (third) {
            const int bit = 4 * h + j;
            const __m256i moved =
                bit >= 2 ? _mm256_srli_epi16(bits, bit - 2) : _mm256_slli_epi16(bits, 2 - bit);
            q = _mm256_or_si256(q, _mm256_and_si256(moved, bit2));
          }
          store(&t->q[32 * h + 8 * j + c][8 * r][0], q);
        }
      }
    }
  }
}

// UnpackBody's bytes with the quants 32 bytes at a time (the loops as written vectorize poorly:
// Q6_K's products at one row took twice as long as they take now).
CONVOY_TARGET_AVX2_FMA void UnpackAvx2(GgmlType type, const std::byte* tile, Tile* t) {
  if (IsQ23K(type)) {
    UnpackQ23KAvx2(type, tile, t);
    return;
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  const auto load = [tile](int at) CONVOY_TARGET_AVX2_FMA {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at));
  };
  const auto store = [t](int chunk, int half, __m256i v) CONVOY_TARGET_AVX2_FMA {
    _mm256_store_si256(reinterpret_cast<__m256i*>(&t->q[chunk][8 * half][0]), v);
  };
  for (int w = 0; w < kPackedRows; ++w) t->d[w] = FP16ToFloat(HalfAt(tile + 2 * w));
  if (type != GgmlType::kQ6_K) {
    for (int w = 0; w < kPackedRows; ++w) t->dm[w] = -FP16ToFloat(HalfAt(tile + 32 + 2 * w));
    UnpackQ4KScales(tile, t);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    // Q5_K's fifth bits, read once before the nibbles: the tile is read front to back (read
    // beside the nibbles, the products at one row came from memory at half the cached rate).
    alignas(32) uint8_t fifth[512];
    if (type == GgmlType::kQ5_K) std::memcpy(fifth, tile + 256, sizeof(fifth));
    for (int i = 0; i < 32; ++i) {
      const int p = i / 8, c = i % 8;
      for (int half = 0; half < 2; ++half) {
        const __m256i v = load(KQuantsAt(type) + 64 * i + 32 * half);
        __m256i low = _mm256_and_si256(v, low4);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        if (type == GgmlType::kQ5_K) {  // bit 2p (2p + 1) of a byte to bit 4
          const __m256i bits =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(fifth + 64 * c + 32 * half));
          low = _mm256_or_si256(low, _mm256_and_si256(Shift4(bits, 2 * p), bit4));
          high = _mm256_or_si256(high, _mm256_and_si256(Shift4(bits, 2 * p + 1), bit4));
        }
        store(16 * p + c, half, low);
        store(16 * p + 8 + c, half, high);
      }
    }
    return;
  }
  for (int w = 0; w < kPackedRows; ++w) t->dm[w] = -32.0f * t->d[w];
  UnpackQ6KScales(tile, t);
  for (int h = 0; h < 2; ++h) {
    for (int c8 = 0; c8 < 8; ++c8) {
      for (int half = 0; half < 2; ++half) {
        const int at = 288 + 3 * 64 * (8 * h + c8) + 32 * half;
        const __m256i a = load(at), b = load(at + 64), hq = load(at + 128);
        const auto bits = [&](__m256i v)
                              CONVOY_TARGET_AVX2_FMA { return _mm256_and_si256(v, bits45); };
        store(32 * h + c8, half,
              _mm256_or_si256(_mm256_and_si256(a, low4), bits(_mm256_slli_epi16(hq, 4))));
        store(32 * h + 8 + c8, half,
              _mm256_or_si256(_mm256_and_si256(b, low4), bits(_mm256_slli_epi16(hq, 2))));
        store(32 * h + 16 + c8, half,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), bits(hq)));
        store(32 * h + 24 + c8, half,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4),
                              bits(_mm256_srli_epi16(hq, 2))));
      }
    }
  }
}

// UnpackQ23K's bytes, 16 rows a vector: the scales' loops gather bytes, which the compiler leaves
// scalar.
CONVOY_TARGET_VNNI void UnpackQ23KVnni(GgmlType type, const std::byte* tile, Tile* t) {
  const bool third = type == GgmlType::kQ3_K;
  const auto load = [tile](int at) CONVOY_TARGET_VNNI { return _mm512_loadu_si512(tile + at); };
  const __m512i low2 = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4);
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
  _mm512_store_ps(t->d, d);
  _mm512_store_ps(t->dm, third ? _mm512_mul_ps(d, _mm512_set1_ps(-4.0f))
                               : _mm512_sub_ps(_mm512_setzero_ps(),
                                               _mm512_cvtph_ps(_mm256_loadu_si256(
                                                   reinterpret_cast<const __m256i*>(tile + 32)))));
  __m512i scales[4];
  Q23KScaleDwords(third, tile, scales);
  __m512i mn[16];
  for (int j = 0; j < 16; ++j) {
    const __m512i byte = Q23KScaleByte(scales, j);
    const __m512i sc = Q23KSc(third, byte);
    _mm512_store_si512(&t->sc[j][0], sc);
    mn[j] = third ? sc : _mm512_srli_epi32(byte, 4);
  }
  for (int p = 0; p < 8; ++p) {  // Pair(mn[2p], mn[2p + 1])
    const __m512i low = _mm512_and_si512(mn[2 * p], _mm512_set1_epi32(0xFFFF));
    _mm512_store_si512(&t->mn[p][0], _mm512_or_si512(low, _mm512_slli_epi32(mn[2 * p + 1], 16)));
  }
  for (int c = 0; c < 8; ++c) {
    const __m512i bits = third ? load(Q23KLineAt(type, c)) : _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i v = load(Q23KQuantAt(type, h, c));
      for (int j = 0; j < 4; ++j) {
        __m512i q = _mm512_and_si512(_mm512_srli_epi16(v, 2 * j), low2);
        if (third) {
          const int bit = 4 * h + j;
          const __m512i moved =
              bit >= 2 ? _mm512_srli_epi16(bits, bit - 2) : _mm512_slli_epi16(bits, 2 - bit);
          q = _mm512_or_si512(q, _mm512_and_si512(moved, bit2));
        }
        _mm512_store_si512(&t->q[32 * h + 8 * j + c][0][0], q);
      }
    }
  }
}

// The same bytes as UnpackBody, the quants and d a vector at a time. The scales' loops over the
// 16 rows vectorize as they are.
CONVOY_TARGET_VNNI void UnpackVnni(GgmlType type, const std::byte* tile, Tile* t) {
  if (IsQ23K(type)) {
    UnpackQ23KVnni(type, tile, t);
    return;
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const auto load = [tile](int at) CONVOY_TARGET_VNNI { return _mm512_loadu_si512(tile + at); };
  const auto store = [t](int chunk, __m512i v)
                         CONVOY_TARGET_VNNI { _mm512_store_si512(&t->q[chunk][0][0], v); };
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
  _mm512_store_ps(t->d, d);
  if (type != GgmlType::kQ6_K) {
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32)));
    _mm512_store_ps(t->dm, _mm512_sub_ps(_mm512_setzero_ps(), dmin));
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    for (int i = 0; i < 32; ++i) {
      const int p = i / 8, c = i % 8;
      const __m512i v = load(KQuantsAt(type) + 64 * i);
      __m512i low = _mm512_and_si512(v, low4);
      __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      if (type == GgmlType::kQ5_K) {
        const __m512i bits = load(256 + 64 * c);
        low = _mm512_or_si512(low, _mm512_and_si512(Shift4(bits, 2 * p), bit4));
        high = _mm512_or_si512(high, _mm512_and_si512(Shift4(bits, 2 * p + 1), bit4));
      }
      store(16 * p + c, low);
      store(16 * p + 8 + c, high);
    }
    UnpackQ4KScales(tile, t);
    return;
  }
  _mm512_store_ps(t->dm, _mm512_mul_ps(d, _mm512_set1_ps(-32.0f)));
  UnpackQ6KScales(tile, t);
  // Chunks c8, c8 + 8, c8 + 16 and c8 + 24 of half h share high-bit dword 8h + c8 (bits 0-1, 2-3,
  // 4-5, 6-7) and take the low nibbles of low dwords 16h + c8, 16h + 8 + c8, then their high ones.
  for (int h = 0; h < 2; ++h) {
    for (int c8 = 0; c8 < 8; ++c8) {
      const int at = 288 + 3 * 64 * (8 * h + c8);  // Q6KLowSlot(16h + c8) (quant order)
      const __m512i a = load(at), b = load(at + 64), hq = load(at + 128);
      const __m512i h0 = _mm512_and_si512(_mm512_slli_epi16(hq, 4), bits45);
      const __m512i h1 = _mm512_and_si512(_mm512_slli_epi16(hq, 2), bits45);
      const __m512i h2 = _mm512_and_si512(hq, bits45);
      const __m512i h3 = _mm512_and_si512(_mm512_srli_epi16(hq, 2), bits45);
      const __m512i a_high = _mm512_and_si512(_mm512_srli_epi16(a, 4), low4);
      const __m512i b_high = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
      store(32 * h + c8, _mm512_or_si512(_mm512_and_si512(a, low4), h0));
      store(32 * h + 8 + c8, _mm512_or_si512(_mm512_and_si512(b, low4), h1));
      store(32 * h + 16 + c8, _mm512_or_si512(a_high, h2));
      store(32 * h + 24 + c8, _mm512_or_si512(b_high, h3));
    }
  }
}

// ---- One activation row against a tile: acc[w] += the superblock's terms for weight row w, as
// the contract says: I = sum over sub-blocks j of sc[j] * P[j] and M = sum of mn[j] * S[j], exact
// in int32, then acc = fma(float(I), d * dx, acc) and acc = fma(float(M), dm * dx, acc).

int32_t Dword(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void RowPortable(const Tile& t, const int8_t* xq, const int16_t* sums, float dx, float* acc) {
  for (int w = 0; w < kPackedRows; ++w) {
    int32_t total = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t p = 0;
      for (int c = 4 * j; c < 4 * j + 4; ++c) {
        for (int e = 0; e < 4; ++e) p += t.q[c][w][e] * xq[4 * c + e];
      }
      total += p * t.sc[j][w];
    }
    int32_t m = 0;
    for (int pair = 0; pair < 8; ++pair) {
      const uint32_t mn = t.mn[pair][w];
      m += static_cast<int16_t>(mn & 0xFFFF) * sums[2 * pair] +
           static_cast<int16_t>(mn >> 16) * sums[2 * pair + 1];
    }
    acc[w] = std::fma(static_cast<float>(total), t.d[w] * dx, acc[w]);
    acc[w] = std::fma(static_cast<float>(m), t.dm[w] * dx, acc[w]);
  }
}

// Rows 8h .. 8h + 7 in 8 lanes. vpmaddubsw's pairs are exact (q <= 63: 2 * 63 * 127 < 32767).
template <int kRows>
CONVOY_TARGET_AVX2_FMA void RowsAvx2(const Tile& t, const int8_t* const* xq,
                                     const int16_t* const* sums, const float* dx,
                                     float* const* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h = 0; h < 2; ++h) {
    __m256i total[kRows];
    for (int r = 0; r < kRows; ++r) total[r] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      __m256i p[kRows];
      for (int r = 0; r < kRows; ++r) p[r] = _mm256_setzero_si256();
      for (int c = 4 * j; c < 4 * j + 4; ++c) {
        const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(&t.q[c][8 * h][0]));
        for (int r = 0; r < kRows; ++r) {
          const __m256i x = _mm256_set1_epi32(Dword(xq[r] + 4 * c));
          p[r] = _mm256_add_epi32(p[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), ones));
        }
      }
      const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(&t.sc[j][8 * h]));
      for (int r = 0; r < kRows; ++r) {
        total[r] = _mm256_add_epi32(total[r], _mm256_mullo_epi32(p[r], sc));
      }
    }
    __m256i m[kRows];
    for (int r = 0; r < kRows; ++r) m[r] = _mm256_setzero_si256();
    for (int pair = 0; pair < 8; ++pair) {
      const __m256i mn = _mm256_load_si256(reinterpret_cast<const __m256i*>(&t.mn[pair][8 * h]));
      for (int r = 0; r < kRows; ++r) {
        m[r] = _mm256_add_epi32(
            m[r], _mm256_madd_epi16(mn, _mm256_set1_epi32(Dword(sums[r] + 2 * pair))));
      }
    }
    const __m256 d = _mm256_load_ps(t.d + 8 * h), dm = _mm256_load_ps(t.dm + 8 * h);
    for (int r = 0; r < kRows; ++r) {
      const __m256 dxv = _mm256_set1_ps(dx[r]);
      __m256 a = _mm256_loadu_ps(acc[r] + 8 * h);
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[r]), _mm256_mul_ps(d, dxv), a);
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m[r]), _mm256_mul_ps(dm, dxv), a);
      _mm256_storeu_ps(acc[r] + 8 * h, a);
    }
  }
}

CONVOY_TARGET_AVX2_FMA void RowAvx2(const Tile& t, const int8_t* xq, const int16_t* sums, float dx,
                                    float* acc) {
  RowsAvx2<1>(t, &xq, &sums, &dx, &acc);
}

// kRows activation rows at once: the tile's vectors are loaded once for all of them, and each
// row keeps its own sums, so every output sees the same operations whatever kRows is.
template <int kRows>
CONVOY_TARGET_VNNI void RowsVnni(const Tile& t, const int8_t* const* xq, const int16_t* const* sums,
                                 const float* dx, float* const* acc) {
  __m512i total[kRows];
  for (int r = 0; r < kRows; ++r) total[r] = _mm512_setzero_si512();
  for (int j = 0; j < 16; ++j) {
    __m512i p[kRows];
    for (int r = 0; r < kRows; ++r) p[r] = _mm512_setzero_si512();
    for (int c = 4 * j; c < 4 * j + 4; ++c) {
      const __m512i q = _mm512_load_si512(&t.q[c][0][0]);
      for (int r = 0; r < kRows; ++r) {
        p[r] = _mm512_dpbusd_epi32(p[r], q, _mm512_set1_epi32(Dword(xq[r] + 4 * c)));
      }
    }
    const __m512i sc = _mm512_load_si512(&t.sc[j][0]);
    for (int r = 0; r < kRows; ++r)
      total[r] = _mm512_add_epi32(total[r], _mm512_mullo_epi32(p[r], sc));
  }
  __m512i m[kRows];
  for (int r = 0; r < kRows; ++r) m[r] = _mm512_setzero_si512();
  for (int pair = 0; pair < 8; ++pair) {
    const __m512i mn = _mm512_load_si512(&t.mn[pair][0]);
    for (int r = 0; r < kRows; ++r) {
      m[r] = _mm512_dpwssd_epi32(m[r], mn, _mm512_set1_epi32(Dword(sums[r] + 2 * pair)));
    }
  }
  const __m512 d = _mm512_load_ps(t.d), dm = _mm512_load_ps(t.dm);
  for (int r = 0; r < kRows; ++r) {
    const __m512 dxv = _mm512_set1_ps(dx[r]);
    __m512 a = _mm512_loadu_ps(acc[r]);
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[r]), _mm512_mul_ps(d, dxv), a);
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m[r]), _mm512_mul_ps(dm, dxv), a);
    _mm512_storeu_ps(acc[r], a);
  }
}

CONVOY_TARGET_VNNI void RowVnni(const Tile& t, const int8_t* xq, const int16_t* sums, float dx,
                                float* acc) {
  RowsVnni<1>(t, &xq, &sums, &dx, &acc);
}

// ---- One activation row against a group's Q4_K (or Q5_K) tiles, straight from the packed bytes to
// registers (no Tile): the same integers and the same fp32 steps as UnpackVnni + RowVnni. acc: the
// 16 outputs' accumulators, every superblock of the group added in order.
// kFifth: Q5_K (the fifth bits ORed in at bit 4; both nibbles then brought down to bits 0-3).
template <bool kFifth>
CONVOY_TARGET_VNNI void OneRowQ4KVnni(const std::byte* tiles, int64_t blocks, const int8_t* xq,
                                      const int16_t* sums, const float* dxs, float* out) {
  constexpr GgmlType kType = kFifth ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  const __m512i low4 = _mm512_set1_epi8(0x0F), high4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const __m512i low6 = _mm512_set1_epi32(0x3F3F3F3F), low4w = _mm512_set1_epi32(0x0F0F0F0F);
  const __m512i low2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xFF);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = tiles + b * (kFifth ? 2816 : 2304);
    const int8_t* x = xq + 256 * b;
    const int16_t* s16 = sums + 16 * b;
    const auto load = [tile](int at) CONVOY_TARGET_VNNI { return _mm512_loadu_si512(tile + at); };
    // UnpackQ4KScales' decoding, 16 rows a vector: byte s of scales[0] is sub-block s's scale (s <
    // 4), of scales[1] sub-block s + 4's; the mins alike.
    const __m512i w0 = load(64), w1 = load(128), w2 = load(192);
    const __m512i scales[2] = {
        _mm512_and_si512(w0, low6),
        _mm512_or_si512(_mm512_and_si512(w2, low4w),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), low2), 4))};
    const __m512i mins[2] = {
        _mm512_and_si512(w1, low6),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), low4w),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), low2), 4))};
    __m512i total = _mm512_setzero_si512(), m = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      // Sub-blocks 2p (the low nibbles of dwords 8p .. 8p + 7) and 2p + 1 (their high nibbles,
      // kept in place: 16 times the quants, so their sum is shifted back, exactly).
      __m512i low = _mm512_setzero_si512(), high = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        const __m512i v = load(KQuantsAt(kType) + 64 * (8 * p + c));
        __m512i low_q = _mm512_and_si512(v, low4), high_q;
        if (kFifth) {
          const __m512i bits = load(256 + 64 * c);
          low_q = _mm512_or_si512(low_q, _mm512_and_si512(Shift4(bits, 2 * p), bit4));
          high_q = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4),
                                   _mm512_and_si512(Shift4(bits, 2 * p + 1), bit4));
        } else {
          high_q = _mm512_and_si512(v, high4);
        }
        low = _mm512_dpbusd_epi32(low, low_q, _mm512_set1_epi32(Dword(x + 64 * p + 4 * c)));
        high = _mm512_dpbusd_epi32(high, high_q, _mm512_set1_epi32(Dword(x + 64 * p + 32 + 4 * c)));
      }
      for (int i = 0; i < 2; ++i) {
        const int sub = 2 * p + i, shift = 8 * (sub % 4);
        const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(scales[sub / 4], shift), byte);
        const __m512i mi = _mm512_and_si512(_mm512_srli_epi32(mins[sub / 4], shift), byte);
        const __m512i sum = i == 0 ? low : (kFifth ? high : _mm512_srai_epi32(high, 4));
        total = _mm512_add_epi32(total, _mm512_mullo_epi32(sum, sc));
        // mi in both int16 halves: mi * S[2 sub] + mi * S[2 sub + 1].
        m = _mm512_dpwssd_epi32(m, _mm512_or_si512(mi, _mm512_slli_epi32(mi, 16)),
                                _mm512_set1_epi32(Dword(s16 + 2 * sub)));
      }
    }
    const __m512 dxv = _mm512_set1_ps(dxs[b]);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32)));
    const __m512 dm = _mm512_sub_ps(_mm512_setzero_ps(), dmin);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, dxv), acc);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dm, dxv), acc);
  }
  _mm512_storeu_ps(out, acc);
}

// OneRowQ4KVnni's integers and fp32 steps with AVX2: rows 8h .. 8h + 7 in 8 lanes, both halves
// of a tile's lines in one pass; maddubs + madd for vpdpbusd (pairs exact: q <= 31).
template <bool kFifth>
CONVOY_TARGET_AVX2_FMA void OneRowQ4KAvx2(const std::byte* tiles, int64_t blocks, const int8_t* xq,
                                          const int16_t* sums, const float* dxs, float* out) {
  constexpr GgmlType kType = kFifth ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const __m256i ones = _mm256_set1_epi16(1), byte = _mm256_set1_epi32(0xFF);
  const __m256i low6 = _mm256_set1_epi32(0x3F3F3F3F), low4w = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i low2 = _mm256_set1_epi32(0x03030303);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = tiles + b * (kFifth ? 2816 : 2304);
    const int8_t* x = xq + 256 * b;
    const int16_t* s16 = sums + 16 * b;
    for (int h = 0; h < 2; ++h) {
      const auto load = [tile, h](int at) CONVOY_TARGET_AVX2_FMA {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at + 32 * h));
      };
      const __m256i w0 = load(64), w1 = load(128), w2 = load(192);
      const __m256i scales[2] = {
          _mm256_and_si256(w0, low6),
          _mm256_or_si256(_mm256_and_si256(w2, low4w),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), low2), 4))};
      const __m256i mins[2] = {
          _mm256_and_si256(w1, low6),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), low4w),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), low2), 4))};
      __m256i total = _mm256_setzero_si256(), m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        __m256i low = _mm256_setzero_si256(), high = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i v = load(KQuantsAt(kType) + 64 * (8 * p + c));
          __m256i low_q = _mm256_and_si256(v, low4);
          __m256i high_q = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if (kFifth) {
            const __m256i bits = load(256 + 64 * c);
            low_q = _mm256_or_si256(low_q, _mm256_and_si256(Shift4(bits, 2 * p), bit4));
            high_q = _mm256_or_si256(high_q, _mm256_and_si256(Shift4(bits, 2 * p + 1), bit4));
          }
          const __m256i x_low = _mm256_set1_epi32(Dword(x + 64 * p + 4 * c));
          const __m256i x_high = _mm256_set1_epi32(Dword(x + 64 * p + 32 + 4 * c));
          low = _mm256_add_epi32(low, _mm256_madd_epi16(_mm256_maddubs_epi16(low_q, x_low), ones));
          high =
              _mm256_add_epi32(high, _mm256_madd_epi16(_mm256_maddubs_epi16(high_q, x_high), ones));
        }
        for (int i = 0; i < 2; ++i) {
          const int sub = 2 * p + i, shift = 8 * (sub % 4);
          const __m256i sc = _mm256_and_si256(_mm256_srli_epi32(scales[sub / 4], shift), byte);
          const __m256i mi = _mm256_and_si256(_mm256_srli_epi32(mins[sub / 4], shift), byte);
          total = _mm256_add_epi32(total, _mm256_mullo_epi32(i == 0 ? low : high, sc));
          m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_or_si256(mi, _mm256_slli_epi32(mi, 16)),
                                                    _mm256_set1_epi32(Dword(s16 + 2 * sub))));
        }
      }
      const __m256 dxv = _mm256_set1_ps(dxs[b]);
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * h)));
      const __m256 dmin =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 32 + 16 * h)));
      const __m256 dm = _mm256_sub_ps(_mm256_setzero_ps(), dmin);
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, dxv), acc[h]);
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dm, dxv), acc[h]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// The same for Q6_K, the tile's quants read front to back (kQ6KFields' order).
CONVOY_TARGET_VNNI void OneRowQ6KVnni(const std::byte* tiles, int64_t blocks, const int8_t* xq,
                                      const int16_t* sums, const float* dxs, float* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  // (a & low4) | b, as vpternlogd's truth table: bit (a << 2 | b << 1 | c) of 0xEC.
  const auto join = [low4](__m512i a, __m512i b)
                        CONVOY_TARGET_VNNI { return _mm512_ternarylogic_epi32(a, b, low4, 0xEC); };
  // Words 2i and 2i + 1 of a 32-word vector next to each other: [i, 16 + i] for i < 16.
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = tiles + b * 3360;
    const int8_t* x = xq + 256 * b;
    const int16_t* s16 = sums + 16 * b;
    const auto scale = [tile](int j) CONVOY_TARGET_VNNI {
      return _mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 32 + 16 * j)));
    };
    __m512i total = _mm512_setzero_si512(), m = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      for (int u = 0; u < 2; ++u) {
        // c = 4u .. 4u + 3 feed sub-blocks 8h + u, + 2, + 4, + 6 (chunks c, c + 8, c + 16, c + 24
        // of the half).
        __m512i p[4];
        for (int i = 0; i < 4; ++i) p[i] = _mm512_setzero_si512();
        for (int c = 4 * u; c < 4 * u + 4; ++c) {
          const std::byte* at = tile + 288 + 3 * 64 * (8 * h + c);
          const __m512i lo_a = _mm512_loadu_si512(at), lo_b = _mm512_loadu_si512(at + 64);
          const __m512i hq = _mm512_loadu_si512(at + 128);
          const __m512i q[4] = {
              join(lo_a, _mm512_and_si512(_mm512_slli_epi16(hq, 4), bits45)),
              join(lo_b, _mm512_and_si512(_mm512_slli_epi16(hq, 2), bits45)),
              join(_mm512_srli_epi16(lo_a, 4), _mm512_and_si512(hq, bits45)),
              join(_mm512_srli_epi16(lo_b, 4), _mm512_and_si512(_mm512_srli_epi16(hq, 2), bits45))};
          for (int i = 0; i < 4; ++i) {
            const int chunk = 32 * h + 8 * i + c;
            p[i] = _mm512_dpbusd_epi32(p[i], q[i], _mm512_set1_epi32(Dword(x + 4 * chunk)));
          }
        }
        for (int i = 0; i < 4; ++i) {
          total = _mm512_add_epi32(total, _mm512_mullo_epi32(p[i], scale(8 * h + 2 * i + u)));
        }
      }
    }
    for (int pair = 0; pair < 8; ++pair) {
      const __m512i both = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32 + 32 * pair)));
      m = _mm512_dpwssd_epi32(m, _mm512_permutexvar_epi16(interleave, both),
                              _mm512_set1_epi32(Dword(s16 + 2 * pair)));
    }
    const __m512 dxv = _mm512_set1_ps(dxs[b]);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    const __m512 dm = _mm512_mul_ps(d, _mm512_set1_ps(-32.0f));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, dxv), acc);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dm, dxv), acc);
  }
  _mm512_storeu_ps(out, acc);
}

// ---- One activation row against a group's Q2_K (or Q3_K) tiles, straight to registers: the
// integers and fp32 steps of UnpackQ23K + RowVnni. Per superblock, sub-block 8h + 2j + u takes
// chunks 32h + 8j + c for c = 4u .. 4u + 3 (UnpackQ23K's order); its scale is in scale dword
// 2h + j / 2, at byte (8h + 2j + u) % 4.
template <bool kThird>
CONVOY_TARGET_VNNI void OneRowQ23KVnni(const std::byte* tiles, int64_t blocks, const int8_t* xq,
                                       const int16_t* sums, const float* dxs, float* out) {
  constexpr GgmlType kType = kThird ? GgmlType::kQ3_K : GgmlType::kQ2_K;
  constexpr int kTileBytes = kThird ? 1760 : 1344;
  const __m512i low2 = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4);
  const __m512i even = _mm512_set1_epi32(0x00FF00FF);
  const __m512i low4w = _mm512_set1_epi32(0x0F0F0F0F);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = tiles + b * kTileBytes;
    const int8_t* x = xq + 256 * b;
    const int16_t* s16 = sums + 16 * b;
    const auto load = [tile](int at) CONVOY_TARGET_VNNI { return _mm512_loadu_si512(tile + at); };
    __m512i scales[4];
    Q23KScaleDwords(kThird, tile, scales);
    __m512i total = _mm512_setzero_si512(), m = _mm512_setzero_si512();
    // The tile's lines front to back: u = 0 reads lines 0-3, u = 1 lines 4-7.
    for (int u = 0; u < 2; ++u) {
      __m512i p[2][4];
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 4; ++j) p[h][j] = _mm512_setzero_si512();
      }
      for (int c = 4 * u; c < 4 * u + 4; ++c) {
        const __m512i bits = kThird ? load(Q23KLineAt(kType, c)) : _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
          const __m512i v = load(Q23KQuantAt(kType, h, c));
          for (int j = 0; j < 4; ++j) {
            __m512i q = _mm512_and_si512(_mm512_srli_epi16(v, 2 * j), low2);
            if (kThird) {  // bit 4h + j of each byte to bit 2
              const int bit = 4 * h + j;
              const __m512i moved =
                  bit >= 2 ? _mm512_srli_epi16(bits, bit - 2) : _mm512_slli_epi16(bits, 2 - bit);
              q = _mm512_or_si512(q, _mm512_and_si512(moved, bit2));
            }
            p[h][j] = _mm512_dpbusd_epi32(p[h][j], q,
                                          _mm512_set1_epi32(Dword(x + 4 * (32 * h + 8 * j + c))));
          }
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 4; ++j) {
          total = _mm512_add_epi32(
              total, _mm512_mullo_epi32(p[h][j],
                                        Q23KSc(kThird, Q23KScaleByte(scales, 8 * h + 2 * j + u))));
        }
      }
    }
    // M: the factors of sub-blocks 4i and 4i + 2 (bytes 0 and 2 of dword i), then 4i + 1 and
    // 4i + 3, as int16 pairs.
    for (int i = 0; i < 4; ++i) {
      const __m512i factors =
          kThird ? scales[i] : _mm512_and_si512(_mm512_srli_epi32(scales[i], 4), low4w);
      __m512i pairs[2] = {_mm512_and_si512(factors, even),
                          _mm512_and_si512(_mm512_srli_epi32(factors, 8), even)};
      for (int e = 0; e < 2; ++e) {
        if (kThird) pairs[e] = _mm512_sub_epi16(pairs[e], _mm512_set1_epi16(32));
        const uint32_t s = Pair(s16[4 * i + e], s16[4 * i + e + 2]);
        m = _mm512_dpwssd_epi32(m, pairs[e], _mm512_set1_epi32(static_cast<int32_t>(s)));
      }
    }
    const __m512 dxv = _mm512_set1_ps(dxs[b]);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    const __m512 dm = kThird ? _mm512_mul_ps(d, _mm512_set1_ps(-4.0f))
                             : _mm512_sub_ps(_mm512_setzero_ps(),
                                             _mm512_cvtph_ps(_mm256_loadu_si256(
                                                 reinterpret_cast<const __m256i*>(tile + 32))));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, dxv), acc);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dm, dxv), acc);
  }
  _mm512_storeu_ps(out, acc);
}

// OneRowQ23KVnni's integers and fp32 steps with AVX2: rows 8r .. 8r + 7 in 8 lanes, both halves
// of a tile's lines in one pass; maddubs + madd for vpdpbusd (pairs exact: q <= 7), madd for
// vpdpwssd.
template <bool kThird>
CONVOY_TARGET_AVX2_FMA void OneRowQ23KAvx2(const std::byte* tiles, int64_t blocks, const int8_t* xq,
                                           const int16_t* sums, const float* dxs, float* out) {
  constexpr GgmlType kType = kThird ? GgmlType::kQ3_K : GgmlType::kQ2_K;
  constexpr int kTileBytes = kThird ? 1760 : 1344;
  const __m256i low2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
  const __m256i even = _mm256_set1_epi32(0x00FF00FF);
  const __m256i low4w = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = tiles + b * kTileBytes;
    const int8_t* x = xq + 256 * b;
    const int16_t* s16 = sums + 16 * b;
    for (int r = 0; r < 2; ++r) {
      const auto load = [tile, r](int at) CONVOY_TARGET_AVX2_FMA {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at + 32 * r));
      };
      __m256i scales[4];
      Q23KScaleDwords(kThird, tile + 32 * r, scales);
      __m256i total = _mm256_setzero_si256(), m = _mm256_setzero_si256();
      for (int u = 0; u < 2; ++u) {
        __m256i p[2][4];
        for (int h = 0; h < 2; ++h) {
          for (int j = 0; j < 4; ++j) p[h][j] = _mm256_setzero_si256();
        }
        for (int c = 4 * u; c < 4 * u + 4; ++c) {
          const __m256i bits = kThird ? load(Q23KLineAt(kType, c)) : _mm256_setzero_si256();
          for (int h = 0; h < 2; ++h) {
            const __m256i v = load(Q23KQuantAt(kType, h, c));
            for (int j = 0; j < 4; ++j) {
              __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), low2);
              if (kThird) {
                const int bit = 4 * h + j;
                const __m256i moved =
                    bit >= 2 ? _mm256_srli_epi16(bits, bit - 2) : _mm256_slli_epi16(bits, 2 - bit);
                q = _mm256_or_si256(q, _mm256_and_si256(moved, bit2));
              }
              const __m256i xv = _mm256_set1_epi32(Dword(x + 4 * (32 * h + 8 * j + c)));
              p[h][j] =
                  _mm256_add_epi32(p[h][j], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones));
            }
          }
        }
        for (int h = 0; h < 2; ++h) {
          for (int j = 0; j < 4; ++j) {
            total = _mm256_add_epi32(
                total, _mm256_mullo_epi32(
                           p[h][j], Q23KSc(kThird, Q23KScaleByte(scales, 8 * h + 2 * j + u))));
          }
        }
      }
      for (int i = 0; i < 4; ++i) {
        const __m256i factors =
            kThird ? scales[i] : _mm256_and_si256(_mm256_srli_epi32(scales[i], 4), low4w);
        __m256i pairs[2] = {_mm256_and_si256(factors, even),
                            _mm256_and_si256(_mm256_srli_epi32(factors, 8), even)};
        for (int e = 0; e < 2; ++e) {
          if (kThird) pairs[e] = _mm256_sub_epi16(pairs[e], _mm256_set1_epi16(32));
          const uint32_t s = Pair(s16[4 * i + e], s16[4 * i + e + 2]);
          m = _mm256_add_epi32(
              m, _mm256_madd_epi16(pairs[e], _mm256_set1_epi32(static_cast<int32_t>(s))));
        }
      }
      const __m256 dxv = _mm256_set1_ps(dxs[b]);
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * r)));
      const __m256 dm =
          kThird ? _mm256_mul_ps(d, _mm256_set1_ps(-4.0f))
                 : _mm256_sub_ps(_mm256_setzero_ps(),
                                 _mm256_cvtph_ps(_mm_loadu_si128(
                                     reinterpret_cast<const __m128i*>(tile + 32 + 16 * r))));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, dxv), acc[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dm, dxv), acc[r]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// ---- The 32-value types under the interleaved group contract. A tile's quants need no
// unpacking but the nibbles' split and the fifth bits' OR: Q8_0's flipped quants are vpdpbusd's
// unsigned operand as they are (P = sum (q + 128) xq - 128 * S, exact), and Q4_0's and Q5_0's
// biases come off P the same way (8 S, 16 S).
struct Interleaved {
  int tile_bytes;
  int min_at;     // the 16 rows' m (fp16), or -1
  int high_at;    // the 16 rows' fifth bits (SpreadBits order), or -1
  int quants_at;  // the quants' dwords
  int bias;       // subtracted from q: P = sum q' xq - bias * S
  bool bytes;     // Q8_0: 8 dwords of (flipped) bytes, not 4 of nibbles
};

constexpr Interleaved kQ40I{288, -1, -1, 32, 8, false};
constexpr Interleaved kQ41I{320, 32, -1, 64, 0, false};
constexpr Interleaved kQ50I{352, -1, 32, 96, 16, false};
constexpr Interleaved kQ51I{384, 32, 64, 128, 0, false};
constexpr Interleaved kQ80I{544, -1, -1, 32, 128, true};

// kRows activation rows from r0 against a group's tiles; out[r][w]: row r0 + r, weight row w.
template <const Interleaved& kT, int kRows>
CONVOY_TARGET_VNNI void InterleavedRowsVnni(const std::byte* tiles, int64_t blocks,
                                            const QuantizedRows& x, int64_t r0,
                                            float (*out)[kPackedRows]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit0 = _mm512_set1_epi8(0x01);
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < blocks; ++g) {
    const std::byte* tile = tiles + g * kT.tile_bytes;
    __m512i p[kRows];
    for (int r = 0; r < kRows; ++r) p[r] = _mm512_setzero_si512();
    // Chunk c: values 4c .. 4c + 3 of the 16 rows.
    const auto dot = [&](int c, __m512i q) CONVOY_TARGET_VNNI {
      for (int r = 0; r < kRows; ++r) {
        const int8_t* xq = x.values(r0 + r) + 32 * g + 4 * c;
        p[r] = _mm512_dpbusd_epi32(p[r], q, _mm512_set1_epi32(Dword(xq)));
      }
    };
    if (kT.bytes) {
      for (int c = 0; c < 8; ++c) dot(c, _mm512_loadu_si512(tile + kT.quants_at + 64 * c));
    } else {
      const __m512i high = kT.high_at >= 0 ? _mm512_loadu_si512(tile + kT.high_at) : low4;
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(tile + kT.quants_at + 64 * c);
        __m512i lo = _mm512_and_si512(v, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if (kT.high_at >= 0) {  // bit 8t + c of a row's word: value 4c + t's fifth bit
          lo = _mm512_or_si512(
              lo, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, c), bit0), 4));
          hi = _mm512_or_si512(
              hi, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, c + 4), bit0), 4));
        }
        dot(c, lo);
        dot(c + 4, hi);
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    for (int r = 0; r < kRows; ++r) {
      const int32_t s = x.group_sums(r0 + r)[g];
      const float dx = x.scales(r0 + r)[g];
      const __m512i sum =
          kT.bias != 0 ? _mm512_sub_epi32(p[r], _mm512_set1_epi32(kT.bias * s)) : p[r];
      acc[r] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[r]);
      if (kT.min_at >= 0) {
        const __m512 m =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + kT.min_at)));
        acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(dx * static_cast<float>(s)), acc[r]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

// Calls dot(c, q) for every chunk c of weight rows 8h .. 8h + 7 of a 32-value type's tile: q the
// chunk's quants (values 4c .. 4c + 3), unsigned, or for Q8_0 signed again.
template <const Interleaved& kT, typename Dot>
CONVOY_TARGET_AVX2_FMA inline void ChunksAvx2(const std::byte* tile, int h, const Dot& dot) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit0 = _mm256_set1_epi8(0x01);
  const auto load = [tile, h](int at) CONVOY_TARGET_AVX2_FMA {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + at + 32 * h));
  };
  if (kT.bytes) {
    for (int c = 0; c < 8; ++c) dot(c, _mm256_xor_si256(load(kT.quants_at + 64 * c), flip));
    return;
  }
  const __m256i high = kT.high_at >= 0 ? load(kT.high_at) : low4;
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load(kT.quants_at + 64 * c);
    __m256i lo = _mm256_and_si256(v, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if (kT.high_at >= 0) {
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(high, c), bit0), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(high, c + 4), bit0), 4));
    }
    dot(c, lo);
    dot(c + 4, hi);
  }
}

// One row, 8 weight rows a vector. Q8_0's quants go back to signed and their signs move to x (pairs
// exact: 2 * 128 * 127 < 32767); the other types' quants are at most 31.
template <const Interleaved& kT>
CONVOY_TARGET_AVX2_FMA void InterleavedRowAvx2(const std::byte* tiles, int64_t blocks,
                                               const QuantizedRows& x, int64_t r, float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  // Weight rows 0-7 in acc[0], 8-15 in acc[1]: both halves of a tile's lines in one pass.
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t g = 0; g < blocks; ++g) {
    const std::byte* tile = tiles + g * kT.tile_bytes;
    const int32_t s = x.group_sums(r)[g];
    const float dx = x.scales(r)[g];
    for (int h = 0; h < 2; ++h) {
      __m256i p = _mm256_setzero_si256();
      const auto dot = [&](int c, __m256i q) CONVOY_TARGET_AVX2_FMA {
        const __m256i xv = _mm256_set1_epi32(Dword(x.values(r) + 32 * g + 4 * c));
        const __m256i pairs =
            kT.bytes ? _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xv, q))
                     : _mm256_maddubs_epi16(q, xv);
        p = _mm256_add_epi32(p, _mm256_madd_epi16(pairs, ones));
      };
      ChunksAvx2<kT>(tile, h, dot);
      // Q8_0's P is already signed here: no bias to take off.
      const int bias = kT.bytes ? 0 : kT.bias;
      if (bias != 0) p = _mm256_sub_epi32(p, _mm256_set1_epi32(bias * s));
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * h)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[h]);
      if (kT.min_at >= 0) {
        const __m256 m = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kT.min_at + 16 * h)));
        acc[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(dx * static_cast<float>(s)), acc[h]);
      }
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// kRows (more than one) activation rows from r0 with AVX2: weight rows 8h .. 8h + 7 a pass, each
// group's quants made once for every activation row (InterleavedRowAvx2's operations otherwise).
template <const Interleaved& kT, int kRows>
CONVOY_TARGET_AVX2_FMA void InterleavedRowsAvx2(const std::byte* tiles, int64_t blocks,
                                                const QuantizedRows& x, int64_t r0,
                                                float (*out)[kPackedRows]) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < blocks; ++g) {
      const std::byte* tile = tiles + g * kT.tile_bytes;
      __m256i p[kRows];
      for (int r = 0; r < kRows; ++r) p[r] = _mm256_setzero_si256();
      const auto dot = [&](int c, __m256i q) CONVOY_TARGET_AVX2_FMA {
        // Q8_0: the quants' signs moved to x, as in InterleavedRowAvx2.
        const __m256i magnitude = kT.bytes ? _mm256_abs_epi8(q) : q;
        for (int r = 0; r < kRows; ++r) {
          __m256i xv = _mm256_set1_epi32(Dword(x.values(r0 + r) + 32 * g + 4 * c));
          if (kT.bytes) xv = _mm256_sign_epi8(xv, q);
          p[r] =
              _mm256_add_epi32(p[r], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, xv), ones));
        }
      };
      ChunksAvx2<kT>(tile, h, dot);
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * h)));
      for (int r = 0; r < kRows; ++r) {
        const int32_t s = x.group_sums(r0 + r)[g];
        const float dx = x.scales(r0 + r)[g];
        __m256i sum = p[r];
        if (!kT.bytes && kT.bias != 0) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(kT.bias * s));
        acc[r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[r]);
        if (kT.min_at >= 0) {
          const __m256 m = _mm256_cvtph_ps(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + kT.min_at + 16 * h)));
          acc[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(dx * static_cast<float>(s)), acc[r]);
        }
      }
    }
    for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(out[r] + 8 * h, acc[r]);
  }
}

// Value v (0 .. 31) of row w in a tile, as the contract's q (before the bias).
template <const Interleaved& kT>
int TileQuant(const std::byte* tile, int w, int v) {
  const auto byte = [tile, w](int at, int c, int t) {
    return static_cast<int>(static_cast<uint8_t>(tile[at + 64 * c + 4 * w + t]));
  };
  if (kT.bytes) return static_cast<int8_t>(byte(kT.quants_at, v / 4, v % 4) ^ 0x80);
  const int c = v % 16 / 4, t = v % 4;
  int q = v < 16 ? byte(kT.quants_at, c, t) & 15 : byte(kT.quants_at, c, t) >> 4;
  if (kT.high_at >= 0) {
    uint32_t high;
    std::memcpy(&high, tile + kT.high_at + 4 * w, 4);
    q |= static_cast<int>((high >> (8 * t + v / 4)) & 1) << 4;
  }
  return q;
}

template <const Interleaved& kT>
void InterleavedRowPortable(const std::byte* tiles, int64_t blocks, const QuantizedRows& x,
                            int64_t r, float* out) {
  for (int w = 0; w < kPackedRows; ++w) {
    float acc = 0.0f;
    for (int64_t g = 0; g < blocks; ++g) {
      const std::byte* tile = tiles + g * kT.tile_bytes;
      const int32_t s = x.group_sums(r)[g];
      const float dx = x.scales(r)[g];
      int32_t p = 0;
      for (int v = 0; v < 32; ++v) p += TileQuant<kT>(tile, w, v) * x.values(r)[32 * g + v];
      if (!kT.bytes) p -= kT.bias * s;
      acc = std::fma(static_cast<float>(p), FP16ToFloat(HalfAt(tile + 2 * w)) * dx, acc);
      if (kT.min_at >= 0) {
        acc = std::fma(FP16ToFloat(HalfAt(tile + kT.min_at + 2 * w)), dx * static_cast<float>(s),
                       acc);
      }
    }
    out[w] = acc;
  }
}

template <const Interleaved& kT>
void InterleavedMatmul(const std::byte* packed, int64_t n, int64_t k, const QuantizedRows& x,
                       float* y, int64_t ldy, QuantPath path, int64_t first_group,
                       int64_t end_group) {
  const int64_t m = x.m(), blocks = k / 32;
  for (int64_t g = first_group; g < end_group; ++g) {
    const std::byte* tiles = packed + g * blocks * kT.tile_bytes;
    const int64_t count = std::min(kPackedRows, n - g * kPackedRows);
    float out[4][kPackedRows];
    for (int64_t r = 0; r < m;) {
      int rows = 1;
      if (path == QuantPath::kAvx512Vnni && r + 4 <= m) {
        InterleavedRowsVnni<kT, 4>(tiles, blocks, x, r, out);
        rows = 4;
      } else if (path == QuantPath::kAvx512Vnni) {
        InterleavedRowsVnni<kT, 1>(tiles, blocks, x, r, out);
      } else if (path == QuantPath::kAvx2 && r + 4 <= m) {
        InterleavedRowsAvx2<kT, 4>(tiles, blocks, x, r, out);
        rows = 4;
      } else if (path == QuantPath::kAvx2) {
        InterleavedRowAvx2<kT>(tiles, blocks, x, r, out[0]);
      } else {
        InterleavedRowPortable<kT>(tiles, blocks, x, r, out[0]);
      }
      for (int i = 0; i < rows; ++i) {
        std::memcpy(y + (r + i) * ldy + g * kPackedRows, out[i], sizeof(float) * count);
      }
      r += rows;
    }
  }
}

using TileUnpackFn = void (*)(GgmlType, const std::byte*, Tile*);
using RowFn = void (*)(const Tile&, const int8_t*, const int16_t*, float, float*);

struct Scratch {
  Tile tile;
  std::vector<float> acc;
};

}  // namespace

bool IsPackedType(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      return true;
    default:
      return false;
  }
}

bool IsSuperblockType(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K ||
         IsQ23K(type);
}

int64_t PackedBytes(GgmlType type, int64_t n, int64_t k) {
  return (n + kPackedRows - 1) / kPackedRows * (k / LayoutOf(type).block_elements) *
         TileBytes(type);
}

void PackRows(GgmlType type, const std::byte* raw, int64_t n, int64_t k, std::byte* packed) {
  const Layout& layout = LayoutOf(type);
  const int64_t blocks = k / layout.block_elements, groups = (n + kPackedRows - 1) / kPackedRows;
  const int64_t row_bytes = blocks * layout.block_bytes, tile_bytes = TileBytes(type);
  static const std::byte kZeros[256] = {};
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < blocks; ++b) {
      std::byte* tile = packed + (g * blocks + b) * tile_bytes;
      for (int64_t w = 0; w < kPackedRows; ++w) {
        const int64_t j = g * kPackedRows + w;
        const std::byte* block = j < n ? raw + j * row_bytes + b * layout.block_bytes : kZeros;
        for (int f = 0; f < layout.field_count; ++f) {
          const Field& field = layout.fields[f];
          for (int i = 0; i < field.count; ++i) {
            CopyUnit(field, tile + field.packed_at + (kPackedRows * field.slot(i) + w) * field.unit,
                     block + field.raw_at + i * field.unit, /*to_block=*/false);
          }
        }
      }
    }
  }
}

void CopyPackedRow(GgmlType type, const std::byte* packed, int64_t k, int64_t j, std::byte* raw) {
  const Layout& layout = LayoutOf(type);
  const int64_t blocks = k / layout.block_elements, tile_bytes = TileBytes(type);
  const int64_t g = j / kPackedRows, w = j % kPackedRows;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* tile = packed + (g * blocks + b) * tile_bytes;
    std::byte* block = raw + b * layout.block_bytes;
    for (int f = 0; f < layout.field_count; ++f) {
      const Field& field = layout.fields[f];
      for (int i = 0; i < field.count; ++i) {
        CopyUnit(field, block + field.raw_at + i * field.unit,
                 tile + field.packed_at + (kPackedRows * field.slot(i) + w) * field.unit,
                 /*to_block=*/true);
      }
    }
  }
}

void PackedMatmul(GgmlType type, const std::byte* packed, int64_t n, int64_t k,
                  const QuantizedRows& x, float* y, int64_t ldy, QuantPath path,
                  int64_t first_group, int64_t end_group) {
  switch (type) {
    case GgmlType::kQ4_0:
      return InterleavedMatmul<kQ40I>(packed, n, k, x, y, ldy, path, first_group, end_group);
    case GgmlType::kQ4_1:
      return InterleavedMatmul<kQ41I>(packed, n, k, x, y, ldy, path, first_group, end_group);
    case GgmlType::kQ5_0:
      return InterleavedMatmul<kQ50I>(packed, n, k, x, y, ldy, path, first_group, end_group);
    case GgmlType::kQ5_1:
      return InterleavedMatmul<kQ51I>(packed, n, k, x, y, ldy, path, first_group, end_group);
    case GgmlType::kQ8_0:
      return InterleavedMatmul<kQ80I>(packed, n, k, x, y, ldy, path, first_group, end_group);
    default:
      break;
  }
  const TileUnpackFn unpack = path == QuantPath::kAvx512Vnni ? UnpackVnni
                              : path == QuantPath::kAvx2     ? UnpackAvx2
                                                             : UnpackPortable;
  const RowFn row = path == QuantPath::kAvx512Vnni ? RowVnni
                    : path == QuantPath::kAvx2     ? RowAvx2
                                                   : RowPortable;
  const int64_t m = x.m(), blocks = k / kSuperblock, tile_bytes = TileBytes(type);
  thread_local Scratch scratch;
  scratch.acc.resize(m * kPackedRows);
  for (int64_t g = first_group; g < end_group; ++g) {
    if (m == 1 && path == QuantPath::kAvx2 &&
        (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K)) {
      float out[kPackedRows];
      (type == GgmlType::kQ4_K ? OneRowQ4KAvx2<false>
                               : OneRowQ4KAvx2<true>)(packed + g * blocks * tile_bytes, blocks,
                                                      x.superblock_values(0), x.superblock_sums(0),
                                                      x.superblock_scales(0), out);
      std::memcpy(y + g * kPackedRows, out,
                  sizeof(float) * std::min(kPackedRows, n - g * kPackedRows));
      continue;
    }
    if (m == 1 && IsQ23K(type) && path != QuantPath::kPortable) {
      float out[kPackedRows];
      const bool third = type == GgmlType::kQ3_K;
      const auto kernel = path == QuantPath::kAvx512Vnni
                              ? (third ? OneRowQ23KVnni<true> : OneRowQ23KVnni<false>)
                              : (third ? OneRowQ23KAvx2<true> : OneRowQ23KAvx2<false>);
      kernel(packed + g * blocks * tile_bytes, blocks, x.superblock_values(0), x.superblock_sums(0),
             x.superblock_scales(0), out);
      std::memcpy(y + g * kPackedRows, out,
                  sizeof(float) * std::min(kPackedRows, n - g * kPackedRows));
      continue;
    }
    if (m == 1 && path == QuantPath::kAvx512Vnni) {
      // One row: the tiles go straight to registers.
      float out[kPackedRows];
      (type == GgmlType::kQ4_K   ? OneRowQ4KVnni<false>
       : type == GgmlType::kQ5_K ? OneRowQ4KVnni<true>
                                 : OneRowQ6KVnni)(packed + g * blocks * tile_bytes, blocks,
                                                  x.superblock_values(0), x.superblock_sums(0),
                                                  x.superblock_scales(0), out);
      std::memcpy(y + g * kPackedRows, out,
                  sizeof(float) * std::min(kPackedRows, n - g * kPackedRows));
      continue;
    }
    std::fill(scratch.acc.begin(), scratch.acc.end(), 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const std::byte* tile = packed + (g * blocks + b) * tile_bytes;
      unpack(type, tile, &scratch.tile);
      int64_t r = 0;
      if (path != QuantPath::kPortable) {
        for (; r + 4 <= m; r += 4) {
          const int8_t* xq[4];
          const int16_t* sums[4];
          float dx[4];
          float* acc[4];
          for (int i = 0; i < 4; ++i) {
            xq[i] = x.superblock_values(r + i) + kSuperblock * b;
            sums[i] = x.superblock_sums(r + i) + 16 * b;
            dx[i] = x.superblock_scales(r + i)[b];
            acc[i] = scratch.acc.data() + kPackedRows * (r + i);
          }
          if (path == QuantPath::kAvx512Vnni) {
            RowsVnni<4>(scratch.tile, xq, sums, dx, acc);
          } else {
            RowsAvx2<4>(scratch.tile, xq, sums, dx, acc);
          }
        }
      }
      for (; r < m; ++r) {
        row(scratch.tile, x.superblock_values(r) + kSuperblock * b, x.superblock_sums(r) + 16 * b,
            x.superblock_scales(r)[b], scratch.acc.data() + kPackedRows * r);
      }
    }
    const int64_t count = std::min(kPackedRows, n - g * kPackedRows);
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(y + r * ldy + g * kPackedRows, scratch.acc.data() + kPackedRows * r,
                  sizeof(float) * count);
    }
  }
}

}  // namespace convoy::quant
