// The CPU executor's elementwise operations (SiLU-and-multiply, RMS norm) against double-precision
// references, over widths that leave the last vector partly filled and inputs out to where exp
// under- and overflows.
#include "executor/cpu/ops.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace convoy {
namespace {

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(SiluMulTest, MatchesADoublePrecisionReferenceAtEveryWidthAndRange) {
  for (int64_t inter : {1, 15, 16, 17, 100, 1536}) {
    const int64_t rows = 3;
    std::vector<float> gate_up(rows * 2 * inter), out(rows * inter, -1.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < inter; ++i) {
        // Gates from -120 to 120 (exp(-g) below the smallest and above the largest float), ups
        // of both signs.
        gate_up[r * 2 * inter + i] =
            static_cast<float>(-120.0 + 240.0 * ((i * 7 + r) % 241) / 240.0);
        gate_up[r * 2 * inter + inter + i] = static_cast<float>((i % 5) - 2) * 0.75f + 0.1f;
      }
    }
    SiluMul(gate_up.data(), rows, inter, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gate_up[r * 2 * inter + i], u = gate_up[r * 2 * inter + inter + i];
        const double want = Silu(g) * u;
        const float got = out[r * inter + i];
        ASSERT_TRUE(std::isfinite(got)) << "inter " << inter << " row " << r << " g " << g;
        // exp's polynomial is good to about 1e-6; rounding g * log2(e) to a float adds half an
        // ulp of it, which grows with |g| (3e-6 at g = -120).
        EXPECT_NEAR(got, want, (1.5e-6 + 1e-7 * std::abs(g)) * std::abs(want) + 1e-30)
            << "inter " << inter << " row " << r << " i " << i << " g " << g << " u " << u;
      }
    }
  }
}

TEST(SiluMulTest, SmallGatesKeepTheirPrecision) {
  // Near zero SiLU(g) ~ g / 2: relative error must stay small, not absolute only.
  const int64_t inter = 33;
  std::vector<float> gate_up(2 * inter), out(inter);
  for (int64_t i = 0; i < inter; ++i) {
    gate_up[i] = std::ldexp(1.0f, -static_cast<int>(i));  // 1, 1/2, ... 2^-32
    gate_up[inter + i] = 1.0f;
  }
  SiluMul(gate_up.data(), 1, inter, out.data());
  for (int64_t i = 0; i < inter; ++i) {
    const double want = Silu(gate_up[i]);
    EXPECT_NEAR(out[i], want, 2e-6 * want) << "g = 2^-" << i;
  }
}

double RmsScale(const std::vector<double>& x, float eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  return 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
}

TEST(RmsNormTest, MatchesADoublePrecisionReferenceAloneAndAfterTheResidualAdd) {
  const float eps = 1e-5f;
  for (int64_t dim : {1, 15, 16, 17, 576, 2051}) {
    const int64_t rows = 3;
    std::vector<float> x(rows * dim), delta(rows * dim), weight(dim);
    for (int64_t i = 0; i < rows * dim; ++i) {
      x[i] = static_cast<float>((i * 37) % 101 - 50) / 17.0f;
      delta[i] = static_cast<float>((i * 11) % 23 - 11) / 7.0f;
    }
    for (int64_t i = 0; i < dim; ++i) weight[i] = 0.5f + static_cast<float>(i % 9) / 8.0f;

    std::vector<float> plain(rows * dim, -1.0f), fused(rows * dim, -1.0f), summed = x;
    RmsNorm(x.data(), weight.data(), rows, dim, eps, plain.data());
    AddRmsNorm(summed.data(), delta.data(), weight.data(), rows, dim, eps, fused.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> a(dim), b(dim);
      for (int64_t i = 0; i < dim; ++i) {
        a[i] = x[r * dim + i];
        b[i] = static_cast<double>(x[r * dim + i]) + delta[r * dim + i];
      }
      const double sa = RmsScale(a, eps), sb = RmsScale(b, eps);
      for (int64_t i = 0; i < dim; ++i) {
        const int64_t at = r * dim + i;
        EXPECT_NEAR(summed[at], b[i], 1e-6 * std::abs(b[i])) << "the sum is written back";
        const double want_plain = weight[i] * a[i] * sa, want_fused = weight[i] * b[i] * sb;
        EXPECT_NEAR(plain[at], want_plain, 1e-6 * std::abs(want_plain) + 1e-7)
            << "dim " << dim << " row " << r << " i " << i;
        EXPECT_NEAR(fused[at], want_fused, 1e-6 * std::abs(want_fused) + 1e-7)
            << "dim " << dim << " row " << r << " i " << i;
      }
    }
  }
}

TEST(RmsNormTest, NormalisesInPlace) {
  std::vector<float> x = {3.0f, -4.0f}, weight = {1.0f, 2.0f}, expected(2);
  RmsNorm(x.data(), weight.data(), 1, 2, 0.0f, expected.data());
  RmsNorm(x.data(), weight.data(), 1, 2, 0.0f, x.data());
  EXPECT_EQ(x, expected);
  EXPECT_NEAR(x[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(x[1], 2.0 * -4.0 / std::sqrt(12.5), 1e-6);
}

}  // namespace
}  // namespace convoy
