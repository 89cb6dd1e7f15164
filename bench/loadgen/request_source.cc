#include "bench/loadgen/request_source.h"

#include <algorithm>
#include <cmath>

namespace convoy::bench {

int32_t SampleLength(const v1::LengthDistribution& d, Rng& rng) {
  switch (d.kind_case()) {
    case v1::LengthDistribution::kFixed:
      return std::max(d.fixed(), 1);
    case v1::LengthDistribution::kUniform:
      return static_cast<int32_t>(
          rng.UniformInt(std::max(d.uniform().min(), 1), std::max(d.uniform().max(), 1)));
    case v1::LengthDistribution::kLognormal: {
      const auto& l = d.lognormal();
      double x = std::round(l.median() * std::exp(l.sigma() * rng.Normal()));
      x = std::max(x, static_cast<double>(std::max(l.min(), 1)));
      if (l.max() > 0) x = std::min(x, static_cast<double>(l.max()));
      return static_cast<int32_t>(std::min(x, 1e9));
    }
    case v1::LengthDistribution::KIND_NOT_SET:
      break;
  }
  return 1;
}

RequestSource::RequestSource(const v1::Workload& workload, int64_t vocab_size, int64_t max_context,
                             uint64_t seed)
    : workload_(workload), vocab_size_(vocab_size), max_context_(max_context), rng_(seed) {
  for (const v1::RequestClass& c : workload_.request_class()) total_weight_ += c.weight();
}

PlannedRequest RequestSource::Next() {
  PlannedRequest r;
  r.index = next_index_++;
  double pick = rng_.Uniform() * total_weight_;
  r.class_index = workload_.request_class_size() - 1;
  for (int i = 0; i < workload_.request_class_size(); ++i) {
    pick -= workload_.request_class(i).weight();
    if (pick < 0) {
      r.class_index = i;
      break;
    }
  }
  const v1::RequestClass& c = workload_.request_class(r.class_index);
  r.priority = c.priority();
  r.temperature = c.temperature();
  r.sampling_seed = rng_.Next();
  int64_t prompt = SampleLength(c.prompt_tokens(), rng_);
  int64_t output = SampleLength(c.output_tokens(), rng_);
  if (prompt + output > max_context_) prompt = std::max<int64_t>(1, max_context_ - output);
  if (prompt + output > max_context_) output = std::max<int64_t>(1, max_context_ - prompt);
  r.max_tokens = static_cast<int32_t>(output);
  r.prompt_token_ids.resize(prompt);
  for (int32_t& id : r.prompt_token_ids) {
    id = static_cast<int32_t>(rng_.UniformInt(0, vocab_size_ - 1));
  }
  return r;
}

}  // namespace convoy::bench
