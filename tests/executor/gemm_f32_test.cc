// The batch-invariant fp32 product (gemm_f32.h): against a double-precision product (accuracy),
// and bit for bit across row counts, row positions, thread counts and code paths (the contract).
#include "executor/cpu/gemm_f32.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace convoy {
namespace {

struct Shape {
  int64_t k, n;
};

// Values in [-1, 1) from a small deterministic generator.
std::vector<float> Values(int64_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < count; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = static_cast<float>(s >> 8) / (1 << 23) - 1.0f;
  }
  return v;
}

bool SameBits(const float* a, const float* b, int64_t count) {
  return std::memcmp(a, b, sizeof(float) * count) == 0;
}

class GemmF32Test : public ::testing::TestWithParam<Shape> {};

TEST_P(GemmF32Test, MatchesADoubleProduct) {
  const auto [k, n] = GetParam();
  const int64_t m = 13;
  const std::vector<float> w = Values(n * k, 1);
  const std::vector<float> x = Values(m * k, 2);
  const PackedF32Matrix matrix(w.data(), n, k);
  // Outputs beyond m * n must stay untouched.
  const float kSentinel = 12345.0f;
  std::vector<float> y(m * n + 16, kSentinel);
  matrix.Product(x.data(), m, y.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double term = static_cast<double>(w[j * k + i]) * x[r * k + i];
        exact += term;
        magnitude += std::abs(term);
      }
      // k fp32 roundings of partial sums, each within half an ulp of the magnitude so far.
      const double tolerance = 6e-8 * k * magnitude + 1e-30;
      ASSERT_NEAR(y[r * n + j], exact, tolerance) << "row " << r << " output " << j;
    }
  }
  for (size_t i = m * n; i < y.size(); ++i) EXPECT_EQ(y[i], kSentinel);
}

// Each row computed alone, and at every position of products of 1 to 40 rows, is the same bits.
TEST_P(GemmF32Test, RowsDoNotDependOnTheOtherRows) {
  const auto [k, n] = GetParam();
  const int64_t max_m = 40;
  const std::vector<float> w = Values(n * k, 3);
  const std::vector<float> x = Values(max_m * k, 4);
  const PackedF32Matrix matrix(w.data(), n, k);
  std::vector<float> alone(max_m * n);
  for (int64_t r = 0; r < max_m; ++r) matrix.Product(x.data() + r * k, 1, alone.data() + r * n);
  std::vector<float> y(max_m * n);
  for (int64_t m = 1; m <= max_m; ++m) {
    // Rows [first, first + m): each row also lands at another position within the tiles.
    const int64_t first = (m * 7) % (max_m - m + 1);
    matrix.Product(x.data() + first * k, m, y.data());
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_TRUE(SameBits(y.data() + r * n, alone.data() + (first + r) * n, n))
          << "m " << m << " row " << first + r;
    }
  }
}

// The portable code and one thread give the AVX2 kernel's bits on the team.
TEST_P(GemmF32Test, PathsAndThreadCountsAgree) {
  const auto [k, n] = GetParam();
  const int64_t m = 23;
  const std::vector<float> w = Values(n * k, 5);
  const std::vector<float> x = Values(m * k, 6);
  const PackedF32Matrix matrix(w.data(), n, k);
  std::vector<float> best(m * n), portable(m * n), single(m * n);
  matrix.Product(x.data(), m, best.data());
  matrix.Product(x.data(), m, portable.data(), PackedF32Matrix::Path::kPortable);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  matrix.Product(x.data(), m, single.data());
  omp_set_num_threads(threads);
  EXPECT_TRUE(SameBits(best.data(), portable.data(), m * n));
  EXPECT_TRUE(SameBits(best.data(), single.data(), m * n));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmF32Test,
                         ::testing::Values(
                             // SmolLM2-135M's layers (fused q/k/v, o, gate/up, down).
                             Shape{576, 960}, Shape{576, 576}, Shape{576, 3072}, Shape{1536, 576},
                             // Partial panels: n odd or below one panel; k odd, not a multiple
                             // of 16, or 1.
                             Shape{100, 37}, Shape{33, 70}, Shape{7, 5}, Shape{1, 17},
                             Shape{2048, 130}, Shape{64, 1}, Shape{129, 257}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           std::string name = "k";
                           name += std::to_string(info.param.k);
                           name += "_n";
                           name += std::to_string(info.param.n);
                           return name;
                         });

}  // namespace
}  // namespace convoy
