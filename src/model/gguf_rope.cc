#include "model/gguf_rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_format.h"

namespace convoy {
namespace {

constexpr double kTolerance = 1e-4;

double InverseFrequency(double rope_theta, int64_t head_dim, int64_t i) {
  return 1.0 / std::pow(rope_theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
}

}  // namespace

double Llama3RopeFactor(const RopeScaling& scaling, double inv_freq) {
  if (scaling.rope_type != "llama3") return 1.0;
  const double wavelength = 2.0 * std::numbers::pi / inv_freq;
  const double original = static_cast<double>(scaling.original_max_position_embeddings);
  if (wavelength < original / scaling.high_freq_factor) return 1.0;
  if (wavelength > original / scaling.low_freq_factor) return scaling.factor;
  const double smooth = (original / wavelength - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / scaling.factor + smooth);
}

absl::StatusOr<RopeScaling> FitLlama3RopeScaling(const std::vector<float>& factors,
                                                 double rope_theta, int64_t head_dim,
                                                 int64_t original_context) {
  if (head_dim <= 0 || static_cast<int64_t>(factors.size()) != head_dim / 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expected head_dim / 2 = %d rope frequency factors, found %d", head_dim / 2,
                        factors.size()));
  }
  RopeScaling scaling;
  const double factor = *std::max_element(factors.begin(), factors.end());
  const double lowest = *std::min_element(factors.begin(), factors.end());
  if (!(lowest >= 1.0) || !std::isfinite(factor)) {
    return absl::UnimplementedError(absl::StrFormat(
        "rope frequency factors must be finite and at least 1 (llama3 scaling), found %g to %g",
        lowest, factor));
  }
  if (factor == 1.0) return scaling;

  // On the ramp between the thresholds, smooth = (1/f - 1/factor) / (1 - 1/factor) falls
  // linearly in 1/wavelength: smooth = a / wavelength - b with a = original / (high - low) and
  // b = low / (high - low). Least squares over the ramp's points.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < factors.size(); ++i) {
    const double f = factors[i];
    if (f == 1.0 || f == factor) continue;
    const double x =
        InverseFrequency(rope_theta, head_dim, static_cast<int64_t>(i)) / (2.0 * std::numbers::pi);
    const double y = (1.0 / f - 1.0 / factor) / (1.0 - 1.0 / factor);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  if (n < 2) {
    return absl::UnimplementedError(absl::StrFormat(
        "rope frequency factors have %g values between 1 and the factor %g, expected at least 2 "
        "to determine llama3 scaling's low_freq_factor and high_freq_factor",
        n, factor));
  }
  const double a = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double b = (a * sx - sy) / n;
  const double original = static_cast<double>(original_context);
  scaling.rope_type = "llama3";
  scaling.factor = factor;
  scaling.original_max_position_embeddings = original_context;
  scaling.low_freq_factor = b * original / a;
  scaling.high_freq_factor = scaling.low_freq_factor + original / a;
  if (!(a > 0) || !(scaling.low_freq_factor > 0) || !std::isfinite(scaling.high_freq_factor)) {
    return absl::UnimplementedError(absl::StrFormat(
        "rope frequency factors do not follow llama3 scaling: the ramp gives low_freq_factor %g "
        "and high_freq_factor %g",
        scaling.low_freq_factor, scaling.high_freq_factor));
  }
  for (size_t i = 0; i < factors.size(); ++i) {
    const double want = factors[i];
    const double got =
        Llama3RopeFactor(scaling, InverseFrequency(rope_theta, head_dim, static_cast<int64_t>(i)));
    if (std::abs(got - want) > kTolerance * want) {
      return absl::UnimplementedError(absl::StrFormat(
          "rope frequency factors do not follow llama3 scaling: factor %d is %g, the fitted "
          "scaling (factor %g, low_freq_factor %g, high_freq_factor %g) gives %g",
          i, want, scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor, got));
    }
  }
  return scaling;
}

}  // namespace convoy
