// The engine loop: the one thread that owns the scheduler and drives the executor. Requests come in
// from any thread through Submit and Cancel; each request's events go out through its callback, on
// the loop thread. When there is nothing to run, the loop sleeps exactly until the scheduler's next
// deadline (a queue timeout or the queue delay) or until a new request or cancellation arrives.
// This is what the gRPC front end calls.
//
// One pass of the loop, for an executor that runs steps on a thread of its own:
//
//   take the inbox and cancellations -> Scheduler::CommitAhead (or Schedule) -> Launch(step N)
//   emit step N-1's events to the front ends        (while step N runs)
//   Scheduler::ScheduleAhead: plan step N+1         (while step N runs)
//   Executor::Collect -> Scheduler::OnStepResult -> step N's events held for the next pass
//
// For an executor whose Launch runs the whole step, step N's events go out right after it.
// Who owns what: the scheduler owns every sequence's state and is touched only between Collect
// and the next Launch; a launched plan belongs to the executor until Collect returns.
#ifndef CONVOY_ENGINE_ENGINE_LOOP_H_
#define CONVOY_ENGINE_ENGINE_LOOP_H_

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/mask_prefetcher.h"
#include "executor/executor.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"

namespace convoy {

struct EngineLoopOptions {
  // num_blocks and block_size are taken from the executor's KV cache (a block_size that disagrees
  // is refused).
  SchedulerOptions scheduler;
  // Where "now" comes from; null: the real clock. The loop sleeps for the durations it measures on
  // it.
  Clock* clock = nullptr;
  // May be null; called on the loop thread.
  SchedulerObserver* observer = nullptr;
  // For an executor that runs steps on a thread of its own (Executor::steps_asynchronously): hand
  // a step's events to the front ends while the next step runs, rather than between the two. Off
  // only to measure what the overlap saves (bench/scheduler/engine_bench.cc).
  bool emit_during_next_step = true;
  // For such an executor too: plan the next step while one runs (Scheduler::ScheduleAhead), so
  // that only applying a result and launching the next step stand between two steps. Off only to
  // measure what it saves.
  bool plan_ahead = true;
};

// The loop's state as of its last pass.
struct EngineLoopSnapshot {
  SchedulerStats stats;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  int32_t num_running = 0;
  int64_t num_waiting = 0;
  // Where the steps' time went since the start (StepPhases summed).
  StepPhaseTotals step_phases;
};

// What the front end asks of the engine: EngineLoop below, or in tests a fake that scripts the
// order of events (tests/frontend/reactor_test.cc). The contract is EngineLoop's.
class RequestEngine {
 public:
  // Called with each of a request's events, the last one final. Must not block and must not call
  // back into the engine's Shutdown.
  using EventCallback = std::function<void(const Event&)>;

  virtual ~RequestEngine() = default;
  virtual absl::Status Submit(Request request, EventCallback on_event) = 0;
  virtual void Cancel(RequestId id) = 0;
  virtual EngineLoopSnapshot snapshot() const = 0;
};

class EngineLoop final : public RequestEngine {
 public:
  // On the loop thread (RequestEngine::EventCallback).
  using RequestEngine::EventCallback;

  // Starts the loop thread. `executor` must outlive the EngineLoop; only the loop thread uses it.
  static absl::StatusOr<std::unique_ptr<EngineLoop>> Create(Executor* executor,
                                                            const EngineLoopOptions& options);
  // Shutdown(/*drain=*/false).
  ~EngineLoop() override;

  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Thread-safe. Refuses at once, without calling `on_event`: INVALID_ARGUMENT for a bad priority,
  // RESOURCE_EXHAUSTED when the request's priority queue is full, UNAVAILABLE after Shutdown.
  // Otherwise `on_event` gets the request's events and exactly one final event (kRejected, with the
  // scheduler's status, when the scheduler refuses it later: a duplicate id, a prompt too long).
  absl::Status Submit(Request request, EventCallback on_event) override;
  // Thread-safe. Cancels a queued or running request at the next step boundary; no-op for an
  // unknown or finished id.
  void Cancel(RequestId id) override;
  // Thread-safe. Hands new batcher knobs to the loop thread, which applies them between two
  // steps (never during one), and returns once they are applied: every step planned after the
  // return runs under them. num_blocks, block_size, budget_counts_padding and max_model_len are
  // filled from the executor as in Create. Requests held stay held. FAILED_PRECONDITION for a
  // knob that cannot change while serving (SchedulerOptions::CheckFixedKnobsKept),
  // INVALID_ARGUMENT for invalid knobs, UNAVAILABLE after Shutdown; on error nothing changes.
  absl::Status Reconfigure(const SchedulerOptions& options);
  // The knobs in force (thread-safe).
  SchedulerOptions options() const;

  // Thread-safe, idempotent. Stops taking requests; with `drain` the held requests run to their
  // end, otherwise they are cancelled. Returns when the loop thread has exited.
  void Shutdown(bool drain = true);

  // Snapshot of the scheduler's counters, refreshed after every step (thread-safe).
  SchedulerStats stats() const;
  // Counters, KV blocks and queues as of the last pass (thread-safe), refreshed before that
  // pass's events are dispatched: once a request's final event is out, its blocks show as free.
  EngineLoopSnapshot snapshot() const override;

 private:
  EngineLoop(Executor* executor, const EngineLoopOptions& options,
             std::unique_ptr<Scheduler> scheduler);
  // `options` with what the executor decides filled in (KV blocks, whether padding counts, the
  // model's context). INVALID_ARGUMENT, naming the scheduler's config field, when the options
  // would plan steps beyond the executor's limits (ExecutorLimits): more rows or token slots than
  // it can hold.
  static absl::StatusOr<SchedulerOptions> WithExecutorLimits(const Executor& executor,
                                                             SchedulerOptions options);
  void Run();
  // On the loop thread, between steps: applies the knobs Reconfigure handed over, if any.
  void ApplyPendingOptions();
  void Dispatch(std::vector<Event> events);
  // Under scheduler.refuse_expected_timeouts: RESOURCE_EXHAUSTED when `request`, at `level`,
  // would wait in the queue longer than its timeout at the queue's service rate.
  absl::Status CheckExpectedWait(const Request& request, int32_t level) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the scheduler's waiting counts for admission on callers' threads.
  void PublishWaiting() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Executor* const executor_;
  Clock* const clock_;
  SchedulerObserver* const observer_;
  const bool emit_during_next_step_;
  const bool plan_ahead_;
  std::unique_ptr<Scheduler> scheduler_;  // only the loop thread touches it

  // Only the loop thread.
  absl::flat_hash_map<RequestId, EventCallback> callbacks_;
  MaskPrefetcher mask_prefetcher_;

  mutable absl::Mutex mu_;
  std::vector<std::pair<Request, EventCallback>> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> cancels_ ABSL_GUARDED_BY(mu_);
  // Per level: requests in the inbox (or taken from it and not yet in the published scheduler
  // counts), waiting in the scheduler, and of those the ones never started (what max_queue_size
  // bounds), as of the last pass (refreshed after the inbox is handed to the scheduler, when a
  // step is planned and after each step).
  std::vector<int64_t> inbox_per_level_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> waiting_per_level_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> new_waiting_per_level_ ABSL_GUARDED_BY(mu_);
  // The scheduler's as of the last pass.
  QueueServiceRate service_rate_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_ ABSL_GUARDED_BY(mu_) = true;
  EngineLoopSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  // The scheduler's knobs as of the last apply, for admission on callers' threads.
  SchedulerOptions options_ ABSL_GUARDED_BY(mu_);
  // Reconfigure's hand-over: the knobs to apply, and the result of the last apply.
  std::optional<SchedulerOptions> pending_options_ ABSL_GUARDED_BY(mu_);
  uint64_t reconfigures_asked_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reconfigures_done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status reconfigure_result_ ABSL_GUARDED_BY(mu_);
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  // One Reconfigure at a time.
  absl::Mutex reconfigure_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  std::thread thread_;
  absl::Mutex join_mu_;
};

}  // namespace convoy

#endif  // CONVOY_ENGINE_ENGINE_LOOP_H_
