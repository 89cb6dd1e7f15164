// How one request's next tokens are chosen. Client-facing: the frontend fills it from a request.
#ifndef CONVOY_SAMPLING_PARAMS_H_
#define CONVOY_SAMPLING_PARAMS_H_

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convoy {

struct SamplingParams {
  // 0 selects greedy decoding (argmax); otherwise logits are divided by it before sampling.
  float temperature = 0.0f;
  // Keep only the k most likely tokens; 0 keeps all.
  int32_t top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches top_p; 1 keeps all.
  float top_p = 1.0f;
  // The same seed gives the same tokens, whatever else shares the batch.
  uint64_t seed = 0;
  // How many of the most likely tokens (with their logprobs) to return per step; 0 for none.
  int32_t num_top_logprobs = 0;
  // Keep only tokens at least min_p times as likely as the most likely one (after temperature);
  // 0 keeps all.
  float min_p = 0.0f;
  // Penalties on the logits before the choice (step/logit_adjustments.h applies them; 0, 0 and 1
  // change nothing). Presence: subtracted once from every token the request has generated.
  // Frequency: subtracted once per time it was generated. Repetition: a positive logit of a token
  // in the prompt or output is divided by it, a negative one multiplied.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
};

// Whether `params` asks for what the seeded rule of common/sampling_rule.h alone does not do
// (min_p, penalties; with logit_bias, "extended sampling"), which only some executors apply
// (ExecutorLimits::applies_extended_sampling).
inline bool UsesExtendedSampling(const SamplingParams& params) {
  return params.min_p != 0.0f || params.presence_penalty != 0.0f ||
         params.frequency_penalty != 0.0f || params.repetition_penalty != 1.0f;
}

// OpenAI's range for presence_penalty and frequency_penalty: [-2, 2].
inline constexpr float kMaxPenalty = 2.0f;
// repetition_penalty at most (the CTRL paper, which introduced it, suggests 1.2).
inline constexpr float kMaxRepetitionPenalty = 10.0f;

// The one statement of the ranges of SamplingParams, for every caller (request validation, which
// names the request's fields; the samplers, which check each row they get).
struct SamplingParamError {
  const char* field;  // the member's name: "temperature", "top_k", ..., "num_top_logprobs"
  std::string reason;
};
// The first field of `params` out of range; nullopt when every field is in range.
// `max_top_logprobs`: the most num_top_logprobs may be (the executor's limit and the vocabulary).
inline std::optional<SamplingParamError> CheckSamplingParams(const SamplingParams& params,
                                                             int32_t max_top_logprobs) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    return SamplingParamError{
        "temperature", absl::StrFormat("must be a finite number >= 0, got %g", params.temperature)};
  }
  if (params.top_k < 0) {
    return SamplingParamError{"top_k",
                              absl::StrCat("must be >= 0 (0 keeps all), got ", params.top_k)};
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return SamplingParamError{"top_p", absl::StrFormat("must be in (0, 1], got %g", params.top_p)};
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return SamplingParamError{"min_p", absl::StrFormat("must be in [0, 1], got %g", params.min_p)};
  }
  for (const auto& [field, value] : {std::pair{"presence_penalty", params.presence_penalty},
                                     std::pair{"frequency_penalty", params.frequency_penalty}}) {
    if (!(value >= -kMaxPenalty && value <= kMaxPenalty)) {
      return SamplingParamError{
          field, absl::StrFormat("must be in [%g, %g], got %g", -kMaxPenalty, kMaxPenalty, value)};
    }
  }
  if (!(params.repetition_penalty > 0.0f && params.repetition_penalty <= kMaxRepetitionPenalty)) {
    return SamplingParamError{"repetition_penalty",
                              absl::StrFormat("must be in (0, %g] (1 changes nothing), got %g",
                                              kMaxRepetitionPenalty, params.repetition_penalty)};
  }
  if (params.num_top_logprobs < 0 || params.num_top_logprobs > max_top_logprobs) {
    return SamplingParamError{
        "num_top_logprobs",
        absl::StrFormat("must be in [0, %d], got %d", max_top_logprobs, params.num_top_logprobs)};
  }
  return std::nullopt;
}

// CheckSamplingParams against a vocabulary of `vocab_size` tokens (and kMaxTopLogprobs) as a
// status; the message names the field.
absl::Status ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size);

}  // namespace convoy

#endif  // CONVOY_SAMPLING_PARAMS_H_
