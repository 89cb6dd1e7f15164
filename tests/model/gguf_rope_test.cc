// Llama 3 rope scaling recovered from the factors llama.cpp's converter writes (rope_freqs.weight).
#include "model/gguf_rope.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// The factors as convert_hf_to_gguf.py computes them: frequencies in fp32, the rest in Python
// floats (double).
std::vector<float> ConverterFactors(double theta, int dim, double factor, double low, double high,
                                    double original) {
  std::vector<float> factors;
  for (int i = 0; i < dim; i += 2) {
    const float freq =
        1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(dim));
    const double wavelength = 2 * std::numbers::pi / freq;
    if (wavelength < original / high) {
      factors.push_back(1.0f);
    } else if (wavelength > original / low) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original / wavelength - low) / (high - low);
      factors.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

double InverseFrequency(double theta, int dim, int i) {
  return 1.0 / std::pow(theta, static_cast<double>(2 * i) / dim);
}

struct Llama3Case {
  const char* name;
  double theta;
  int dim;
  double factor, low, high;
  int64_t original;
};

class GgufRopeFitTest : public ::testing::TestWithParam<Llama3Case> {};

TEST_P(GgufRopeFitTest, RecoversTheScaling) {
  const Llama3Case& c = GetParam();
  const std::vector<float> factors =
      ConverterFactors(c.theta, c.dim, c.factor, c.low, c.high, static_cast<double>(c.original));
  // Told the original context, the fit gives the parameters back.
  auto fitted = FitLlama3RopeScaling(factors, c.theta, c.dim, c.original);
  ASSERT_OK(fitted);
  EXPECT_EQ(fitted->rope_type, "llama3");
  EXPECT_EQ(fitted->factor, c.factor);
  EXPECT_EQ(fitted->original_max_position_embeddings, c.original);
  EXPECT_NEAR(fitted->low_freq_factor, c.low, 1e-4 * c.low);
  EXPECT_NEAR(fitted->high_freq_factor, c.high, 1e-4 * c.high);
  // Told another one, the parameters differ but every frequency is scaled the same.
  auto other = FitLlama3RopeScaling(factors, c.theta, c.dim, 8 * c.original);
  ASSERT_OK(other);
  RopeScaling truth;
  truth.rope_type = "llama3";
  truth.factor = c.factor;
  truth.low_freq_factor = c.low;
  truth.high_freq_factor = c.high;
  truth.original_max_position_embeddings = c.original;
  for (int i = 0; i < c.dim / 2; ++i) {
    const double want = Llama3RopeFactor(truth, InverseFrequency(c.theta, c.dim, i));
    EXPECT_NEAR(Llama3RopeFactor(*fitted, InverseFrequency(c.theta, c.dim, i)), want, 1e-5 * want)
        << i;
    EXPECT_NEAR(Llama3RopeFactor(*other, InverseFrequency(c.theta, c.dim, i)), want, 1e-5 * want)
        << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Llamas, GgufRopeFitTest,
    ::testing::Values(Llama3Case{"llama31", 500000.0, 128, 8.0, 1.0, 4.0, 8192},
                      Llama3Case{"llama32", 500000.0, 64, 32.0, 1.0, 4.0, 8192},
                      Llama3Case{"tiny", 10000.0, 16, 8.0, 1.0, 8.0, 256}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(GgufRopeTest, NoScalingAndRefusals) {
  auto none = FitLlama3RopeScaling(std::vector<float>(8, 1.0f), 10000.0, 16, 8192);
  ASSERT_OK(none);
  EXPECT_EQ(none->rope_type, "default");

  EXPECT_THAT(FitLlama3RopeScaling(std::vector<float>(7, 1.0f), 10000.0, 16, 8192),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected head_dim / 2 = 8 rope frequency factors, found 7")));
  std::vector<float> below = std::vector<float>(8, 1.0f);
  below[3] = 0.5f;
  EXPECT_THAT(FitLlama3RopeScaling(below, 10000.0, 16, 8192),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("at least 1")));
  // A step with one value between 1 and the factor leaves the thresholds undetermined.
  const std::vector<float> step = {1, 1, 1, 2, 8, 8, 8, 8};
  EXPECT_THAT(FitLlama3RopeScaling(step, 10000.0, 16, 8192),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("expected at least 2")));
  // A ramp that is not linear in 1/wavelength.
  const std::vector<float> bent = {1, 1, 1.5f, 2, 7.9f, 8, 8, 8};
  EXPECT_THAT(
      FitLlama3RopeScaling(bent, 10000.0, 16, 8192),
      StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("do not follow llama3 scaling")));
}

}  // namespace
}  // namespace convoy
