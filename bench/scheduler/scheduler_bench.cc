// The scheduler's own cost per step: Schedule plus OnStepResult (no executor), with 256 running
// sequences decoding and 10,000 requests queued behind them across the priority levels.
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "scheduler/scheduler.h"

namespace convoy {
namespace {

constexpr int kRunning = 256;
constexpr int kQueued = 10000;

// The result an executor would return for `plan`: one token per sampling row.
StepResult FakeResult(const StepPlan& plan) {
  StepResult result;
  result.rows.resize(plan.rows.size());
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    result.rows[i].seq_id = plan.rows[i].seq_id;
    result.rows[i].token = static_cast<int32_t>(plan.rows[i].sample_index % 1000);
  }
  return result;
}

// state.range(0): priority levels. state.range(1): 1 to let sequences finish and new ones join
// (each running sequence generates 64 tokens), 0 to keep the same 256 decoding.
void BM_SchedulerStep(benchmark::State& state) {
  const int levels = static_cast<int>(state.range(0));
  const bool churn = state.range(1) != 0;
  SchedulerOptions options;
  options.max_batch_size = kRunning;
  options.max_num_batched_tokens = 8192;
  options.prefill_chunk_size = 512;
  options.priority_levels = levels;
  options.default_priority_level = levels;
  options.default_queue_policy.max_queue_size = 0;
  options.priority_aging = absl::Seconds(1);
  options.block_size = 16;
  options.num_blocks = 1 << 20;
  options.default_max_tokens = churn ? 64 : 1 << 20;
  auto scheduler = Scheduler::Create(options);
  if (!scheduler.ok()) {
    state.SkipWithError(std::string(scheduler.status().message()).c_str());
    return;
  }
  Scheduler& s = **scheduler;
  absl::Time now = absl::UnixEpoch();
  RequestId next_id = 0;
  auto submit = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Request request;
      request.id = next_id++;
      request.prompt_tokens.assign(16 + next_id % 200, 7);
      request.priority = 1 + static_cast<int>(next_id % levels);
      if (!s.Submit(std::move(request), now).ok()) state.SkipWithError("submit failed");
    }
  };
  auto step = [&]() -> size_t {
    ScheduleDecision decision = s.Schedule(now);
    if (!decision.plan) return 0;
    if (!s.OnStepResult(FakeResult(*decision.plan), now).ok()) state.SkipWithError("result");
    s.TakeEvents();
    now += absl::Milliseconds(10);
    return decision.plan->rows.size();
  };
  submit(kRunning);
  if (churn) {
    // Sequences finish while others are still prefilling: warm up to a steady state instead.
    submit(kQueued);
    for (int i = 0; i < 500; ++i) step();
  } else {
    while (s.num_running() < kRunning) step();
    for (int i = 0; i < 4; ++i) step();  // prompts done: all decoding
    submit(kQueued);
  }

  int64_t rows = 0;
  for (auto _ : state) {
    rows += static_cast<int64_t>(step());
    if (churn && s.num_waiting() < kQueued / 2) {
      state.PauseTiming();
      submit(kQueued / 2);
      state.ResumeTiming();
    }
  }
  state.counters["rows_per_step"] =
      benchmark::Counter(static_cast<double>(rows) / static_cast<double>(state.iterations()));
  state.counters["running"] = s.num_running();
  state.counters["queued"] = static_cast<double>(s.num_waiting());
}
BENCHMARK(BM_SchedulerStep)
    ->ArgNames({"levels", "churn"})
    ->Args({1, 0})
    ->Args({3, 0})
    ->Args({3, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace convoy
