// Planning and applying a step allocate nothing per row once running (issue 23): a plan's rows
// reuse the storage of plans that have run (Scheduler::RecyclePlan), and the executor takes the
// plan's block-table changes into its own copy (BlockTables, on the engine thread too), so the
// allocations of a step do not grow with the batch. Counts every operator new while the scheduler
// works, with 64 and then 128 sequences decoding, the next step planned ahead as the engine loop
// does. The median step is compared: a sequence's own lists (its tokens, its block table) still
// grow by doubling now and then, and here every sequence grows in the same step.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "executor/block_tables.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace {

std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};

}  // namespace

// The replacement pair: malloc and free underneath (gcc takes free in a delete for a mismatch).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace convoy::testing {
namespace {

// What a device would return for `plan`: a token for every sampling row (never a stop).
StepResult Run(const StepPlan& plan) {
  StepResult result;
  result.rows.resize(plan.rows.size());
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    result.rows[i].seq_id = plan.rows[i].seq_id;
    if (plan.rows[i].sample) result.rows[i].token = static_cast<int32_t>(11 + i % 7);
  }
  return result;
}

// The median step's allocations over `measured` steps after `warmup`, with `rows` decoding.
int64_t AllocationsPerStep(int32_t rows, int warmup, int measured) {
  SchedulerOptions options = TestOptions();
  options.max_batch_size = rows;
  options.max_num_batched_tokens = 65536;
  options.block_size = 16;
  options.num_blocks = 8192;
  auto created = Scheduler::Create(options);
  EXPECT_OK(created);
  Scheduler& scheduler = **created;
  FakeClock clock;
  for (RequestId id = 1; id <= rows; ++id) {
    EXPECT_OK(scheduler.Submit(MakeRequest(id, 32, 100000), clock.Now()));
  }
  std::optional<StepPlan> ahead;
  std::vector<int64_t> counts;
  BlockTables tables;  // the executor's copy, as Executor::AcceptTables keeps it
  for (int step = 0; step < warmup + measured; ++step) {
    const bool measure = step >= warmup;
    allocations = 0;
    counting = measure;
    StepPlan plan;
    if (ahead) {
      plan = scheduler.CommitAhead(*std::move(ahead), clock.Now());
      ahead.reset();
    } else {
      plan = *scheduler.Schedule(clock.Now()).plan;
    }
    EXPECT_OK(tables.CheckPlan(plan));
    tables.Apply(plan);
    counting = false;
    const StepResult result = Run(plan);  // the device's work, not counted
    counting = measure;
    ahead = scheduler.ScheduleAhead(clock.Now());
    EXPECT_OK(scheduler.OnStepResult(result, clock.Now()));
    std::vector<Event> events = scheduler.TakeEvents();
    scheduler.RecyclePlan(std::move(plan));
    counting = false;
    if (measure) counts.push_back(allocations.load());
    EXPECT_EQ(events.size(), static_cast<size_t>(rows));
    EXPECT_TRUE(ahead.has_value());
    clock.Advance(absl::Milliseconds(2));
  }
  std::sort(counts.begin(), counts.end());
  return counts[counts.size() / 2];
}

TEST(AllocationTest, AStepAllocatesNothingPerRow) {
  const int64_t at_64 = AllocationsPerStep(64, 64, 200);
  const int64_t at_128 = AllocationsPerStep(128, 64, 200);
  // Before plans were recycled every row took two (its token list and block table) and the
  // event list grew by doubling: over 128 a step at 64 rows.
  EXPECT_LE(at_128 - at_64, 2);  // twice the rows: per row it would be 64 more or so
  EXPECT_LT(at_64, 16);
  std::printf("allocations in the median step: %ld at 64 rows, %ld at 128 rows\n",
              static_cast<long>(at_64), static_cast<long>(at_128));
}

}  // namespace
}  // namespace convoy::testing
