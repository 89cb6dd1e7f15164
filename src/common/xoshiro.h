// xoshiro256** (Blackman and Vigna) seeded through splitmix64: a small, fast generator whose
// output is the same on every machine and standard library, for random models and workloads.
#ifndef CONVOY_COMMON_XOSHIRO_H_
#define CONVOY_COMMON_XOSHIRO_H_

#include <cstdint>

namespace convoy {

// Advances `state` and returns the next splitmix64 output.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& word : state_) word = SplitMix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1), on the grid of 2^-53.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace convoy

#endif  // CONVOY_COMMON_XOSHIRO_H_
