// Metrics hooks of the scheduler and of the engine loop that drives it: counters kept by the
// scheduler (SchedulerStats) and an observer called as things happen, to feed histograms and gauges
// (Prometheus lives elsewhere). Observer methods run on the thread that calls the scheduler and
// must not call back into it.
#ifndef CONVOY_SCHEDULER_SCHEDULER_METRICS_H_
#define CONVOY_SCHEDULER_SCHEDULER_METRICS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/request.h"
#include "step/step.h"

namespace convoy {

enum class RejectReason {
  kQueueFull,        // the priority's queue is at max_queue_size
  kInvalidArgument,  // bad priority, empty prompt, too long for the model or the cache, ...
  kDuplicateId,
  kClientLimit,  // the client has request_limits.max_in_flight_per_client (the front end's)
};
inline constexpr int kNumRejectReasons = 4;
const char* RejectReasonName(RejectReason reason);

// What one planned step holds, and the state after planning it.
struct StepStats {
  int32_t num_rows = 0;
  int32_t num_prefill_rows = 0;  // prompt chunks (including recomputation after preemption)
  int32_t num_decode_rows = 0;
  int32_t padded_length = 0;  // the longest row
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;  // num_rows x padded_length - real_tokens
  int32_t num_running = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_free = 0;  // free or cached and not in use
  // Prefix caching: blocks with known content (in use or not); prompt tokens looked up and found
  // by the admissions of this step; cached blocks evicted since the previous planned step.
  int32_t kv_blocks_cached = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_evictions = 0;
  std::vector<int64_t> queue_depth;  // waiting requests per level, index 0 is level 1
};

// Where one step's time went, as the engine loop measures it on its thread (engine_loop.cc), and as
// the executor accounts for its own part.
struct StepPhases {
  // Timeouts expired, requests admitted, the step planned (Scheduler::Schedule) or the one planned
  // ahead made runnable (Scheduler::CommitAhead), masks handed to be computed.
  absl::Duration plan;
  // Rows checked and the step handed to the executor. For an executor that runs the step on the
  // engine thread (Executor::Launch's default), the whole step.
  absl::Duration launch;
  // The previous step's events handed to the front ends while this step ran, for an executor that
  // runs steps on a thread of its own; otherwise this step's events, after it.
  absl::Duration emit;
  // The next step planned while this one ran (Scheduler::ScheduleAhead); off the critical path.
  absl::Duration plan_ahead;
  // Waiting in Executor::Collect for the step's result.
  absl::Duration wait;
  // The result applied: tokens appended, stop rules, events made, the snapshot refreshed.
  absl::Duration apply;
  // The engine thread's own work for the step: plan, emit, plan_ahead and apply, and launch when
  // the step runs elsewhere. What an asynchronous step leaves on the critical path is plan (the
  // commit of a step planned ahead), launch and apply.
  absl::Duration engine_thread;
  ExecutorTimes executor;
};

// Sums of StepPhases over steps, for means.
struct StepPhaseTotals {
  int64_t steps = 0;
  StepPhases sum;
  void Add(const StepPhases& phases);
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t rows = 0;
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;
  int64_t preemptions = 0;
  // Prefix caching, in tokens: looked up at admission (re-admission after preemption included),
  // and found cached.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // The most rows one step has had since the scheduler was made or last reconfigured.
  int32_t largest_step_rows_since_reconfigure = 0;
  std::array<int64_t, kNumRejectReasons> rejections{};
  std::array<int64_t, kNumOutcomes> outcomes{};

  // Padded tokens per real token over every step so far.
  double padding_waste() const {
    return real_tokens == 0 ? 0.0 : static_cast<double>(padded_tokens) / real_tokens;
  }
};

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void OnStepPlanned(const StepStats& /*stats*/) {}
  virtual void OnRejected(RejectReason /*reason*/) {}
  virtual void OnPreempted(RequestId /*id*/) {}
  // Arrival to the first step that holds the request.
  virtual void OnQueueTime(int32_t /*priority_level*/, absl::Duration /*queue_time*/) {}
  // Arrival to the first generated token.
  virtual void OnFirstToken(absl::Duration /*time_to_first_token*/) {}
  // Between two consecutive tokens of one request.
  virtual void OnInterTokenTime(absl::Duration /*time_between_tokens*/) {}
  virtual void OnFinished(Outcome /*outcome*/) {}
  // After each step that ran, from the engine loop.
  virtual void OnStepPhases(const StepPhases& /*phases*/) {}
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_SCHEDULER_METRICS_H_
