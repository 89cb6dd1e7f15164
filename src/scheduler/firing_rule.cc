#include "scheduler/firing_rule.h"

#include <algorithm>

namespace convoy {

FiringDecision DecideFiring(int64_t num_waiting, absl::Time oldest_arrival, absl::Time now,
                            int32_t max_batch_size,
                            const std::vector<int32_t>& preferred_batch_sizes,
                            absl::Duration max_queue_delay) {
  FiringDecision decision;
  if (num_waiting <= 0) return decision;
  if (num_waiting >= max_batch_size) {
    decision.batch_size = max_batch_size;
    return decision;
  }
  int32_t best_preferred = 0;
  for (int32_t p : preferred_batch_sizes) {
    if (p <= num_waiting) best_preferred = std::max(best_preferred, p);
  }
  if (best_preferred > 0) {
    decision.batch_size = best_preferred;
    return decision;
  }
  const absl::Time expiry = oldest_arrival + max_queue_delay;
  if (now >= expiry) {
    decision.batch_size = static_cast<int32_t>(num_waiting);
    return decision;
  }
  decision.wake_at = expiry;
  return decision;
}

}  // namespace convoy
