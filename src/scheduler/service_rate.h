// How fast the queue is being served: the rate at which waiting requests start running, measured
// only over the time some request was waiting. A queue that empties is served as fast as requests
// arrive, which says nothing of what the engine could take; a queue that holds requests is served
// at the engine's capacity. Older time counts less (exponential decay), so the rate follows a
// change of workload within a few time constants.
//
// The engine loop uses it to refuse at once a request that would time out in the queue
// (SchedulerOptions::refuse_expected_timeouts), rather than hold it until it does.
#ifndef CONVOY_SCHEDULER_SERVICE_RATE_H_
#define CONVOY_SCHEDULER_SERVICE_RATE_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace convoy {

class QueueServiceRate {
 public:
  // Busy (waiting) time it takes before a rate is stated.
  static constexpr absl::Duration kMinBusy = absl::Seconds(1);

  explicit QueueServiceRate(absl::Duration time_constant = absl::Seconds(10))
      : time_constant_(time_constant) {}

  // Called after each planning pass at `now`: `started` waiting requests started running in it,
  // and `still_waiting` tells whether some request waits after it.
  void Observe(absl::Time now, int64_t started, bool still_waiting);

  // Requests started per second of waiting; nullopt until kMinBusy of waiting has been seen.
  std::optional<double> per_second() const;

  // How long `ahead` requests take to be served at the current rate; nullopt when not known.
  std::optional<absl::Duration> ExpectedWait(int64_t ahead) const;

 private:
  absl::Duration time_constant_;
  std::optional<absl::Time> last_;
  bool waiting_ = false;     // some request waited after the last pass
  double busy_seconds_ = 0;  // decayed
  double started_ = 0;       // decayed
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_SERVICE_RATE_H_
