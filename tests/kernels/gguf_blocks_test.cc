// The CUDA kernels' block decoder (kernels/gguf_blocks.cuh), compiled here by the host compiler,
// against ggml's reference dequantizer (model/gguf_dequantize.h): the same bits for every value of
// random blocks of amplitudes from 2^-30 to 2^19, blocks with extreme, subnormal, zero, infinite
// and NaN scales, all-zero and all-ones blocks, in rows of several blocks. Needs no GPU: a layout
// error in the decoder the GPU runs shows here. Compiled with -ffp-contract=off, as the reference
// is (see the header).
#include "kernels/gguf_blocks.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/random_gguf_blocks.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"

namespace convoy {
namespace {

using kernels::GgufBlockType;

using testing::kAllGgufBlockTypes;
using testing::RandomGgufBlocks;
using testing::ScaleMode;

GgmlType ToGgml(GgufBlockType type) { return static_cast<GgmlType>(static_cast<int32_t>(type)); }

std::string Name(GgufBlockType type) { return GgmlTypeName(ToGgml(type)); }

TEST(GgufBlocks, SizesAreGgmls) {
  for (GgufBlockType type : kAllGgufBlockTypes) {
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
  for (GgufBlockType type : kAllGgufBlockTypes) {
    SCOPED_TRACE(Name(type));
    const int64_t k = int64_t{kBlocksPerRow} * kernels::GgufBlockElements(type);
    std::vector<float> want(k), got(k);
    int64_t mismatches = 0, nonfinite = 0, zeros = 0;
    for (int r = 0; r < kRows; ++r) {
      // Amplitudes from 2^-30 to 2^19 (scales down to fp16's subnormals and up to its largest),
      // extreme, infinite and NaN scales, all-zero and all-ones blocks.
      const std::vector<uint8_t> data =
          RandomGgufBlocks(type, kBlocksPerRow, 1234u * (r + 1) + static_cast<uint32_t>(type),
                           std::ldexp(1.0f, r % 50 - 30), ScaleMode::kAnyExtremes);
      const uint8_t* row = data.data();
      DequantizeValues(ToGgml(type), reinterpret_cast<const std::byte*>(row), k, want.data());
      std::fill(got.begin(), got.end(), -12345.0f);
      kernels::DispatchGgufBlockType(type, [&](auto tag) {
        for (int64_t g = 0; g < k / kernels::kGgufGroup; ++g) {
          kernels::DecodeGgufRowGroup<decltype(tag)::value>(row, g, got.data() + 32 * g);
        }
      });
      for (int64_t i = 0; i < k; ++i) {
        // Bits, but for a NaN's sign and payload: which operand's NaN an addition keeps depends
        // on the order the compiler gives the operands (the ASan build's differs).
        const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
        if (!both_nan && std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
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
