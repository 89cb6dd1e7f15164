// Writes a Llama model directory with random weights: for tests, benchmarks and demos where the
// values matter less than the shapes, and where the same seed must give the same bytes everywhere.
#ifndef CONVOY_MODEL_RANDOM_MODEL_H_
#define CONVOY_MODEL_RANDOM_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "model/model_config.h"

namespace convoy {

struct RandomModelOptions {
  ModelConfig config;
  uint64_t seed = 0;
  DType dtype = DType::kF32;  // of every tensor; also written as config.json's torch_dtype
  int num_shards = 1;
};

// Creates `dir` (and its parents) and writes config.json and model.safetensors, or, when
// num_shards > 1, model-0000i-of-0000N.safetensors and model.safetensors.index.json (removing a
// model.safetensors or index left there by an earlier call, which would shadow the new files).
//
// The files are a function of the options alone: byte-identical on every machine. Each tensor is
// drawn from its own stream, seeded by (seed, tensor name), so the values do not depend on the
// sharding or on the dtype beyond its rounding. Scales keep activations O(1): embeddings N(0, 1);
// projections N(0, 1/sqrt(in_features)) (standard deviation); norm weights 1 + N(0, 0.1).
// lm_head.weight is omitted when the embeddings are tied. Tensors are generated and written one at
// a time, so memory stays near the size of the largest tensor.
absl::Status WriteRandomModel(const std::string& dir, const RandomModelOptions& options);

}  // namespace convoy

#endif  // CONVOY_MODEL_RANDOM_MODEL_H_
