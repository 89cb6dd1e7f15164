// How one request's next tokens are chosen. Client-facing: the frontend fills it from a request.
#ifndef CONVOY_SAMPLING_PARAMS_H_
#define CONVOY_SAMPLING_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"

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

// Checks ranges against a vocabulary of `vocab_size` tokens; the message names the field.
absl::Status ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size);

}  // namespace convoy

#endif  // CONVOY_SAMPLING_PARAMS_H_
