#include "model/gguf_dequantize.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "common/half.h"

namespace convoy {
namespace {

// Block layouts (ggml's, all little-endian; "half" is an IEEE fp16 scale):
//   Q4_0 (32 values, 18 bytes): half d; 16 bytes of nibbles. Value j < 16 is the low nibble of
//        byte j, value j + 16 its high nibble; x = d * (q - 8).
//   Q4_1 (32, 20): half d, half m; nibbles as Q4_0; x = d * q + m.
//   Q5_0 (32, 22): half d; 32 high bits (bit j for value j); nibbles as Q4_0; x = d * (q - 16).
//   Q5_1 (32, 24): half d, half m; high bits and nibbles as Q5_0; x = d * q + m.
//   Q8_0 (32, 34): half d; 32 int8; x = q * d.
//   Q4_K (256, 144): half d, half dmin; 12 bytes holding eight 6-bit scales and mins; 128 bytes
//        of nibbles: 32 bytes per 64 values, low nibbles the first sub-block of 32, high nibbles
//        the second; x = (d * scale) * q - (dmin * min).
//   Q5_K (256, 176): as Q4_K with 32 bytes of high bits after the scales: bit s of byte l is the
//        fifth bit of value l of sub-block s.
//   Q6_K (256, 210): 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales (one per
//        16 values), half d; x = (d * scale) * (q - 32).
//   Q2_K (256, 84): 16 bytes of scales (one per 16 values: scale in the low nibble, min in the
//        high one), 64 bytes of 2-bit quants, half d, half dmin. Value 128 * h + 32 * j + l
//        (l < 32) is bits 2j, 2j + 1 of byte 32 * h + l; x = (d * scale) * q - (dmin * min).
//   Q3_K (256, 110): 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes holding sixteen
//        6-bit scales, half d. Value 128 * h + 32 * j + l takes its low 2 bits as Q2_K does and
//        bit 4h + j of high byte l; x = (d * (scale - 32)) * (low - (high ? 0 : 4)).

float Half(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return FP16ToFloat(bits);
}

uint8_t U8(const std::byte* p, int i) { return static_cast<uint8_t>(p[i]); }

// Nibble `j` (0..31) of a 32-value block whose 16 bytes of nibbles start at `qs`.
int Nibble(const std::byte* qs, int j) {
  return j < 16 ? (U8(qs, j) & 0x0F) : (U8(qs, j - 16) >> 4);
}

void Q4_0Block(const std::byte* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(Nibble(b + 2, j) - 8);
}

void Q4_1Block(const std::byte* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(Nibble(b + 4, j)) + m;
}

int Q5Value(const std::byte* qh, const std::byte* qs, int j) {
  uint32_t high;
  std::memcpy(&high, qh, 4);
  return Nibble(qs, j) | static_cast<int>(((high >> j) & 1u) << 4);
}

void Q5_0Block(const std::byte* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(Q5Value(b + 2, b + 6, j) - 16);
}

void Q5_1Block(const std::byte* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(Q5Value(b + 4, b + 8, j)) + m;
}

void Q8_0Block(const std::byte* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(U8(b + 2, j))) * d;
}

// Scale and min of sub-block s (0..7) from the 12 packed bytes: the first four sub-blocks keep
// theirs in the low 6 bits of bytes s and s + 4; the last four split theirs between a nibble of
// bytes 8..11 and the top 2 bits of bytes 0..7.
void ScaleMin(const std::byte* scales, int s, int& scale, int& min) {
  if (s < 4) {
    scale = U8(scales, s) & 63;
    min = U8(scales, s + 4) & 63;
  } else {
    scale = (U8(scales, s + 4) & 0x0F) | ((U8(scales, s - 4) >> 6) << 4);
    min = (U8(scales, s + 4) >> 4) | ((U8(scales, s) >> 6) << 4);
  }
}

// Q4_K and Q5_K: `qh` is null for Q4_K.
void KBlock(const std::byte* b, const std::byte* qh, const std::byte* qs, float* y) {
  const float d = Half(b), dmin = Half(b + 2);
  const std::byte* scales = b + 4;
  for (int s = 0; s < 8; ++s) {
    int scale, min;
    ScaleMin(scales, s, scale, min);
    const float ds = d * static_cast<float>(scale);
    const float dm = dmin * static_cast<float>(min);
    const std::byte* nibbles = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      int q = (s % 2 == 0) ? (U8(nibbles, l) & 0x0F) : (U8(nibbles, l) >> 4);
      if (qh != nullptr) q |= ((U8(qh, l) >> s) & 1) << 4;
      y[32 * s + l] = ds * static_cast<float>(q) - dm;
    }
  }
}

void Q4_KBlock(const std::byte* b, float* y) { KBlock(b, nullptr, b + 16, y); }
void Q5_KBlock(const std::byte* b, float* y) { KBlock(b, b + 16, b + 48, y); }

void Q2_KBlock(const std::byte* b, float* y) {
  const std::byte* scales = b;
  const std::byte* qs = b + 16;
  const float d = Half(b + 80), dmin = Half(b + 82);
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, j = (v % 128) / 32, l = v % 32;
    const uint8_t sc = U8(scales, v / 16);
    const float dl = d * static_cast<float>(sc & 0x0F);
    const float ml = dmin * static_cast<float>(sc >> 4);
    const int q = (U8(qs, 32 * h + l) >> (2 * j)) & 3;
    y[v] = dl * static_cast<float>(q) - ml;
  }
}

// Scale s (0..15) of a Q3_K block, 0..63, from its 12 packed bytes: the low nibble is in byte s % 8
// (low nibble for s < 8, high for the rest), the top 2 bits in byte 8 + s % 4 at bit 2 * (s / 4).
int Q3_KScale(const std::byte* scales, int s) {
  const int low = s < 8 ? (U8(scales, s) & 0x0F) : (U8(scales, s - 8) >> 4);
  const int high = (U8(scales, 8 + s % 4) >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

void Q3_KBlock(const std::byte* b, float* y) {
  const std::byte* hmask = b;
  const std::byte* qs = b + 32;
  const std::byte* scales = b + 96;
  const float d = Half(b + 108);
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, j = (v % 128) / 32, l = v % 32;
    const float dl = d * static_cast<float>(Q3_KScale(scales, v / 16) - 32);
    const int low = (U8(qs, 32 * h + l) >> (2 * j)) & 3;
    const bool high = ((U8(hmask, l) >> (4 * h + j)) & 1) != 0;
    y[v] = dl * static_cast<float>(low - (high ? 0 : 4));
  }
}

void Q6_KBlock(const std::byte* b, float* y) {
  const std::byte* ql = b;
  const std::byte* qh = b + 128;
  const std::byte* scales = b + 192;
  const float d = Half(b + 208);
  for (int half = 0; half < 2; ++half) {
    // 128 values: 64 bytes of low nibbles and 32 bytes of high pairs. Value 32 * k + l takes
    // the low (k = 0, 1) or high (k = 2, 3) nibble of byte l + 32 * (k % 2) and bits 2k, 2k + 1
    // of high byte l.
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low_byte = U8(ql, 64 * half + l + 32 * (k % 2));
        const int low = k < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
        const int high = (U8(qh, 32 * half + l) >> (2 * k)) & 3;
        const int index = 128 * half + 32 * k + l;
        const float ds = d * static_cast<float>(static_cast<int8_t>(U8(scales, index / 16)));
        y[index] = ds * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

using BlockFunction = void (*)(const std::byte*, float*);

BlockFunction FindBlockFunction(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Q4_0Block;
    case GgmlType::kQ4_1:
      return Q4_1Block;
    case GgmlType::kQ5_0:
      return Q5_0Block;
    case GgmlType::kQ5_1:
      return Q5_1Block;
    case GgmlType::kQ8_0:
      return Q8_0Block;
    case GgmlType::kQ2_K:
      return Q2_KBlock;
    case GgmlType::kQ3_K:
      return Q3_KBlock;
    case GgmlType::kQ4_K:
      return Q4_KBlock;
    case GgmlType::kQ5_K:
      return Q5_KBlock;
    case GgmlType::kQ6_K:
      return Q6_KBlock;
    default:
      return nullptr;
  }
}

}  // namespace

bool CanDequantize(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         FindBlockFunction(type) != nullptr;
}

void DequantizeValues(GgmlType type, const std::byte* src, int64_t num_elements, float* dst) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(num_elements) * sizeof(float));
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < num_elements; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        dst[i] = type == GgmlType::kF16 ? FP16ToFloat(bits) : BF16ToFloat(bits);
      }
      return;
    default:
      break;
  }
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
  const BlockFunction block = FindBlockFunction(type);
  const int64_t blocks = num_elements / info->block_elements;
  for (int64_t i = 0; i < blocks; ++i) {
    block(src + i * info->block_bytes, dst + i * info->block_elements);
  }
}

absl::Status DequantizeRow(const GgufTensor& tensor, int64_t row, float* dst) {
  if (!CanDequantize(tensor.type)) {
    return absl::UnimplementedError(
        absl::StrFormat("tensor '%s': type %s is not supported, expected %s", tensor.name,
                        GgmlTypeName(tensor.type), kDequantizableTypeNames));
  }
  const int64_t row_length = tensor.RowLength();
  const int64_t rows = row_length == 0 ? 0 : tensor.NumElements() / row_length;
  if (row < 0 || row >= rows) {
    return absl::OutOfRangeError(
        absl::StrFormat("tensor '%s': row %d of %d", tensor.name, row, rows));
  }
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(tensor.type));
  const int64_t row_bytes = row_length / info->block_elements * info->block_bytes;
  DequantizeValues(tensor.type, tensor.data + row * row_bytes, row_length, dst);
  return absl::OkStatus();
}

}  // namespace convoy
