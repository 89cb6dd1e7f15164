// Runs requests through a real Scheduler and a real executor on a fake clock, and the shipped
// configs' scheduler options, for the tests that compare tokens across batches and executors.
#ifndef CONVOY_TESTS_SCHEDULER_PARITY_HARNESS_H_
#define CONVOY_TESTS_SCHEDULER_PARITY_HARNESS_H_

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/server_config.h"
#include "executor/executor.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy::testing {

struct ParityRun {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<float>> logprobs;  // one per token
  // Requests whose prompt was computed again from its start after they had generated tokens.
  std::set<RequestId> recomputed;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t prefix_cache_hits = 0;  // tokens
  int64_t prefix_cache_evictions = 0;
  int32_t most_blocks_in_use = 0;  // while any step runs
  int64_t blocks_given_back = 0;   // KV blocks given back under a sliding window (table entries)
};

// Runs `requests` to completion on a fake clock (1 ms per step: no timeouts fire). With
// `steps_between_arrivals` 0 all are submitted at once; otherwise request i is submitted once
// i x that many steps have run (or earlier, when the scheduler has nothing else to do). The
// scheduler gets the executor's block size and padding rule, as the engine gives it, and
// `num_blocks` of its KV blocks (0: all of them).
inline ParityRun RunToCompletion(Executor& executor, SchedulerOptions options,
                                 const std::vector<Request>& requests,
                                 int64_t steps_between_arrivals = 0, int32_t num_blocks = 0) {
  options.block_size = executor.kv_spec().block_size;
  options.budget_counts_padding = executor.limits().computes_padding;
  options.num_blocks = num_blocks > 0 ? num_blocks : executor.kv_spec().num_blocks;
  options.sliding_window = executor.model_config().KvWindow();
  ParityRun run;
  auto scheduler = Scheduler::Create(options);
  EXPECT_OK(scheduler);
  if (!scheduler.ok()) return run;
  Scheduler& s = **scheduler;
  absl::Time now = absl::UnixEpoch();
  size_t next = 0;
  auto submit_due = [&] {
    while (next < requests.size() &&
           run.steps >= static_cast<int64_t>(next) * steps_between_arrivals) {
      EXPECT_OK(s.Submit(requests[next++], now));
    }
  };
  submit_due();
  while (!s.empty() || next < requests.size()) {
    ScheduleDecision decision = s.Schedule(now);
    if (!decision.plan) {
      if (next < requests.size() && (s.empty() || !decision.wake_at)) {
        EXPECT_OK(s.Submit(requests[next++], now));
        continue;
      }
      now = decision.wake_at.value_or(now + absl::Milliseconds(1));
      continue;
    }
    for (const StepRow& row : decision.plan->rows) {
      if (row.start_pos == 0 && !run.tokens[row.seq_id].empty()) run.recomputed.insert(row.seq_id);
    }
    run.most_blocks_in_use = std::max(run.most_blocks_in_use, s.allocator().num_used());
    absl::StatusOr<StepResult> result = executor.Step(*decision.plan);
    EXPECT_OK(result);
    if (!result.ok()) return run;
    for (const StepRow& row : decision.plan->rows) {  // the tables as the executor holds them
      const absl::Span<const BlockId> table = executor.block_tables().table(row.seq_id);
      run.blocks_given_back = std::max<int64_t>(run.blocks_given_back,
                                                std::count(table.begin(), table.end(), kNoBlock));
    }
    EXPECT_OK(s.OnStepResult(*result, now));
    EXPECT_OK(s.CheckInvariants());
    for (const Event& event : s.TakeEvents()) {
      if (event.kind == Event::Kind::kToken) {
        run.tokens[event.request_id].push_back(event.token);
        run.logprobs[event.request_id].push_back(event.logprob);
      } else {
        EXPECT_TRUE(event.outcome == Outcome::kCompleteLength) << OutcomeName(event.outcome);
      }
    }
    now += absl::Milliseconds(1);
    ++run.steps;
    submit_due();
  }
  run.preemptions = s.stats().preemptions;
  run.prefix_cache_hits = s.stats().prefix_cache_hits;
  run.prefix_cache_evictions = s.allocator().num_evictions();
  EXPECT_EQ(s.allocator().num_free(), options.num_blocks);
  return run;
}

// Twelve greedy requests of 3 to 60 prompt tokens (ids below 320) and 8 to 24 new tokens, on two
// priorities.
inline std::vector<Request> ParityRequests() {
  std::vector<Request> requests;
  for (int id = 1; id <= 12; ++id) {
    Request request;
    request.id = id;
    for (int i = 0; i < 3 + (id * 17) % 58; ++i) {
      request.prompt_tokens.push_back((id * 131 + i * 29) % 320);
    }
    request.max_tokens = 8 + (id * 5) % 17;
    request.priority = 1 + id % 2;
    requests.push_back(std::move(request));
  }
  return requests;
}

// Fourteen greedy requests whose prompts share long prefixes (ids below 320): three families of
// 24 to 45 common tokens, each request adding 0 to 13 of its own (two prompts are equal), with
// 6 to 20 new tokens (75 tokens at most), on two priorities. Ids start at 101.
inline std::vector<Request> SharedPrefixParityRequests() {
  std::vector<Request> requests;
  for (int i = 0; i < 14; ++i) {
    const int family = i % 3;
    Request request;
    request.id = 101 + i;
    const int shared = 24 + 7 * family + (family == 2 ? 7 : 0);
    for (int t = 0; t < shared; ++t) {
      request.prompt_tokens.push_back((family * 97 + t * 13 + 5) % 320);
    }
    const int own = i == 12 ? 0 : (i * 5) % 14;  // 12's prompt is 0's
    for (int t = 0; t < own; ++t) request.prompt_tokens.push_back((i * 41 + t * 17) % 320);
    request.max_tokens = 6 + (i * 7) % 15;
    request.priority = 1 + i % 2;
    requests.push_back(std::move(request));
  }
  return requests;
}

// The configs in configs/, by file name.
inline std::vector<std::string> ShippedConfigs() {
  return {"default.pbtxt", "latency.pbtxt", "throughput.pbtxt", "mixed.pbtxt", "static.pbtxt"};
}

// The scheduler options of a shipped config, with at least two priority levels (the requests use
// two; priorities beyond the config's levels fold into its default level).
inline SchedulerOptions ShippedSchedulerOptions(const std::string& name) {
  absl::StatusOr<v1::ServerConfig> config = LoadServerConfig(TestSourceDir() + "/configs/" + name);
  EXPECT_OK(config);
  if (!config.ok()) return SchedulerOptions();
  SchedulerOptions options = SchedulerOptionsFromConfig(*config);
  if (options.priority_levels < 2) {
    options.priority_levels = 2;
    options.default_priority_level = 2;
    options.queue_policies.clear();
  }
  return options;
}

inline std::string ConfigTestName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.substr(0, info.param.find('.'));
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SCHEDULER_PARITY_HARNESS_H_
