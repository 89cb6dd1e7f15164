#include "bench/loadgen/arrival.h"

#include <cmath>
#include <numbers>

namespace convoy::bench {

Rng::Rng(uint64_t seed) : generator_(seed) {}

uint64_t Rng::Next() { return generator_.Next(); }

double Rng::Uniform() { return generator_.Uniform(); }

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the whole 64-bit range
  // Rejection keeps the result exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return lo + static_cast<int64_t>(x % span);
}

double Rng::Normal() {
  const double u1 = 1.0 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::Exponential() { return -std::log(1.0 - Uniform()); }

double Rng::Gamma(double shape) {
  if (shape < 1.0) {
    // Boost: Gamma(a) = Gamma(a + 1) * U^(1/a).
    const double u = 1.0 - Uniform();
    return Gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x;
    double v;
    do {
      x = Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

OpenLoopArrivals::OpenLoopArrivals(const v1::OpenLoop& config, uint64_t seed)
    : config_(config), rng_(seed) {}

double OpenLoopArrivals::NextGapSeconds() {
  const double mean = 1.0 / config_.rate_rps();
  switch (config_.pattern()) {
    case v1::OpenLoop::CONSTANT:
      return mean;
    case v1::OpenLoop::BURSTY: {
      const double shape = config_.burstiness();
      // Gamma(shape, scale) has mean shape * scale.
      return rng_.Gamma(shape) * mean / shape;
    }
    default:
      return rng_.Exponential() * mean;
  }
}

}  // namespace convoy::bench
