// The one definition of a seeded draw, shared by the CPU sampler (executor/sampler.cc) and the
// GPU sampling kernel (kernels/sampling.cu), so that the same seed gives the same tokens on both.
//
// The rule: greedy (highest logit, lowest id on ties) when the temperature is 0 or top_k is 1.
// Otherwise p_i = exp((logit_i - max) / temperature); the top_k cut keeps every token whose logit
// is at least the k-th largest (ties at the cut are kept); the top_p cut then keeps every token
// whose logit is at least the largest value v for which the kept tokens with logit >= v hold at
// least top_p of the kept mass (again ties kept); the token is the first, in token-id order, at
// which the running kept mass exceeds u * kept mass, u = SampleUniform(seed, sample_index).
// Host and device differ only by rounding (double on the host, float on the device), which can
// move a draw that falls within rounding of a boundary.
#ifndef CONVOY_COMMON_SAMPLING_RULE_H_
#define CONVOY_COMMON_SAMPLING_RULE_H_

#include <cstdint>

#if defined(__CUDACC__)
#define CONVOY_SAMPLING_HD __host__ __device__
#else
#define CONVOY_SAMPLING_HD
#endif

namespace convoy {

CONVOY_SAMPLING_HD inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform draw in [0, 1) fixed by (seed, sample_index): a request's random choices depend only
// on its seed and on which of its tokens is being drawn, never on the batch or the executor.
CONVOY_SAMPLING_HD inline double SampleUniform(uint64_t seed, int64_t sample_index) {
  const uint64_t bits = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(sample_index)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace convoy

#endif  // CONVOY_COMMON_SAMPLING_RULE_H_
