// The few-row bf16 kernel (gemv_bf16.h) against a double-precision product of the same bf16
// weights and inputs, and against oneDNN's product of the same layer, for the shapes a model has
// and for shapes that leave the blocks partly filled.
#include "executor/cpu/gemv_bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "executor/cpu/linear.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy {
namespace {

struct Shape {
  int64_t in, out, m;
};

class Bf16GemvTest : public ::testing::TestWithParam<Shape> {};

// Values in [-1, 1) from a small deterministic generator, rounded to bf16.
std::vector<float> Values(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = BF16ToFloat(FloatToBF16(static_cast<float>(s >> 8) / (1 << 23) - 1.0f));
  }
  return v;
}

// A [out, in] bf16 weight over `w`, rounded into `storage`.
TensorView Bf16Weight(const std::vector<float>& w, int64_t out, int64_t in,
                      std::vector<uint16_t>* storage) {
  storage->resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) (*storage)[i] = FloatToBF16(w[i]);
  TensorView view;
  view.name = "test.weight";
  view.dtype = DType::kBF16;
  view.shape = {out, in};
  view.data = reinterpret_cast<const std::byte*>(storage->data());
  view.num_bytes = storage->size() * 2;
  return view;
}

TEST_P(Bf16GemvTest, MatchesADoubleProductAndOneDnn) {
  if (!Bf16MatmulAvailable() || !Bf16GemvAvailable()) {
    GTEST_SKIP() << "no bf16 product on this CPU (oneDNN or AVX-512 BF16)";
  }
  const Shape shape = GetParam();
  const std::vector<float> w = Values(shape.out * shape.in, 1);
  const std::vector<float> x = Values(shape.m * shape.in, 2);
  std::vector<uint16_t> storage;
  const TensorView view = Bf16Weight(w, shape.out, shape.in, &storage);

  auto own = Linear::Create({&view}, LinearFormat::kBF16, /*few_row_kernel=*/true);
  auto library = Linear::Create({&view}, LinearFormat::kBF16, /*few_row_kernel=*/false);
  ASSERT_OK(own);
  ASSERT_OK(library);
  // oneDNN laid the weights out as the kernel reads them; a layout it did not recognise would
  // silently fall back to oneDNN and this test would compare oneDNN with itself.
  EXPECT_TRUE((*own)->few_row_kernel());
  EXPECT_FALSE((*library)->few_row_kernel());

  // Outputs beyond m * out must stay untouched.
  const float kSentinel = 12345.0f;
  std::vector<float> y_own(shape.m * shape.out + 16, kSentinel);
  std::vector<float> y_library(shape.m * shape.out);
  (*own)->Forward(x.data(), shape.m, y_own.data());
  (*library)->Forward(x.data(), shape.m, y_library.data());

  for (int64_t r = 0; r < shape.m; ++r) {
    for (int64_t j = 0; j < shape.out; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < shape.in; ++i) {
        const double term = static_cast<double>(w[j * shape.in + i]) * x[r * shape.in + i];
        exact += term;
        magnitude += std::abs(term);
      }
      // fp32 accumulation of exact bf16 products: a few ulps of the terms' magnitude.
      const double tolerance = 1e-6 * magnitude + 1e-30;
      const float got = y_own[r * shape.out + j];
      ASSERT_NEAR(got, exact, tolerance) << "row " << r << " output " << j;
      ASSERT_NEAR(got, y_library[r * shape.out + j], 2 * tolerance)
          << "row " << r << " output " << j;
    }
  }
  for (size_t i = shape.m * shape.out; i < y_own.size(); ++i) EXPECT_EQ(y_own[i], kSentinel);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16GemvTest,
                         ::testing::Values(
                             // SmolLM2-135M's layers (fused q/k/v, o, gate/up, down) at m = 1.
                             Shape{576, 960, 1}, Shape{576, 576, 1}, Shape{576, 3072, 1},
                             Shape{1536, 576, 1},
                             // Every row count the kernel takes.
                             Shape{576, 576, 2}, Shape{576, 576, 3}, Shape{576, 576, 4},
                             // Partly filled blocks: inputs not a multiple of 32 (odd too),
                             // outputs not a multiple of 64 or 16, a layer smaller than one block.
                             Shape{100, 37, 1}, Shape{33, 70, 3}, Shape{7, 5, 4},
                             Shape{2048, 130, 2}, Shape{64, 1, 1}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "in" + std::to_string(info.param.in) + "_out" +
                                  std::to_string(info.param.out) + "_m" +
                                  std::to_string(info.param.m);
                         });

// Five rows are past the kernel: the layer answers through oneDNN, with the same results.
TEST(Bf16GemvRowsTest, MoreRowsThanTheKernelTakesGoThroughOneDnn) {
  if (!Bf16MatmulAvailable() || !Bf16GemvAvailable()) {
    GTEST_SKIP() << "no bf16 product on this CPU (oneDNN or AVX-512 BF16)";
  }
  const int64_t in = 96, out = 80, m = kBf16GemvMaxRows + 1;
  const std::vector<float> w = Values(out * in, 3);
  const std::vector<float> x = Values(m * in, 4);
  std::vector<uint16_t> storage;
  const TensorView view = Bf16Weight(w, out, in, &storage);
  auto own = Linear::Create({&view}, LinearFormat::kBF16, true);
  ASSERT_OK(own);
  std::vector<float> y_all(m * out), y_one(out);
  (*own)->Forward(x.data(), m, y_all.data());
  for (int64_t r = 0; r < m; ++r) {
    (*own)->Forward(x.data() + r * in, 1, y_one.data());
    for (int64_t j = 0; j < out; ++j) {
      EXPECT_NEAR(y_all[r * out + j], y_one[j], 1e-4) << "row " << r << " output " << j;
    }
  }
}

// A batch-invariant layer sends every product through the kernel: nine rows (three tiles, the last
// partial) give each row the bits it gets alone.
TEST(Bf16GemvRowsTest, BatchInvariantRowsMatchEachRowAlone) {
  if (!Bf16MatmulAvailable() || !Bf16GemvAvailable()) {
    GTEST_SKIP() << "no bf16 product on this CPU (oneDNN or AVX-512 BF16)";
  }
  const int64_t in = 200, out = 150, m = 9;
  const std::vector<float> w = Values(out * in, 5);
  const std::vector<float> x = Values(m * in, 6);
  std::vector<uint16_t> storage;
  const TensorView view = Bf16Weight(w, out, in, &storage);
  auto own = Linear::Create({&view}, LinearFormat::kBF16, true, /*batch_invariant=*/true);
  ASSERT_OK(own);
  ASSERT_TRUE((*own)->batch_invariant());
  EXPECT_EQ((*own)->format(), LinearFormat::kBF16);
  std::vector<float> y_all(m * out), y_one(out);
  (*own)->Forward(x.data(), m, y_all.data());
  for (int64_t r = 0; r < m; ++r) {
    (*own)->Forward(x.data() + r * in, 1, y_one.data());
    EXPECT_EQ(std::memcmp(y_all.data() + r * out, y_one.data(), sizeof(float) * out), 0)
        << "row " << r;
  }
}

}  // namespace
}  // namespace convoy
