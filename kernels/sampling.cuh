// Token sampling over fp32 logits, one row per block, by the rule in common/sampling_rule.h (the
// CPU sampler's rule too). Reports the chosen token's log-softmax of the raw logits and, when
// asked, the most likely tokens.
//
// A row with allowed tokens or logit adjustments (executor/sampler.h: structured output,
// logit_bias, penalties) has its logits row rewritten in place after the reported log-softmax is
// taken from it: adjusted logits, and -inf where a token is not allowed; the choice is made from
// those. Its logits row is therefore not the model's after the kernel. The token is -1 when no
// token is allowed.
#ifndef CONVOY_KERNELS_SAMPLING_CUH_
#define CONVOY_KERNELS_SAMPLING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/sampling_rule.h"
#include "kernels/half_type.cuh"

namespace convoy::kernels {

inline constexpr int kMaxTopLogprobs = 20;

// One token's logit_bias and penalties (step/logit_adjustments.h's MergedLogitAdjustment):
// logit' = R(logit + bias) - subtract, R(x) = x / repetition for x > 0, else x * repetition.
struct LogitAdjustment {
  int32_t token = 0;
  float bias = 0.0f;
  float repetition = 1.0f;
  float subtract = 0.0f;
  float raw = 0.0f;  // written by the kernel: the model's logit, before the adjustment
};

// One row's request, filled on the host and copied to the device.
struct SampleRow {
  int32_t logits_row = 0;  // which row of the logits
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int64_t sample_index = 0;
  int32_t num_top_logprobs = 0;  // at most kMaxTopLogprobs
  // Keep the tokens whose logit is at least max + temperature * ln(min_p), like top_k's cut and
  // before top_p's; 0: off.
  float min_p = 0.0f;
  // Device memory, or null for none: the tokens the choice may make (bit i % 32 of word i / 32),
  // and the logit adjustments, ascending by token, one per token.
  const uint32_t* allowed = nullptr;
  LogitAdjustment* adjustments = nullptr;
  int32_t num_adjustments = 0;
  int32_t reserved = 0;
};

struct SampleOutput {
  int32_t token = -1;
  float logprob = 0.0f;
  int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

struct SamplingKernelParams {
  float* logits = nullptr;  // [*, vocab]; rows with allowed tokens or adjustments are rewritten
  int64_t vocab = 0;
  const SampleRow* rows = nullptr;  // [num_rows], device memory
  SampleOutput* out = nullptr;      // [num_rows], device memory
  int64_t num_rows = 0;
};

cudaError_t LaunchSampling(const SamplingKernelParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_SAMPLING_CUH_
