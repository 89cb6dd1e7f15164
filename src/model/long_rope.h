// Phi-3's LongRoPE scaling (RopeScaling with rope_type "longrope"): what reading it from
// config.json and from GGUF share. The executors read the chosen factors through
// ModelConfig::LongRopeFactors.
#ifndef CONVOY_MODEL_LONG_ROPE_H_
#define CONVOY_MODEL_LONG_ROPE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "model/model_config.h"

namespace convoy {

// transformers' default attention factor (_compute_longrope_parameters):
// sqrt(1 + ln(factor) / ln(original_max_position_embeddings)), 1 when factor <= 1.
double LongRopeAttentionFactor(double factor, int64_t original_max_position_embeddings);

// Checks config.rope_scaling, a "longrope" one: UNIMPLEMENTED when config's family has no
// ModelFamily::long_rope (naming those that have); INVALID_ARGUMENT, naming the field, unless
// short_factor and long_factor hold RotaryDim() / 2 positive finite numbers each,
// original_max_position_embeddings is positive, and factor and attention_factor are positive and
// finite. REQUIRES: config.family() is not null.
absl::Status ValidateLongRope(const ModelConfig& config);

}  // namespace convoy

#endif  // CONVOY_MODEL_LONG_ROPE_H_
