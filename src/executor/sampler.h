// Chooses the next token from one position's logits. Shared by every executor that samples on the
// host, and the reference for device samplers.
#ifndef CONVOY_EXECUTOR_SAMPLER_H_
#define CONVOY_EXECUTOR_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "convoy/sampling_params.h"
#include "executor/executor.h"

namespace convoy {

// A uniform draw in [0, 1) fixed by (seed, index): a request's random choices depend only on its
// seed and on which of its tokens is being drawn, never on the batch around it.
double UniformForSample(uint64_t seed, int64_t index);

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;  // log_softmax(logits)[token], before temperature, top-k and top-p
  std::vector<TokenLogprob> top_logprobs;
};

// Greedy when temperature is 0 (ties go to the lowest token id); otherwise samples from
// softmax(logits / temperature) restricted to the top_k most likely tokens and then to the
// smallest prefix whose probability reaches top_p. `scratch` is reused between calls.
SampledToken SampleToken(const float* logits, int32_t vocab_size, const SamplingParams& params,
                         int64_t sample_index, std::vector<std::pair<float, int32_t>>* scratch);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_SAMPLER_H_
