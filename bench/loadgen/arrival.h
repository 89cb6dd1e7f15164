// Seeded random numbers and open-loop arrival processes. Everything here is a pure function of
// the seed (no clock, no platform-defined distributions), so a seed names one request sequence.
#ifndef CONVOY_BENCH_LOADGEN_ARRIVAL_H_
#define CONVOY_BENCH_LOADGEN_ARRIVAL_H_

#include <cstdint>

#include "bench/loadgen/workload.pb.h"
#include "common/xoshiro.h"

namespace convoy::bench {

// xoshiro256** seeded through splitmix64, with the few distributions convoy-bench needs, written
// out so that the same seed gives the same numbers with any standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform integer in [lo, hi].
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Standard normal (Box-Muller).
  double Normal();
  // Exponential with mean 1.
  double Exponential();
  // Gamma with the given shape (> 0) and scale 1 (Marsaglia and Tsang).
  double Gamma(double shape);

 private:
  Xoshiro256 generator_;
};

// The gaps between open-loop arrivals: their mean is 1 / rate_rps for every pattern.
class OpenLoopArrivals {
 public:
  OpenLoopArrivals(const v1::OpenLoop& config, uint64_t seed);

  // Seconds from the previous arrival (or the start) to the next.
  double NextGapSeconds();

 private:
  v1::OpenLoop config_;
  Rng rng_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_ARRIVAL_H_
