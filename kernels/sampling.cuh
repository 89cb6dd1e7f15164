// Token sampling over fp32 logits, one row per block: greedy (argmax, lowest id on ties) when the
// temperature is 0 or top_k is 1; otherwise logits / temperature, cut to the top_k most likely and
// then to the smallest most-likely set whose probability reaches top_p (ties at a cut are kept),
// and drawn by inverse CDF in token-id order with u = SampleUniform(seed, sample_index). Reports
// the chosen token's log-softmax of the raw logits and, when asked, the most likely tokens.
#ifndef CONVOY_KERNELS_SAMPLING_CUH_
#define CONVOY_KERNELS_SAMPLING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

inline constexpr int kMaxTopLogprobs = 20;

// One row's request, filled on the host and copied to the device.
struct SampleRow {
  int32_t logits_row = 0;  // which row of the logits
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int64_t sample_index = 0;
  int32_t num_top_logprobs = 0;  // at most kMaxTopLogprobs
  int32_t reserved = 0;
};

struct SampleOutput {
  int32_t token = -1;
  float logprob = 0.0f;
  int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

struct SamplingKernelParams {
  const float* logits = nullptr;  // [*, vocab]
  int64_t vocab = 0;
  const SampleRow* rows = nullptr;  // [num_rows], device memory
  SampleOutput* out = nullptr;      // [num_rows], device memory
  int64_t num_rows = 0;
};

cudaError_t LaunchSampling(const SamplingKernelParams& params, cudaStream_t stream);

// The uniform draw in [0, 1) for (seed, sample_index): the same on host and device.
CONVOY_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
CONVOY_HOST_DEVICE inline double SampleUniform(uint64_t seed, int64_t sample_index) {
  const uint64_t bits = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(sample_index)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_SAMPLING_CUH_
