// The portable binary16 conversions (used where the compiler has no _Float16) against the
// compiler's own, on every half and on a million floats around every rounding case.
#include "common/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace convoy {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(HalfTest, EveryHalfConvertsToTheSameFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = FP16ToFloat(static_cast<uint16_t>(h));
    const float got = FP16ToFloatPortable(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(Bits(got), Bits(want)) << h;
    }
  }
}

TEST(HalfTest, FloatsRoundToTheSameHalf) {
  std::mt19937 rng(3);
  int checked = 0;
  auto check = [&](float f) {
    const uint16_t want = FloatToFP16(f), got = FloatToFP16Portable(f);
    if (std::isnan(f)) {
      EXPECT_EQ(got & 0x7c00u, 0x7c00u);
      EXPECT_NE(got & 0x3ffu, 0u);
    } else {
      ASSERT_EQ(got, want) << f << " bits " << Bits(f);
    }
    ++checked;
  };
  // Every half's value and the floats just around the midpoints to its neighbours: the ties.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float value = FP16ToFloatPortable(static_cast<uint16_t>(h));
    const float next = FP16ToFloatPortable(static_cast<uint16_t>(h + 1));
    const float mid = value + (next - value) / 2;
    for (float f : {value, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      check(f);
      check(-f);
    }
  }
  for (int i = 0; i < 1000000; ++i) check(FromBits(static_cast<uint32_t>(rng())));
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY, 0x1p-24f,
                  0x1p-25f, 0x1.8p-25f, 0x1p-26f, 1e-30f}) {
    check(f);
  }
  EXPECT_GT(checked, 1000000);
}

}  // namespace
}  // namespace convoy
