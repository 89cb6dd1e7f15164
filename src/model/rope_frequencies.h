// The rotary embedding's frequencies and the factor on its cos and sin, from a model's config:
// the one rule both executors rotate by (the CPU's RopeTable and the CUDA rotary kernel).
#ifndef CONVOY_MODEL_ROPE_FREQUENCIES_H_
#define CONVOY_MODEL_ROPE_FREQUENCIES_H_

#include <vector>

#include "model/model_config.h"

namespace convoy {

// inv_freq[i] for the RotaryDim() / 2 rotated pairs (i and i + RotaryDim() / 2 of each head): the
// angle of pair i at position p is p * inv_freq[i], computed in fp32 as transformers does. The
// model's rope scaling is applied here, and only here: llama3's frequency scaling, and LongRoPE's
// frequency factors (those ModelConfig::LongRopeFactors chooses), each step rounded to fp32 as
// transformers computes it.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

// What multiplies cos and sin: LongRoPE's attention factor; 1 otherwise.
float RopeCosSinScale(const ModelConfig& config);

}  // namespace convoy

#endif  // CONVOY_MODEL_ROPE_FREQUENCIES_H_
