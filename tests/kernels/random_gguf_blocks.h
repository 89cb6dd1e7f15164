// Random GGUF blocks for the tests of the quantized kernels: random quant bytes with each block's
// fp16 scales set so that its values span about [-amplitude, amplitude], or with extreme scales.
#ifndef CONVOY_TESTS_KERNELS_RANDOM_GGUF_BLOCKS_H_
#define CONVOY_TESTS_KERNELS_RANDOM_GGUF_BLOCKS_H_

#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels/gguf_blocks.cuh"

namespace convoy::testing {

inline constexpr kernels::GgufBlockType kAllGgufBlockTypes[] = {
    kernels::GgufBlockType::kQ4_0, kernels::GgufBlockType::kQ4_1, kernels::GgufBlockType::kQ5_0,
    kernels::GgufBlockType::kQ5_1, kernels::GgufBlockType::kQ8_0, kernels::GgufBlockType::kQ2_K,
    kernels::GgufBlockType::kQ3_K, kernels::GgufBlockType::kQ4_K, kernels::GgufBlockType::kQ5_K,
    kernels::GgufBlockType::kQ6_K};

// A block's fp16 fields: the scale d, and the second one (m or dmin) where the type has one.
struct GgufScaleFields {
  int d = 0;
  int second = -1;  // -1: none
  // |value| reaches about `span` * d; the second field is `second_ratio` * d (Q4_1's and Q5_1's m
  // then centres the values, the K types' dmin shifts them by about half their range).
  float span = 1.0f;
  float second_ratio = 0.0f;
};

inline GgufScaleFields ScaleFields(kernels::GgufBlockType type) {
  using T = kernels::GgufBlockType;
  switch (type) {
    case T::kQ4_0:
      return {0, -1, 8.0f, 0.0f};
    case T::kQ4_1:
      return {0, 2, 15.0f, -7.5f};
    case T::kQ5_0:
      return {0, -1, 16.0f, 0.0f};
    case T::kQ5_1:
      return {0, 2, 31.0f, -15.5f};
    case T::kQ8_0:
      return {0, -1, 128.0f, 0.0f};
    case T::kQ2_K:
      return {80, 82, 45.0f, 1.5f};
    case T::kQ3_K:
      return {108, -1, 128.0f, 0.0f};
    case T::kQ4_K:
      return {0, 2, 945.0f, 7.5f};
    case T::kQ5_K:
      return {0, 2, 1953.0f, 15.5f};
    case T::kQ6_K:
      return {208, -1, 4064.0f, 0.0f};
  }
  return {};
}

enum class ScaleMode {
  kAmplitude,       // every block spans about [-amplitude, amplitude]
  kFiniteExtremes,  // also: one block in 5 scaled by 65504, 2^-24 or 0, and block 0 all zeros
  kAnyExtremes,     // kFiniteExtremes plus infinite and NaN scales, and block 1 all 0xff bytes
};

inline void SetHalf(uint8_t* at, float value) {
  const uint16_t bits = FloatToFP16(value);
  at[0] = static_cast<uint8_t>(bits & 0xff);
  at[1] = static_cast<uint8_t>(bits >> 8);
}

// `blocks` blocks of `type`, back to back.
inline std::vector<uint8_t> RandomGgufBlocks(kernels::GgufBlockType type, int64_t blocks,
                                             uint32_t seed, float amplitude,
                                             ScaleMode mode = ScaleMode::kAmplitude) {
  const int bytes = kernels::GgufBlockBytes(type);
  const GgufScaleFields f = ScaleFields(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> data(static_cast<size_t>(blocks) * bytes);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  const float extremes[] = {65504.0f, 0x1p-24f, 0.0f, INFINITY, -INFINITY, NAN};
  const int num_extremes = mode == ScaleMode::kAnyExtremes ? 6 : 3;
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* block = data.data() + i * bytes;
    if (mode != ScaleMode::kAmplitude && i < (mode == ScaleMode::kAnyExtremes ? 2 : 1)) {
      std::memset(block, i == 0 ? 0x00 : 0xff, bytes);
      continue;
    }
    // Random within a factor of 2 of the nominal scale, either sign.
    const float nominal = amplitude / f.span;
    float d = nominal * (0.5f + std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));
    if (rng() % 2 == 0) d = -d;
    float second = f.second_ratio * std::fabs(d);
    if (mode != ScaleMode::kAmplitude && rng() % 5 == 0) {
      d = extremes[rng() % num_extremes];
      second = extremes[rng() % num_extremes];
    }
    SetHalf(block + f.d, d);
    if (f.second >= 0) SetHalf(block + f.second, second);
  }
  return data;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_KERNELS_RANDOM_GGUF_BLOCKS_H_
