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
  Rng prefix_rng(seed ^ 0x70726566697865ULL);
  for (const v1::RequestClass& c : workload_.request_class()) {
    total_weight_ += c.weight();
    std::vector<int32_t>& prefix = prefixes_.emplace_back(c.shared_prefix_tokens());
    for (int32_t& id : prefix) id = static_cast<int32_t>(prefix_rng.UniformInt(0, vocab_size_ - 1));
  }
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
  const std::vector<int32_t>& shared = prefixes_[r.class_index];
  int64_t prefix = static_cast<int64_t>(shared.size());
  int64_t own = SampleLength(c.prompt_tokens(), rng_);
  int64_t output = SampleLength(c.output_tokens(), rng_);
  if (prefix + own + output > max_context_)
    own = std::max<int64_t>(1, max_context_ - prefix - output);
  if (prefix + own + output > max_context_)
    output = std::max<int64_t>(1, max_context_ - prefix - own);
  if (prefix + own + output > max_context_)
    prefix = std::max<int64_t>(0, max_context_ - own - output);
  r.max_tokens = static_cast<int32_t>(output);
  r.prompt_token_ids.assign(shared.begin(), shared.begin() + prefix);
  for (int64_t i = 0; i < own; ++i) {
    r.prompt_token_ids.push_back(static_cast<int32_t>(rng_.UniformInt(0, vocab_size_ - 1)));
  }
  return r;
}

}  // namespace convoy::bench
