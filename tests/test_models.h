// Random Llama models for executor and engine tests, written once per test binary.
#ifndef CONVOY_TESTS_TEST_MODELS_H_
#define CONVOY_TESTS_TEST_MODELS_H_

#include <unistd.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "model/test_dir.h"

namespace convoy::testing {

// 2 layers, hidden 64, 4 query heads over 2 KV heads, vocabulary 320, context 256: fast enough
// for dozens of concurrent requests through the daemon or the scheduler.
inline ModelConfig TinyModelConfig() {
  ModelConfig c;
  c.vocab_size = 320;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  return c;
}

// A GQA model big enough for several KV blocks per sequence: 4 layers, 8 query heads over 2 KV
// heads of 16, untied embeddings.
inline ModelConfig SmallGqaConfig() {
  ModelConfig c;
  c.vocab_size = 320;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 512;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = false;
  return c;
}

// Writes (once per process) and loads a random model of `config` in `dtype`.
inline std::unique_ptr<ModelWeights> LoadRandomModel(const std::string& name,
                                                     const ModelConfig& config,
                                                     DType dtype = DType::kF32,
                                                     uint64_t seed = 11) {
  const std::string dir = ProcessDir("convoy_" + name);
  RandomModelOptions options;
  options.config = config;
  options.config.torch_dtype = dtype;
  options.seed = seed;
  options.dtype = dtype;
  absl::Status written = WriteRandomModel(dir, options);
  EXPECT_TRUE(written.ok()) << written;
  auto weights = ModelWeights::Load(dir);
  EXPECT_TRUE(weights.ok()) << weights.status();
  return weights.ok() ? std::move(weights).value() : nullptr;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_TEST_MODELS_H_
