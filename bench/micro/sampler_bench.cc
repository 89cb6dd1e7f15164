// SampleToken over one position's logits: greedy, top-k + top-p, and top-p alone (no top-k, the
// widest candidate set), for Llama 2 (32000) and Llama 3 (128256) vocabularies.
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "convoy/sampling_params.h"
#include "executor/sampler.h"

namespace convoy {
namespace {

enum Mode : int64_t { kGreedy = 0, kTopKTopP = 1, kTopPOnly = 2 };

std::vector<float> RandomLogits(int32_t vocab_size) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab_size);
  for (float& x : logits) x = normal(rng);
  return logits;
}

// state.range(0): vocabulary size. state.range(1): Mode.
void BM_SampleToken(benchmark::State& state) {
  const int32_t vocab_size = static_cast<int32_t>(state.range(0));
  const std::vector<float> logits = RandomLogits(vocab_size);
  SamplingParams params;
  switch (state.range(1)) {
    case kGreedy:
      state.SetLabel("greedy");
      break;
    case kTopKTopP:
      params.temperature = 0.8f;
      params.top_k = 50;
      params.top_p = 0.9f;
      state.SetLabel("top_k=50 top_p=0.9");
      break;
    case kTopPOnly:
      params.temperature = 0.8f;
      params.top_p = 0.9f;
      state.SetLabel("top_p=0.9");
      break;
  }
  std::vector<std::pair<float, int32_t>> scratch;
  int64_t index = 0;
  for (auto _ : state) {
    SampledToken token = SampleToken(logits.data(), vocab_size, params, index++, &scratch);
    benchmark::DoNotOptimize(token.token);
  }
  state.SetBytesProcessed(state.iterations() * vocab_size * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_SampleToken)->ArgsProduct({{32000, 128256}, {kGreedy, kTopKTopP, kTopPOnly}});

}  // namespace
}  // namespace convoy
