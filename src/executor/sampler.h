// Chooses the next token from one position's logits. Shared by every executor that samples on the
// host, and the reference for device samplers.
#ifndef CONVOY_EXECUTOR_SAMPLER_H_
#define CONVOY_EXECUTOR_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "convoy/sampling_params.h"
#include "executor/executor.h"

namespace convoy {

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;  // log_softmax(logits)[token], before temperature, top-k and top-p
  std::vector<TokenLogprob> top_logprobs;
};

// Chooses by the rule of common/sampling_rule.h (the GPU sampling kernel's rule too): greedy when
// temperature is 0 or top_k is 1; otherwise a seeded draw from softmax(logits / temperature) cut
// to top_k and then top_p. `sample_index` numbers the request's generated tokens. `scratch` is
// reused between calls.
//
// params.min_p, beyond that rule, cuts like top_k: it keeps the tokens whose logit is at least
// max + temperature * ln(min_p), before top_p.
//
// `adjustments` (step/logit_adjustments.h; null: none) change the logits the choice is made from,
// greedy or not. `allowed` (step/token_constraint.h's bit layout; null: every token): the choice
// is made as if every other token's logit were -inf. The reported logprob and top logprobs stay
// those of the model's own distribution. token is -1 when `allowed` allows no token.
SampledToken SampleToken(const float* logits, int32_t vocab_size, const SamplingParams& params,
                         int64_t sample_index, std::vector<std::pair<float, int32_t>>* scratch,
                         const uint32_t* allowed = nullptr,
                         const LogitAdjustments* adjustments = nullptr);

// The log-probability of `token` under `logits` (log softmax, before temperature) and the
// `num_top` most likely tokens with theirs: prompt scoring (StepRow::score_tokens).
SampledToken ScoreToken(const float* logits, int32_t vocab_size, int32_t token, int32_t num_top,
                        std::vector<std::pair<float, int32_t>>* scratch);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_SAMPLER_H_
