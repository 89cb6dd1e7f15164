// Llama 3 RoPE scaling from a GGUF file's per-frequency factors.
//
// llama.cpp's converter does not write Llama 3.1-style scaling as metadata: it writes a tensor,
// rope_freqs.weight, of head_dim / 2 factors that divide each rotary frequency. ModelConfig (and
// so every executor) describes the same scaling by four numbers. The factors depend on those only
// through `factor` and the two wavelength thresholds original / low_freq_factor and
// original / high_freq_factor, so any original_max_position_embeddings works once the two
// frequency factors are fitted to it.
#ifndef CONVOY_MODEL_GGUF_ROPE_H_
#define CONVOY_MODEL_GGUF_ROPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"

namespace convoy {

// The scaling whose factors (Hugging Face's llama3 rule) match `factors` to 1e-4 relative at
// every frequency, with original_max_position_embeddings = `original_context`: rope_type
// "default" when every factor is 1. UNIMPLEMENTED when no llama3 scaling matches (factors below
// 1, a ramp that is not linear in 1/wavelength, or fewer than two factors on the ramp, which
// leave the thresholds undetermined); INVALID_ARGUMENT for a wrong count of factors.
absl::StatusOr<RopeScaling> FitLlama3RopeScaling(const std::vector<float>& factors,
                                                 double rope_theta, int64_t head_dim,
                                                 int64_t original_context);

// The factor llama3 scaling divides frequency `inv_freq` by (1 when there is none).
double Llama3RopeFactor(const RopeScaling& scaling, double inv_freq);

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_ROPE_H_
