// Token sampling over fp32 logits, one row per block, by the rule in common/sampling_rule.h (the
// CPU sampler's rule too). Reports the chosen token's log-softmax of the raw logits and, when
// asked, the most likely tokens.
#ifndef CONVOY_KERNELS_SAMPLING_CUH_
#define CONVOY_KERNELS_SAMPLING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/sampling_rule.h"
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

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_SAMPLING_CUH_
