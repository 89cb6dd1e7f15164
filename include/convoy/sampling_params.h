// How one request's next tokens are chosen. Client-facing: the frontend fills it from a request.
#ifndef CONVOY_SAMPLING_PARAMS_H_
#define CONVOY_SAMPLING_PARAMS_H_

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

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
};

// The one statement of the ranges of SamplingParams, for every caller (request validation, which
// names the request's fields; the samplers, which check each row they get).
struct SamplingParamError {
  const char* field;  // "temperature", "top_k", "top_p" or "num_top_logprobs"
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
