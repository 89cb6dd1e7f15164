// The seeded sequence of requests a workload sends: which class, how long a prompt, how many
// output tokens, which token ids.
#ifndef CONVOY_BENCH_LOADGEN_REQUEST_SOURCE_H_
#define CONVOY_BENCH_LOADGEN_REQUEST_SOURCE_H_

#include <cstdint>
#include <vector>

#include "bench/loadgen/arrival.h"
#include "bench/loadgen/workload.pb.h"

namespace convoy::bench {

struct PlannedRequest {
  int64_t index = 0;    // 0, 1, 2, ... in sending order
  int class_index = 0;  // into Workload.request_class
  int32_t priority = 0;
  float temperature = 0;
  uint64_t sampling_seed = 0;
  int32_t max_tokens = 1;
  std::vector<int32_t> prompt_token_ids;
};

// Draws one length from `d` (clamped to its bounds, at least 1).
int32_t SampleLength(const v1::LengthDistribution& d, Rng& rng);

class RequestSource {
 public:
  // `workload` must be valid (LoadWorkload). Token ids are uniform in [0, vocab_size); a prompt
  // (its class's shared prefix, then its own tokens) and its output together fit in max_context
  // (the prompt's own tokens go first, then the output's, then the prefix's).
  // REQUIRES: vocab_size >= 1, max_context >= 2.
  RequestSource(const v1::Workload& workload, int64_t vocab_size, int64_t max_context,
                uint64_t seed);

  PlannedRequest Next();

 private:
  v1::Workload workload_;
  int64_t vocab_size_;
  int64_t max_context_;
  double total_weight_ = 0;
  Rng rng_;
  int64_t next_index_ = 0;
  // Per class: the tokens every prompt of it begins with (drawn apart from rng_, so that a
  // prefix leaves the rest of the sequence as it was).
  std::vector<std::vector<int32_t>> prefixes_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_REQUEST_SOURCE_H_
