// SampleToken over one position's logits: greedy, top-k + top-p, top-p alone (no top-k, the
// widest candidate set) and temperature alone, for SmolLM2 (49152), Llama 2 (32000) and Llama 3
// (128256) vocabularies; each without and with logit adjustments (presence, frequency and
// repetition penalties over 96 generated tokens and a 30-token prompt, and two biases).
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "convoy/sampling_params.h"
#include "executor/sampler.h"
#include "step/logit_adjustments.h"

namespace convoy {
namespace {

enum Mode : int64_t { kGreedy = 0, kTopKTopP = 1, kTopPOnly = 2, kTemperatureOnly = 3 };

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
  std::string label;
  switch (state.range(1)) {
    case kGreedy:
      label = "greedy";
      break;
    case kTopKTopP:
      params.temperature = 0.8f;
      params.top_k = 50;
      params.top_p = 0.9f;
      label = "top_k=50 top_p=0.9";
      break;
    case kTopPOnly:
      params.temperature = 0.8f;
      params.top_p = 0.9f;
      label = "top_p=0.9";
      break;
    case kTemperatureOnly:
      params.temperature = 1.0f;
      label = "temperature=1";
      break;
  }
  std::shared_ptr<LogitAdjustments> adjustments;
  if (state.range(2) != 0) {
    params.presence_penalty = 0.5f;
    params.frequency_penalty = 0.5f;
    params.repetition_penalty = 1.1f;
    std::vector<int32_t> prompt;
    for (int32_t i = 0; i < 30; ++i) prompt.push_back((i * 7919) % vocab_size);
    adjustments = LogitAdjustments::Make(params, {{28, -5.0f}, {30, 2.0f}}, prompt);
    for (int32_t i = 0; i < 96; ++i) adjustments->CountOutput((i * 104729) % 500);
    label += ", adjusted";
  }
  state.SetLabel(label);
  std::vector<std::pair<float, int32_t>> scratch;
  int64_t index = 0;
  for (auto _ : state) {
    SampledToken token = SampleToken(logits.data(), vocab_size, params, index++, &scratch,
                                     /*allowed=*/nullptr, adjustments.get());
    benchmark::DoNotOptimize(token.token);
  }
  state.SetBytesProcessed(state.iterations() * vocab_size * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_SampleToken)
    ->ArgsProduct({{32000, 49152, 128256},
                   {kGreedy, kTopKTopP, kTopPOnly, kTemperatureOnly},
                   {0, 1}});

}  // namespace
}  // namespace convoy
