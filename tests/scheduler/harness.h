// Drives a Scheduler against the FakeExecutor and a FakeClock, and collects every event.
#ifndef CONVOY_TESTS_SCHEDULER_HARNESS_H_
#define CONVOY_TESTS_SCHEDULER_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "fake_executor.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "status_matchers.h"

namespace convoy::testing {

// A prompt of `length` tokens that differs between ids.
inline std::vector<int32_t> MakePrompt(RequestId id, int length) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(static_cast<int32_t>((id * 31 + i * 7) % 997));
  return prompt;
}

inline Request MakeRequest(RequestId id, int prompt_length, int max_tokens, int priority = 0) {
  Request request;
  request.id = id;
  request.prompt_tokens = MakePrompt(id, prompt_length);
  request.max_tokens = max_tokens;
  request.priority = priority;
  return request;
}

// Test defaults: small and unbounded enough to not get in the way.
inline SchedulerOptions TestOptions() {
  SchedulerOptions options;
  options.max_batch_size = 8;
  options.max_num_batched_tokens = 1024;
  options.prefill_chunk_size = 512;
  options.block_size = 4;
  options.num_blocks = 1024;
  options.priority_aging = absl::InfiniteDuration();
  return options;
}

inline std::vector<RequestId> RowIds(const StepPlan& plan) {
  std::vector<RequestId> ids;
  for (const StepRow& row : plan.rows) ids.push_back(row.seq_id);
  return ids;
}

// Allows every token of the vocabulary; never terminated.
class AllowAll : public TokenConstraint {
 public:
  void FillNextTokenMask(uint32_t* bits, int32_t vocab_size) override {
    for (int32_t i = 0; i < vocab_size; ++i) bits[i >> 5] |= 1u << (i & 31);
  }
  absl::Status AcceptToken(int32_t) override { return absl::OkStatus(); }
  bool IsTerminated() const override { return false; }
};

class Harness {
 public:
  explicit Harness(const SchedulerOptions& options, SchedulerObserver* observer = nullptr)
      : executor(options.num_blocks, options.block_size) {
    executor.set_sliding_window(options.sliding_window);
    auto created = Scheduler::Create(options, observer);
    EXPECT_OK(created);
    scheduler = std::move(created).value();
  }

  absl::Status Submit(Request request) {
    absl::Status status = scheduler->Submit(std::move(request), clock.Now());
    Collect();
    return status;
  }
  absl::Status Cancel(RequestId id) {
    absl::Status status = scheduler->Cancel(id, clock.Now());
    Collect();
    return status;
  }

  // Plans and runs one step; false when there was nothing to run (see `decision`). With
  // `plan_ahead`, as the engine loop drives an asynchronous executor: the step planned ahead during
  // the last one is committed and run, and the next one is planned ahead while this one "runs"
  // (what the test does between two Step calls happens with a step planned ahead).
  bool Step() {
    if (plan_ahead) return StepPlanningAhead();
    decision = scheduler->Schedule(clock.Now());
    Collect();
    if (!decision.plan) return false;
    Apply(RunStepIsolatingRows(executor, *decision.plan));
    return true;
  }

  bool StepPlanningAhead() {
    std::optional<StepPlan> plan;
    if (ahead) {
      StepPlan committed = scheduler->CommitAhead(*std::move(ahead), clock.Now());
      ahead.reset();
      Collect();
      if (!committed.rows.empty()) plan = std::move(committed);
    }
    if (!plan) {
      decision = scheduler->Schedule(clock.Now());
      Collect();
      if (!decision.plan) return false;
      plan = *decision.plan;
    }
    IsolatedStep step(&executor);
    absl::Status launched = step.Launch(*plan);
    if (!launched.ok()) {
      scheduler->OnStepFailed(launched, clock.Now());
      Collect();
      return true;
    }
    ahead = scheduler->ScheduleAhead(clock.Now());
    if (ahead) ++steps_planned_ahead;
    Collect();
    Apply(step.Collect());
    return true;
  }

  // Steps until there is nothing to run; returns the number of steps.
  int RunUntilIdle(int max_steps = 100000) {
    int steps = 0;
    while (steps < max_steps && Step()) ++steps;
    return steps;
  }

  const StepPlan& last_plan() const { return executor.plans().back(); }
  const std::vector<StepPlan>& plans() const { return executor.plans(); }

  // Exactly one final event, or a failure; returns it.
  Event Final(RequestId id) const {
    auto it = finals.find(id);
    if (it == finals.end() || it->second.size() != 1) {
      ADD_FAILURE() << "request " << id << " has " << (it == finals.end() ? 0 : it->second.size())
                    << " final events";
      return Event{};
    }
    return it->second[0];
  }
  bool Finished(RequestId id) const { return finals.contains(id); }

  FakeClock clock;
  FakeExecutor executor;
  std::unique_ptr<Scheduler> scheduler;
  ScheduleDecision decision;
  bool plan_ahead = false;
  std::optional<StepPlan> ahead;  // planned during the last step (plan_ahead)
  int64_t steps_planned_ahead = 0;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<Event>> finals;
  std::vector<Event> events;

 private:
  // The step's result (or failure) handed to the scheduler, its events collected.
  void Apply(const absl::StatusOr<StepResult>& result) {
    if (result.ok()) {
      EXPECT_OK(scheduler->OnStepResult(*result, clock.Now()));
    } else {
      scheduler->OnStepFailed(result.status(), clock.Now());
    }
    Collect();
    EXPECT_OK(scheduler->CheckInvariants());
  }

  void Collect() {
    for (Event& event : scheduler->TakeEvents()) {
      if (event.kind == Event::Kind::kToken) {
        EXPECT_FALSE(finals.contains(event.request_id)) << "token after the final event";
        EXPECT_EQ(event.token_index, static_cast<int64_t>(tokens[event.request_id].size()));
        tokens[event.request_id].push_back(event.token);
      } else {
        finals[event.request_id].push_back(event);
      }
      events.push_back(std::move(event));
    }
  }
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SCHEDULER_HARNESS_H_
