#include "executor/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_format.h"

namespace convoy {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Larger logit first; equal logits by lower token id, so every order is total and deterministic.
bool ByLogitDesc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("temperature must be a finite number >= 0, got %g", p.temperature));
  }
  if (p.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("top_k must be >= 0, got %d", p.top_k));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat("top_p must be in (0, 1], got %g", p.top_p));
  }
  if (p.num_top_logprobs < 0 || p.num_top_logprobs > std::min(vocab_size, 100)) {
    return absl::InvalidArgumentError(absl::StrFormat("num_top_logprobs must be in [0, %d], got %d",
                                                      std::min(vocab_size, 100),
                                                      p.num_top_logprobs));
  }
  return absl::OkStatus();
}

double UniformForSample(uint64_t seed, int64_t index) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(index));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

SampledToken SampleToken(const float* logits, int32_t vocab_size, const SamplingParams& params,
                         int64_t sample_index, std::vector<std::pair<float, int32_t>>* scratch) {
  // log_softmax of the raw logits, for the reported logprobs.
  float max_logit = -INFINITY;
  int32_t argmax = 0;
  for (int32_t i = 0; i < vocab_size; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      argmax = i;
    }
  }
  double sum = 0.0;
  for (int32_t i = 0; i < vocab_size; ++i)
    sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));

  SampledToken result;
  if (params.temperature == 0.0f || params.top_k == 1) {
    result.token = argmax;
  } else {
    auto& c = *scratch;
    c.resize(vocab_size);
    for (int32_t i = 0; i < vocab_size; ++i) c[i] = {logits[i], i};
    int32_t n = vocab_size;
    if (params.top_k > 0 && params.top_k < vocab_size) {
      n = params.top_k;
      std::partial_sort(c.begin(), c.begin() + n, c.end(), ByLogitDesc);
    } else {
      std::sort(c.begin(), c.end(), ByLogitDesc);
    }
    // Probabilities of the candidates at this temperature, most likely first.
    const double inv_t = 1.0 / params.temperature;
    std::vector<double> probs(n);
    double total = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      probs[i] = std::exp((static_cast<double>(c[i].first) - c[0].first) * inv_t);
      total += probs[i];
    }
    // Nucleus: the smallest prefix whose mass reaches top_p.
    int32_t keep = n;
    if (params.top_p < 1.0f) {
      double cumulative = 0.0;
      for (int32_t i = 0; i < n; ++i) {
        cumulative += probs[i] / total;
        if (cumulative >= params.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    double kept = 0.0;
    for (int32_t i = 0; i < keep; ++i) kept += probs[i];
    const double target = UniformForSample(params.seed, sample_index) * kept;
    double acc = 0.0;
    result.token = c[keep - 1].second;
    for (int32_t i = 0; i < keep; ++i) {
      acc += probs[i];
      if (target < acc) {
        result.token = c[i].second;
        break;
      }
    }
  }
  result.logprob = logits[result.token] - log_z;

  if (params.num_top_logprobs > 0) {
    auto& c = *scratch;
    c.resize(vocab_size);
    for (int32_t i = 0; i < vocab_size; ++i) c[i] = {logits[i], i};
    const int32_t n = std::min(params.num_top_logprobs, vocab_size);
    std::partial_sort(c.begin(), c.begin() + n, c.end(), ByLogitDesc);
    for (int32_t i = 0; i < n; ++i)
      result.top_logprobs.push_back({c[i].second, c[i].first - log_z});
  }
  return result;
}

}  // namespace convoy
