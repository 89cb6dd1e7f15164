// The CUDA kernels' block decoder (kernels/gguf_blocks.cuh), compiled here by the host compiler,
// against ggml's reference dequantizer (model/gguf_dequantize.h): the same bits for every value of
// random blocks, blocks with extreme, subnormal, zero, infinite and NaN scales, all-zero and
// all-ones blocks, in rows of several blocks. Needs no GPU: a layout error in the decoder the GPU
// runs shows here. Compiled with -ffp-contract=off, as the reference is (see the header).
#include "kernels/gguf_blocks.cuh"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"

namespace convoy {
namespace {

using kernels::GgufBlockType;

constexpr GgufBlockType kTypes[] = {
    GgufBlockType::kQ4_0, GgufBlockType::kQ4_1, GgufBlockType::kQ5_0, GgufBlockType::kQ5_1,
    GgufBlockType::kQ8_0, GgufBlockType::kQ2_K, GgufBlockType::kQ3_K, GgufBlockType::kQ4_K,
    GgufBlockType::kQ5_K, GgufBlockType::kQ6_K};

GgmlType ToGgml(GgufBlockType type) { return static_cast<GgmlType>(static_cast<int32_t>(type)); }

// Byte offsets of a block's fp16 scales (d, and m or dmin where the type has one).
std::vector<int> ScaleOffsets(GgufBlockType type) {
  switch (type) {
    case GgufBlockType::kQ4_0:
    case GgufBlockType::kQ5_0:
    case GgufBlockType::kQ8_0:
      return {0};
    case GgufBlockType::kQ4_1:
    case GgufBlockType::kQ5_1:
    case GgufBlockType::kQ4_K:
    case GgufBlockType::kQ5_K:
      return {0, 2};
    case GgufBlockType::kQ2_K:
      return {80, 82};
    case GgufBlockType::kQ3_K:
      return {108};
    case GgufBlockType::kQ6_K:
      return {208};
  }
  return {};
}

// fp16 bit patterns a scale takes in the test: ordinary ones, the largest finite, the smallest
// normal and subnormal, both zeros, infinities and a NaN.
constexpr uint16_t kExtremeScales[] = {0x3c00, 0x2e66, 0xb800, 0x7bff, 0xfbff, 0x0400,
                                       0x0001, 0x8001, 0x0000, 0x8000, 0x7c00, 0xfc00,
                                       0x7e00, 0x13ff, 0x1000, 0x5bff};

// `blocks` blocks: random bytes, then each scale either a random normal fp16 or, one time in
// three, one of kExtremeScales; block 0 all zeros and block 1 all 0xff bytes.
std::vector<uint8_t> RandomBlocks(GgufBlockType type, int blocks, uint32_t seed) {
  const int bytes = kernels::GgufBlockBytes(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> data(static_cast<size_t>(blocks) * bytes);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < blocks; ++i) {
    uint8_t* block = data.data() + static_cast<size_t>(i) * bytes;
    if (i == 0 || i == 1) {
      std::memset(block, i == 0 ? 0x00 : 0xff, bytes);
      continue;
    }
    for (int offset : ScaleOffsets(type)) {
      uint16_t bits;
      if (rng() % 3 == 0) {
        bits = kExtremeScales[rng() % std::size(kExtremeScales)];
      } else {
        // Sign, an exponent of 2^-14 .. 2^15, any mantissa.
        bits =
            static_cast<uint16_t>((rng() & 0x8000u) | ((1 + rng() % 30) << 10) | (rng() & 0x3ff));
      }
      block[offset] = static_cast<uint8_t>(bits & 0xff);
      block[offset + 1] = static_cast<uint8_t>(bits >> 8);
    }
  }
  return data;
}

std::string Name(GgufBlockType type) { return GgmlTypeName(ToGgml(type)); }

TEST(GgufBlocks, SizesAreGgmls) {
  for (GgufBlockType type : kTypes) {
    const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
    ASSERT_NE(info, nullptr) << static_cast<int>(type);
    EXPECT_EQ(kernels::GgufBlockElements(type), info->block_elements) << Name(type);
    EXPECT_EQ(kernels::GgufBlockBytes(type), info->block_bytes) << Name(type);
    EXPECT_TRUE(kernels::IsGgufBlockType(static_cast<int32_t>(type))) << Name(type);
    EXPECT_TRUE(CanDequantize(ToGgml(type))) << Name(type);
  }
  for (int32_t other : {0, 1, 4, 5, 9, 15, 16, 30, -1}) {
    EXPECT_FALSE(kernels::IsGgufBlockType(other)) << other;
  }
  EXPECT_EQ(kernels::GgufRowBytes(GgufBlockType::kQ4_K, 4096), 16 * 144);
  EXPECT_EQ(kernels::GgufRowBytes(GgufBlockType::kQ8_0, 96), 3 * 34);
}

// Each row of 4 blocks decoded one group at a time, every group, against the reference's row.
TEST(GgufBlocks, EveryGroupHasTheReferenceBits) {
  constexpr int kBlocksPerRow = 4, kRows = 300;
  for (GgufBlockType type : kTypes) {
    SCOPED_TRACE(Name(type));
    const int64_t k = int64_t{kBlocksPerRow} * kernels::GgufBlockElements(type);
    const int64_t row_bytes = kernels::GgufRowBytes(type, k);
    const std::vector<uint8_t> data =
        RandomBlocks(type, kBlocksPerRow * kRows, 1234u + static_cast<uint32_t>(type));
    std::vector<float> want(k), got(k);
    int64_t mismatches = 0, nonfinite = 0, zeros = 0;
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* row = data.data() + r * row_bytes;
      DequantizeValues(ToGgml(type), reinterpret_cast<const std::byte*>(row), k, want.data());
      std::fill(got.begin(), got.end(), -12345.0f);
      kernels::DispatchGgufBlockType(type, [&](auto tag) {
        for (int64_t g = 0; g < k / kernels::kGgufGroup; ++g) {
          kernels::DecodeGgufRowGroup<decltype(tag)::value>(row, g, got.data() + 32 * g);
        }
      });
      for (int64_t i = 0; i < k; ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
          if (++mismatches <= 5) {
            ADD_FAILURE() << "row " << r << " value " << i << ": decoded " << got[i]
                          << ", reference " << want[i];
          }
        }
        nonfinite += std::isfinite(want[i]) ? 0 : 1;
        zeros += want[i] == 0.0f ? 1 : 0;
      }
    }
    EXPECT_EQ(mismatches, 0);
    // The inputs reached what they are meant to: non-finite scales and all-zero blocks.
    EXPECT_GT(nonfinite, 0);
    EXPECT_GE(zeros, k / kBlocksPerRow);
  }
}

// Two hand-made blocks whose values are known without the reference: a layout error common to
// both decoders would pass the comparison above, not this.
TEST(GgufBlocks, HandMadeBlocks) {
  // Q4_0, d = 1: value l is nibble l - 8; low nibbles l, high nibbles 15 - l.
  std::vector<uint8_t> q4(18);
  q4[1] = 0x3c;
  for (int l = 0; l < 16; ++l) q4[2 + l] = static_cast<uint8_t>(l | ((15 - l) << 4));
  float out[32];
  kernels::DecodeGgufGroup<GgufBlockType::kQ4_0>(q4.data(), 0, out);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[l], static_cast<float>(l - 8)) << l;
    EXPECT_EQ(out[16 + l], static_cast<float>(7 - l)) << l;
  }
  // Q6_K, d = 0.5, every scale 2, every quant 33 (low nibble 1, high pair 2): all values 1, but
  // group 5 (h = 1, j = 1) whose scale bytes 10, 11 are -4 and 6 and whose quants are 32 + l.
  std::vector<uint8_t> q6(210, 0);
  for (int i = 0; i < 128; ++i) q6[i] = 0x11;
  for (int i = 0; i < 64; ++i) q6[128 + i] = 0xaa;
  for (int s = 0; s < 16; ++s) q6[192 + s] = 2;
  q6[208] = 0x00;
  q6[209] = 0x38;  // 0.5
  q6[192 + 10] = static_cast<uint8_t>(-4);
  q6[192 + 11] = 6;
  // Group 5 reads low nibbles from byte 64 + 32 + l (low nibble, j = 1 < 2) and high pairs from
  // bits 2..3 of byte 128 + 32 + l: q = 32 + l means low nibble l % 16, high pair 2 + l / 16.
  for (int l = 0; l < 32; ++l) {
    q6[96 + l] = static_cast<uint8_t>((q6[96 + l] & 0xf0) | (l % 16));
    q6[160 + l] = static_cast<uint8_t>((q6[160 + l] & ~0x0c) | ((2 + l / 16) << 2));
  }
  for (int g = 0; g < 8; ++g) {
    kernels::DecodeGgufGroup<GgufBlockType::kQ6_K>(q6.data(), g, out);
    for (int l = 0; l < 32; ++l) {
      const float want = g != 5 ? 1.0f : (l < 16 ? -2.0f : 3.0f) * static_cast<float>(l);
      EXPECT_EQ(out[l], want) << "group " << g << " value " << l;
    }
  }
}

}  // namespace
}  // namespace convoy
