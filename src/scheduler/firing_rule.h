// Triton's dynamic batching rule, made exact. Given the waiting requests, it says how many an idle
// engine takes now, or until when it waits:
//   1. n >= max_batch_size: fire max_batch_size.
//   2. else a preferred size p <= n exists: fire the largest such p.
//   3. else the oldest has waited max_queue_delay (always true for a delay of 0): fire n.
//   4. else wait until the oldest's arrival + max_queue_delay (or more arrivals).
#ifndef CONVOY_SCHEDULER_FIRING_RULE_H_
#define CONVOY_SCHEDULER_FIRING_RULE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace convoy {

struct FiringDecision {
  int32_t batch_size = 0;             // 0: do not fire now
  std::optional<absl::Time> wake_at;  // when batch_size is 0 and n > 0: when the delay expires
};

// REQUIRES: `preferred_batch_sizes` each in [1, max_batch_size].
FiringDecision DecideFiring(int64_t num_waiting, absl::Time oldest_arrival, absl::Time now,
                            int32_t max_batch_size,
                            const std::vector<int32_t>& preferred_batch_sizes,
                            absl::Duration max_queue_delay);

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_FIRING_RULE_H_
