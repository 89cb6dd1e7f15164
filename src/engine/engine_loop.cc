#include "engine/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"

namespace convoy {

absl::StatusOr<std::unique_ptr<EngineLoop>> EngineLoop::Create(Executor* executor,
                                                               const EngineLoopOptions& options) {
  if (executor == nullptr) return absl::InvalidArgumentError("no executor");
  const KvCacheSpec& kv = executor->kv_spec();
  if (options.scheduler.block_size != kv.block_size) {
    return absl::InvalidArgumentError(absl::StrCat("block_size ", options.scheduler.block_size,
                                                   " differs from the executor's KV cache (",
                                                   kv.block_size, ")"));
  }
  ASSIGN_OR_RETURN(const SchedulerOptions scheduler_options,
                   WithExecutorLimits(*executor, options.scheduler));
  ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                   Scheduler::Create(scheduler_options, options.observer));
  std::unique_ptr<EngineLoop> loop(new EngineLoop(executor, options, std::move(scheduler)));
  loop->thread_ = std::thread([raw = loop.get()] { raw->Run(); });
  return loop;
}

EngineLoop::EngineLoop(Executor* executor, const EngineLoopOptions& options,
                       std::unique_ptr<Scheduler> scheduler)
    : executor_(executor),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      observer_(options.observer),
      emit_during_next_step_(options.emit_during_next_step),
      plan_ahead_(options.plan_ahead),
      scheduler_(std::move(scheduler)),
      inbox_per_level_(scheduler_->options().priority_levels, 0),
      waiting_per_level_(scheduler_->options().priority_levels, 0),
      new_waiting_per_level_(scheduler_->options().priority_levels, 0),
      options_(scheduler_->options()) {}

EngineLoop::~EngineLoop() { Shutdown(/*drain=*/false); }

absl::StatusOr<SchedulerOptions> EngineLoop::WithExecutorLimits(const Executor& executor,
                                                                SchedulerOptions options) {
  const ExecutorLimits limits = executor.limits();
  // A step holds at most max_batch_size rows and max_num_batched_tokens token slots (padding
  // included when it is computed; packed tokens never exceed that): both must fit the executor.
  if (limits.max_rows_per_step > 0 && options.max_batch_size > limits.max_rows_per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler.max_batch_size is ", options.max_batch_size, "; the executor runs at most ",
        limits.max_rows_per_step, " sequences a step"));
  }
  if (limits.max_tokens_per_step > 0 &&
      options.max_num_batched_tokens > limits.max_tokens_per_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler.max_num_batched_tokens is ", options.max_num_batched_tokens,
                     "; the executor runs at most ", limits.max_tokens_per_step, " tokens a step"));
  }
  options.num_blocks = executor.kv_spec().num_blocks;
  options.budget_counts_padding = limits.computes_padding;
  options.sliding_window = executor.model_config().KvWindow();
  const int64_t model_len = executor.model_config().max_position_embeddings;
  if (model_len > 0 && (options.max_model_len == 0 || options.max_model_len > model_len)) {
    options.max_model_len = model_len;
  }
  return options;
}

absl::Status EngineLoop::Reconfigure(const SchedulerOptions& options) {
  ASSIGN_OR_RETURN(const SchedulerOptions next, WithExecutorLimits(*executor_, options));
  RETURN_IF_ERROR(next.Validate());
  absl::MutexLock serial(&reconfigure_mu_);
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(options_.CheckFixedKnobsKept(next));
  if (stopping_ || exited_) return absl::UnavailableError("the engine is shutting down");
  pending_options_ = next;
  const uint64_t ticket = ++reconfigures_asked_;
  auto done = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reconfigures_done_ >= ticket || exited_;
  };
  mu_.Await(absl::Condition(&done));
  if (reconfigures_done_ < ticket) return absl::UnavailableError("the engine has stopped");
  return reconfigure_result_;
}

SchedulerOptions EngineLoop::options() const {
  absl::MutexLock lock(&mu_);
  return options_;
}

void EngineLoop::ApplyPendingOptions() {
  std::optional<SchedulerOptions> next;
  {
    absl::MutexLock lock(&mu_);
    next.swap(pending_options_);
  }
  if (!next) return;
  absl::Status applied = scheduler_->Reconfigure(*next);
  absl::MutexLock lock(&mu_);
  if (applied.ok()) {
    options_ = scheduler_->options();
    // Whoever sees Reconfigure return sees the counters restarted with it.
    snapshot_.stats = scheduler_->stats();
  }
  reconfigure_result_ = applied;
  reconfigures_done_ = reconfigures_asked_;
}

absl::Status EngineLoop::CheckExpectedWait(const Request& request, int32_t level) const {
  const absl::Duration timeout = request.timeout == absl::ZeroDuration()
                                     ? options_.queue_policy(level).default_timeout
                                     : request.timeout;
  if (timeout == absl::InfiniteDuration()) return absl::OkStatus();
  int64_t ahead = 0;  // this level and the levels above it go first
  for (int32_t l = 1; l <= level; ++l) ahead += inbox_per_level_[l - 1] + waiting_per_level_[l - 1];
  const std::optional<absl::Duration> wait = service_rate_.ExpectedWait(ahead);
  if (!wait || *wait <= timeout) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the queue would outlast the request's timeout: %d requests ahead at priority level %d "
      "start at about %.2f a second, an expected wait of %.2f s against a timeout of %.2f s "
      "(scheduler.refuse_expected_timeouts); retry later",
      ahead, level, service_rate_.per_second().value_or(0), absl::ToDoubleSeconds(*wait),
      absl::ToDoubleSeconds(timeout)));
}

absl::Status EngineLoop::Submit(Request request, EventCallback on_event) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const int32_t level, options_.ResolveLevel(request.priority));
  if (stopping_) return absl::UnavailableError("the engine is shutting down");
  const int32_t bound = options_.queue_policy(level).max_queue_size;
  // The scheduler's own bound (Scheduler::Submit), checked here on the caller's thread.
  if (bound > 0 && inbox_per_level_[level - 1] + new_waiting_per_level_[level - 1] >= bound) {
    return absl::ResourceExhaustedError(absl::StrCat("the queue of priority level ", level,
                                                     " is full (max_queue_size ", bound,
                                                     "); retry later"));
  }
  if (options_.refuse_expected_timeouts) RETURN_IF_ERROR(CheckExpectedWait(request, level));
  ++inbox_per_level_[level - 1];
  inbox_.emplace_back(std::move(request), std::move(on_event));
  return absl::OkStatus();
}

void EngineLoop::Cancel(RequestId id) {
  absl::MutexLock lock(&mu_);
  cancels_.push_back(id);
}

void EngineLoop::Shutdown(bool drain) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) drain_ = drain;
    stopping_ = true;
  }
  absl::MutexLock join_lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

SchedulerStats EngineLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return snapshot_.stats;
}

EngineLoopSnapshot EngineLoop::snapshot() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

void EngineLoop::Dispatch(std::vector<Event> events) {
  for (const Event& event : events) {
    auto it = callbacks_.find(event.request_id);
    if (it == callbacks_.end()) continue;
    it->second(event);
    if (event.kind == Event::Kind::kFinal) callbacks_.erase(it);
  }
}

void EngineLoop::PublishWaiting() {
  for (int32_t level = 1; level <= scheduler_->options().priority_levels; ++level) {
    waiting_per_level_[level - 1] = scheduler_->num_waiting(level);
    new_waiting_per_level_[level - 1] = scheduler_->num_new_waiting(level);
  }
}

namespace {

// Durations between laps on the monotonic clock (the loop's Clock may be a test's fake).
class Stopwatch {
 public:
  Stopwatch() : last_(std::chrono::steady_clock::now()) {}
  absl::Duration Lap() {
    const auto now = std::chrono::steady_clock::now();
    const absl::Duration lap = absl::FromChrono(now - last_);
    last_ = now;
    return lap;
  }

 private:
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

void EngineLoop::Run() {
  IsolatedStep step(executor_);
  // Events of the last step, held to go out while the next step runs (emit_during_next_step).
  const bool overlap = emit_during_next_step_ && executor_->steps_asynchronously();
  const bool plan_ahead = plan_ahead_ && executor_->steps_asynchronously();
  std::vector<Event> unsent;
  // The step planned while the last one ran (Scheduler::ScheduleAhead), launched next.
  std::optional<StepPlan> ahead;
  // The step launched, unchanged until collected; then its storage goes back to the scheduler.
  StepPlan running;
  std::optional<absl::Time> wake_at;
  bool idle = false;          // the last Schedule had nothing to run
  bool stop_noticed = false;  // a drain sleeps until deadlines like any other pass
  while (true) {
    std::vector<std::pair<Request, EventCallback>> inbox;
    std::vector<int64_t> handed_per_level;  // of those, per level: still counted in the inbox
    std::vector<RequestId> cancels;
    bool stopping = false;
    bool drain = true;
    {
      absl::MutexLock lock(&mu_);
      if (idle) {
        auto has_work = [this, stop_noticed]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !inbox_.empty() || !cancels_.empty() || pending_options_.has_value() ||
                 (stopping_ && !stop_noticed);
        };
        const absl::Condition condition(&has_work);
        if (wake_at) {
          mu_.AwaitWithTimeout(condition, *wake_at - clock_->Now());
        } else {
          mu_.Await(condition);
        }
      }
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      // The requests taken stay counted in the inbox until the scheduler's counts published
      // below include them: a Submit in between must not find their places free.
      if (!inbox.empty()) handed_per_level = inbox_per_level_;
      stopping = stopping_;
      drain = drain_;
      stop_noticed = stopping_;
    }

    Stopwatch stopwatch;  // from the end of the wait
    // Between steps: the last step's result is in, the next is not launched yet. New knobs wait
    // while a step is planned ahead under the old ones (none is planned while knobs wait).
    if (!ahead) ApplyPendingOptions();
    absl::Time now = clock_->Now();
    for (auto& [request, callback] : inbox) {
      const RequestId id = request.id;
      // A duplicate id must not replace the callback of the request that holds it.
      const bool duplicate = callbacks_.contains(id);
      absl::Status status = scheduler_->Submit(std::move(request), now);
      if (status.ok() && !duplicate) {
        callbacks_.emplace(id, std::move(callback));
        continue;
      }
      Event rejected;
      rejected.kind = Event::Kind::kFinal;
      rejected.request_id = id;
      rejected.outcome = Outcome::kRejected;
      rejected.status = status.ok() ? absl::AlreadyExistsError("duplicate request id") : status;
      callback(rejected);
    }
    if (!inbox.empty()) {  // what the inbox held now waits in the scheduler (or was rejected)
      absl::MutexLock lock(&mu_);
      for (size_t l = 0; l < handed_per_level.size(); ++l) {
        inbox_per_level_[l] -= handed_per_level[l];
      }
      PublishWaiting();
    }
    for (RequestId id : cancels) scheduler_->Cancel(id, now).IgnoreError();
    if (stopping && !drain) {
      std::vector<RequestId> held;
      for (const auto& [id, callback] : callbacks_) held.push_back(id);
      for (RequestId id : held) scheduler_->Cancel(id, now).IgnoreError();
    }

    ScheduleDecision decision;
    if (ahead) {
      StepPlan committed = scheduler_->CommitAhead(*std::move(ahead), now);
      ahead.reset();
      if (!committed.rows.empty()) decision.plan = std::move(committed);
    }
    if (!decision.plan) decision = scheduler_->Schedule(now);
    StepPhases phases;
    bool launched = false;
    if (decision.plan) {
      {
        // Those the plan admitted no longer wait: the queue bound counts them out during the
        // step, not one pass late.
        absl::MutexLock lock(&mu_);
        PublishWaiting();
      }
      mask_prefetcher_.Prefetch(*decision.plan);
      running = *std::move(decision.plan);
      phases.plan = stopwatch.Lap();
      absl::Status started = step.Launch(running);
      phases.launch = stopwatch.Lap();
      if (started.ok()) {
        launched = true;
      } else {
        scheduler_->OnStepFailed(started, clock_->Now());
      }
    }
    if (overlap) {  // the previous step's events, while this one runs
      Dispatch(std::move(unsent));
      unsent.clear();
      phases.emit = stopwatch.Lap();
    }
    if (launched && plan_ahead) {  // and the next step, unless new knobs wait
      bool knobs_waiting;
      {
        absl::MutexLock lock(&mu_);
        knobs_waiting = pending_options_.has_value();
      }
      if (!knobs_waiting) ahead = scheduler_->ScheduleAhead(clock_->Now());
      if (ahead) mask_prefetcher_.Prefetch(*ahead);
      phases.plan_ahead = stopwatch.Lap();
    }
    if (launched) {
      absl::StatusOr<StepResult> result = step.Collect();
      phases.wait = stopwatch.Lap();
      now = clock_->Now();
      if (result.ok()) {
        phases.executor = result->times;
        scheduler_->OnStepResult(*result, now).IgnoreError();  // failures end as events
      } else {
        scheduler_->OnStepFailed(result.status(), now);
      }
    }
    if (decision.plan.has_value()) scheduler_->RecyclePlan(std::move(running));
    std::vector<Event> events = scheduler_->TakeEvents();
    {
      // Refreshed before the events go out: whoever sees a request's final event also sees its
      // blocks free in snapshot().
      absl::MutexLock lock(&mu_);
      PublishWaiting();
      snapshot_.stats = scheduler_->stats();
      service_rate_ = scheduler_->service_rate();
      snapshot_.kv_blocks_total = scheduler_->allocator().num_blocks();
      snapshot_.kv_blocks_free = scheduler_->allocator().num_free();
      snapshot_.num_running = scheduler_->num_running();
      snapshot_.num_waiting = scheduler_->num_waiting();
    }
    if (launched) phases.apply = stopwatch.Lap();
    if (overlap && launched) {
      unsent = std::move(events);  // out during the next step, or at the next pass's start
    } else {
      Dispatch(std::move(events));
      if (launched) phases.emit = stopwatch.Lap();
    }
    if (decision.plan.has_value()) {
      phases.engine_thread =
          phases.plan + phases.emit + phases.plan_ahead + phases.apply +
          (executor_->steps_asynchronously() ? phases.launch : absl::ZeroDuration());
      if (observer_ != nullptr) observer_->OnStepPhases(phases);
      absl::MutexLock lock(&mu_);
      snapshot_.step_phases.Add(phases);
    }
    idle = !decision.plan.has_value();
    wake_at = decision.wake_at;

    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && scheduler_->empty() && inbox_.empty() && unsent.empty() && !ahead) {
        exited_ = true;
        break;
      }
    }
  }
  // Requests submitted after the last pass: Submit refuses new ones once stopping_ is set, so the
  // inbox is empty here.
}

}  // namespace convoy
