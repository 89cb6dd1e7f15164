// A sliding window through every layer (Mistral): a running sequence gives back the KV blocks
// wholly before its next token's window, so its memory stops growing at the window, and its
// tokens stay the reference's. With the fake executor: what the tables hold step by step, the
// prefix cache around given-back blocks, preemption. With the CPU executor on the Mistral fixture
// (tests/fixtures/families/mistral: a window of 6 positions over blocks of 4): transformers'
// greedy tokens (reference.json) through the scheduler, and a long generation whose blocks in use
// never exceed the window's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "kv/block_table.h"
#include "model/model_weights.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "parity_harness.h"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

TEST(BlocksBeforeWindowTest, CountsTheBlocksNoLaterTokenReads) {
  // A window of 6 over blocks of 4: the token at position p reads p - 5 .. p.
  EXPECT_EQ(BlocksBeforeWindow(5, 6, 4), 0);   // reads 0..5
  EXPECT_EQ(BlocksBeforeWindow(8, 6, 4), 0);   // reads 3..8: block 0 holds 3
  EXPECT_EQ(BlocksBeforeWindow(9, 6, 4), 1);   // reads 4..9
  EXPECT_EQ(BlocksBeforeWindow(16, 6, 4), 2);  // reads 11..16
  EXPECT_EQ(BlocksBeforeWindow(100, 0, 4), 0) << "no window";
}

TEST(BlockTableTest, ReleaseBeforeGivesBackLeadingBlocksOnce) {
  BlockAllocator allocator(8);
  BlockTable table(4);
  ASSERT_OK(table.Reserve(20, &allocator));  // 5 blocks
  EXPECT_EQ(table.ReleaseBefore(2, &allocator), 2);
  EXPECT_EQ(table.ReleaseBefore(2, &allocator), 0);
  EXPECT_EQ(table.ReleaseBefore(3, &allocator), 1);
  EXPECT_EQ(table.num_held(), 2);
  EXPECT_EQ(table.capacity(), 20) << "positions keep their entries";
  EXPECT_EQ(table.blocks()[0], kNoBlock);
  EXPECT_EQ(table.blocks()[2], kNoBlock);
  EXPECT_NE(table.blocks()[3], kNoBlock);
  EXPECT_EQ(allocator.num_free(), 6);
  EXPECT_EQ(table.ReleaseBefore(100, &allocator), 2) << "never past the table";
  table.ReleaseAll(&allocator);
  EXPECT_EQ(allocator.num_free(), 8);
  EXPECT_OK(allocator.CheckInvariants());
}

SchedulerOptions WindowOptions() {
  SchedulerOptions options = TestOptions();  // blocks of 4
  options.sliding_window = 6;
  return options;
}

// The blocks a sequence holds once its prompt is computed stay within the window's: 6 positions
// span at most 3 blocks of 4, with the next token's block.
TEST(SlidingWindowSchedulerTest, ASequenceStopsGrowingAtTheWindow) {
  Harness h(WindowOptions());
  const Request request = MakeRequest(1, 5, 40);
  ASSERT_OK(h.Submit(request));
  h.RunUntilIdle();  // the harness checks the scheduler's invariants after every step
  // What each step's row held (one sequence: every block in use), as the executor held it.
  int64_t most = 0;
  for (const auto& step : h.executor.tables()) {
    const std::vector<BlockId>& table = step.front();
    most = std::max<int64_t>(most,
                             std::ssize(table) - std::count(table.begin(), table.end(), kNoBlock));
  }
  EXPECT_EQ(most, 3);
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(request.prompt_tokens, 40, 6));
  EXPECT_EQ(h.scheduler->allocator().num_free(), h.scheduler->allocator().num_blocks());
  // The executor's copy says which blocks are gone: the last row's first entries.
  const std::vector<BlockId>& last = h.executor.tables().back().back();
  EXPECT_EQ(last.front(), kNoBlock);
  EXPECT_NE(last.back(), kNoBlock);
}

// Without a window every block stays until the sequence ends.
TEST(SlidingWindowSchedulerTest, WithoutAWindowEveryBlockStays) {
  Harness h(TestOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 5, 40)));
  h.RunUntilIdle();
  const std::vector<BlockId>& last = h.executor.tables().back().front();
  EXPECT_EQ(last.size(), 11u);  // 44 tokens, blocks of 4
  EXPECT_EQ(std::count(last.begin(), last.end(), kNoBlock), 0);
}

// Blocks are published as they fill, before they are given back, and stay in the prefix cache
// while nothing needs them: a second request with the same prompt takes every block but its last
// prompt block.
TEST(SlidingWindowSchedulerTest, GivenBackBlocksStayInThePrefixCache) {
  SchedulerOptions options = WindowOptions();
  options.prefill_chunk_size = 8;  // the prompt's blocks are given back chunk by chunk
  Harness h(options);
  const Request first = MakeRequest(1, 30, 4);
  ASSERT_OK(h.Submit(first));
  h.RunUntilIdle();
  Request second = first;
  second.id = 2;
  ASSERT_OK(h.Submit(second));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[2], h.tokens[1]);
  EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 28);
}

// With a window shorter than a block, a block can be given back before the next one fills: the
// next one then has no chain to be published under, and a follow-up request (the first's prompt
// and answer) finds the chain up to the gap only.
TEST(SlidingWindowSchedulerTest, TheCachedChainStopsAtABlockGivenBackUnpublished) {
  SchedulerOptions options = TestOptions();  // blocks of 4
  options.sliding_window = 3;
  Harness h(options);
  const Request first = MakeRequest(1, 12, 8);
  ASSERT_OK(h.Submit(first));
  h.RunUntilIdle();
  Request follow_up = first;
  follow_up.id = 2;
  follow_up.prompt_tokens.insert(follow_up.prompt_tokens.end(), h.tokens[1].begin(),
                                 h.tokens[1].end());
  ASSERT_OK(h.Submit(follow_up));
  h.RunUntilIdle();
  // Blocks 0-2 were published with the prompt. Block 2 (positions 8-11) left the window once
  // position 14 was next (it reads 12-14); block 3 filled only with position 15.
  EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 12);
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(follow_up.prompt_tokens, 8, 3));
}

// Two sequences of 22 tokens (6 blocks each, 3 under the window): in a cache of 6 blocks the
// window lets them run side by side, where without it one is preempted.
TEST(SlidingWindowSchedulerTest, TheWindowLetsSequencesShareACacheTheyWouldNotFitWhole) {
  for (const int window : {6, 0}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    SchedulerOptions options = TestOptions();
    options.sliding_window = window;
    options.num_blocks = 6;
    options.enable_prefix_caching = false;
    Harness h(options);
    const Request a = MakeRequest(1, 10, 12);
    const Request b = MakeRequest(2, 10, 12);
    ASSERT_OK(h.Submit(a));
    ASSERT_OK(h.Submit(b));
    h.RunUntilIdle();
    EXPECT_EQ(h.tokens[1], FakeExpectedTokens(a.prompt_tokens, 12, window));
    EXPECT_EQ(h.tokens[2], FakeExpectedTokens(b.prompt_tokens, 12, window));
    EXPECT_EQ(h.scheduler->allocator().num_free(), 6);
    EXPECT_EQ(h.scheduler->stats().preemptions > 0, window == 0);
  }
}

// A sequence preempted after giving blocks back (a smaller max_batch_size preempts the latest
// admitted) returns its whole table, kNoBlock entries and all, and resumes from its start, giving
// back again as it goes.
TEST(SlidingWindowSchedulerTest, APreemptedSequenceResumesAndGivesBackAgain) {
  SchedulerOptions options = WindowOptions();
  options.enable_prefix_caching = false;
  Harness h(options);
  const Request a = MakeRequest(1, 10, 12);
  const Request b = MakeRequest(2, 10, 12);
  ASSERT_OK(h.Submit(a));
  ASSERT_OK(h.Submit(b));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.Step());
  ASSERT_EQ(std::count(h.executor.tables().back().back().begin(),
                       h.executor.tables().back().back().end(), kNoBlock),
            1);
  SchedulerOptions one = options;
  one.max_batch_size = 1;
  ASSERT_OK(h.scheduler->Reconfigure(one));
  EXPECT_EQ(h.scheduler->stats().preemptions, 1);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Step());
  ASSERT_OK(h.scheduler->Reconfigure(options));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(a.prompt_tokens, 12, 6));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(b.prompt_tokens, 12, 6));
  EXPECT_EQ(h.scheduler->allocator().num_free(), h.scheduler->allocator().num_blocks());
}

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> tokens;
};

Reference LoadMistralReference() {
  const nlohmann::json j = nlohmann::json::parse(
      ReadBytes(TestSourceDir() + "/tests/fixtures/families/mistral/reference.json"));
  return {j["prompts"].get<std::vector<std::vector<int32_t>>>(),
          j["tokens"].get<std::vector<std::vector<int32_t>>>()};
}

class MistralWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto weights = ModelWeights::Load(TestSourceDir() + "/tests/fixtures/families/mistral");
    ASSERT_OK(weights);
    weights_ = std::move(weights).value();
    ASSERT_EQ(weights_->config().KvWindow(), 6);
    CpuExecutorOptions options;
    options.weight_format = CpuWeightFormat::kF32;
    options.kv_cache_bytes = 1 << 20;
    options.block_size = 4;
    auto executor = CpuExecutor::Create(*weights_, options);
    ASSERT_OK(executor);
    executor_ = std::move(executor).value();
  }
  SchedulerOptions Options() const {
    SchedulerOptions options = TestOptions();
    options.sliding_window = executor_->model_config().KvWindow();
    options.prefill_chunk_size = 4;  // prompts in chunks, as the family reference test runs them
    return options;
  }
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CpuExecutor> executor_;
};

// Both sequences side by side, blocks given back as they leave the window: transformers' tokens.
TEST_F(MistralWindowTest, GreedyTokensAreTransformersWhileBlocksAreGivenBack) {
  const Reference ref = LoadMistralReference();
  std::vector<Request> requests;
  for (size_t s = 0; s < ref.prompts.size(); ++s) {
    Request request;
    request.id = static_cast<RequestId>(s + 1);
    request.prompt_tokens = ref.prompts[s];
    request.max_tokens = static_cast<int32_t>(ref.tokens[s].size());
    requests.push_back(request);
  }
  const ParityRun run = RunToCompletion(*executor_, Options(), requests);
  for (size_t s = 0; s < ref.prompts.size(); ++s) {
    EXPECT_EQ(run.tokens.at(static_cast<RequestId>(s + 1)), ref.tokens[s]) << "sequence " << s;
  }
  // The longer sequence (16 positions) gave back blocks before its last steps.
  EXPECT_GT(run.blocks_given_back, 0);
}

// A generation ten times the window: its first tokens are transformers', and once its prompt is
// computed it never holds more than the window's 3 blocks.
TEST_F(MistralWindowTest, ALongGenerationHoldsTheWindowsBlocksOnly) {
  const Reference ref = LoadMistralReference();
  Request request;
  request.id = 1;
  request.prompt_tokens = ref.prompts[1];  // 5 tokens: 2 blocks
  request.max_tokens = 60;
  const ParityRun run = RunToCompletion(*executor_, Options(), {request});
  const std::vector<int32_t>& tokens = run.tokens.at(1);
  ASSERT_EQ(tokens.size(), 60u);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + ref.tokens[1].size()),
            ref.tokens[1]);
  EXPECT_EQ(run.most_blocks_in_use, 3);
}

}  // namespace
}  // namespace convoy::testing
