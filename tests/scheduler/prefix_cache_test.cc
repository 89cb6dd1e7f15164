// Prefix caching in the scheduler, against the fake executor: what the step plans compute when a
// prefix is cached, the opt-outs, preemption, KV admission and the counters.
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "kv/block_hash.h"

namespace convoy::testing {
namespace {

// `shared` tokens common to every request (ids 1000+), then `own` tokens that differ by id.
Request SharedPrefixRequest(RequestId id, int shared, int own, int max_tokens) {
  Request request;
  request.id = id;
  for (int i = 0; i < shared; ++i) request.prompt_tokens.push_back(1000 + i);
  for (int32_t t : MakePrompt(id, own)) request.prompt_tokens.push_back(t);
  request.max_tokens = max_tokens;
  return request;
}

// The first row each request had, in plan order.
const StepRow* FirstRow(const Harness& h, RequestId id) {
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      if (row.seq_id == id) return &row;
    }
  }
  return nullptr;
}

// Two different blocks of `block_size` tokens (ids below 2^20) with the same 64-bit hash
// (HashBlock after no parent), as a client could build them: the hash is a chain of invertible
// mixes, so two prefixes whose states agree in their high 32 bits are made to collide by their
// last tokens. About 2^16 prefixes are tried (a birthday search).
std::pair<std::vector<int32_t>, std::vector<int32_t>> CollidingBlocks(int32_t block_size) {
  // The hash's state after every token but the last, as HashBlock computes it.
  using block_hash_internal::Mix;
  auto state = [&](const std::vector<int32_t>& head) {
    uint64_t h = Mix(0 ^ 0x9e3779b97f4a7c15ull);
    for (int32_t t : head) h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
    return h;
  };
  absl::flat_hash_map<uint32_t, std::vector<int32_t>> by_high;
  for (int32_t n = 0;; ++n) {
    std::vector<int32_t> head(block_size - 1, 7);
    head[0] = n % 1000;
    head[1 % (block_size - 1)] += n / 1000;
    const uint64_t s = state(head);
    auto [it, fresh] = by_high.emplace(static_cast<uint32_t>(s >> 32), head);
    if (fresh || it->second == head) continue;
    const uint64_t other = state(it->second);
    // s ^ (a + 1) == other ^ (b + 1): the low 32 bits decide b for each a.
    for (uint64_t a = 0; a < (1u << 20); ++a) {
      const uint64_t b_plus_1 = (s ^ other ^ (a + 1)) & 0xffffffffull;
      if (b_plus_1 == 0 || b_plus_1 > (1u << 20)) continue;
      std::vector<int32_t> first = head, second = it->second;
      first.push_back(static_cast<int32_t>(a));
      second.push_back(static_cast<int32_t>(b_plus_1 - 1));
      return {first, second};
    }
  }
}

TEST(PrefixCacheTest, ABlockWhoseHashCollidesIsNotReused) {
  const SchedulerOptions options = TestOptions();  // 4 tokens per block
  const auto [first_block, second_block] = CollidingBlocks(options.block_size);
  ASSERT_NE(first_block, second_block);
  ASSERT_EQ(HashBlock(0, first_block), HashBlock(0, second_block));
  Harness h(options);
  Request first;
  first.id = 1;
  first.prompt_tokens = first_block;
  first.prompt_tokens.insert(first.prompt_tokens.end(), {5, 6, 7});
  first.max_tokens = 4;
  ASSERT_OK(h.Submit(first));
  h.RunUntilIdle();
  Request second = first;
  second.id = 2;
  std::copy(second_block.begin(), second_block.end(), second.prompt_tokens.begin());
  ASSERT_OK(h.Submit(second));
  h.RunUntilIdle();
  const StepRow* row = FirstRow(h, 2);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->start_pos, 0) << "the first request's block was taken for other tokens";
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(second.prompt_tokens, 4));
  EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 0);
}

TEST(PrefixCacheTest, ASecondRequestComputesOnlyWhatFollowsTheCachedBlocks) {
  Harness h(TestOptions());  // 4 tokens per block
  const Request first = SharedPrefixRequest(1, 12, 3, 4);
  ASSERT_OK(h.Submit(first));
  h.RunUntilIdle();
  const Request second = SharedPrefixRequest(2, 12, 5, 4);
  ASSERT_OK(h.Submit(second));
  h.RunUntilIdle();
  const StepRow* row = FirstRow(h, 2);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->start_pos, 12);
  EXPECT_EQ(row->token_ids.size(), 5u);
  EXPECT_TRUE(row->sample);
  // Its first three blocks are the first request's.
  const StepRow* first_row = FirstRow(h, 1);
  ASSERT_NE(first_row, nullptr);
  EXPECT_EQ(
      std::vector<BlockId>(row->block_table.begin(), row->block_table.begin() + 3),
      std::vector<BlockId>(first_row->block_table.begin(), first_row->block_table.begin() + 3));
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(first.prompt_tokens, 4));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(second.prompt_tokens, 4));
  EXPECT_EQ(h.scheduler->stats().prefix_cache_queries, 15 + 17);
  EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 12);
  // Each request's final event says how much of its prompt the cache gave it.
  EXPECT_EQ(h.Final(1).cached_prompt_tokens, 0);
  EXPECT_EQ(h.Final(2).cached_prompt_tokens, 12);
}

TEST(PrefixCacheTest, RequestsRunningTogetherShareBlocksPublishedByAnEarlierStep) {
  SchedulerOptions options = TestOptions();
  Harness h(options);
  ASSERT_OK(h.Submit(SharedPrefixRequest(1, 16, 2, 6)));
  ASSERT_TRUE(h.Step());  // 1's prompt, whole
  ASSERT_OK(h.Submit(SharedPrefixRequest(2, 16, 2, 6)));
  ASSERT_TRUE(h.Step());  // 1 decodes; 2 reuses 1's four full blocks while 1 holds them
  const StepRow& row = h.last_plan().rows.back();
  ASSERT_EQ(row.seq_id, 2);
  EXPECT_EQ(row.start_pos, 16);
  EXPECT_EQ(h.scheduler->allocator().ref_count(row.block_table[0]), 2);
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(SharedPrefixRequest(2, 16, 2, 6).prompt_tokens, 6));
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(SharedPrefixRequest(1, 16, 2, 6).prompt_tokens, 6));
}

TEST(PrefixCacheTest, AWhollyCachedPromptRecomputesItsLastBlock) {
  Harness h(TestOptions());
  ASSERT_OK(h.Submit(SharedPrefixRequest(1, 12, 0, 3)));
  h.RunUntilIdle();
  ASSERT_OK(h.Submit(SharedPrefixRequest(2, 12, 0, 3)));
  h.RunUntilIdle();
  const StepRow* row = FirstRow(h, 2);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->start_pos, 8);
  EXPECT_EQ(row->token_ids.size(), 4u);
  // The recomputed block is the second request's own, not the cached one.
  const StepRow* first_row = FirstRow(h, 1);
  EXPECT_NE(row->block_table[2], first_row->block_table[2]);
  EXPECT_EQ(h.tokens[2], h.tokens[1]);
  EXPECT_EQ(h.Final(2).cached_prompt_tokens, 8);
}

TEST(PrefixCacheTest, TheConfigSwitchAndTheRequestOptOutComputeEveryToken) {
  for (const bool server_on : {false, true}) {
    SchedulerOptions options = TestOptions();
    options.enable_prefix_caching = server_on;
    Harness h(options);
    ASSERT_OK(h.Submit(SharedPrefixRequest(1, 12, 3, 2)));
    h.RunUntilIdle();
    Request second = SharedPrefixRequest(2, 12, 3, 2);
    second.use_prefix_cache = server_on ? false : true;
    ASSERT_OK(h.Submit(second));
    h.RunUntilIdle();
    const StepRow* row = FirstRow(h, 2);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->start_pos, 0) << server_on;
    EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 0);
    EXPECT_EQ(h.Final(2).cached_prompt_tokens, 0);
    // The first request's 16 computed tokens (15 of the prompt, 1 generated) fill 4 blocks.
    EXPECT_EQ(h.scheduler->allocator().num_cached(), server_on ? 4 : 0);
    EXPECT_EQ(h.tokens[2], FakeExpectedTokens(second.prompt_tokens, 2));
  }
}

// A preempted sequence's blocks go to the cache; when it comes back before they are evicted, it
// recomputes only what follows them.
TEST(PrefixCacheTest, APreemptedSequenceResumesFromItsCachedBlocks) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 8;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 8, 16)));
  ASSERT_OK(h.Submit(MakeRequest(2, 8, 16)));
  h.RunUntilIdle();
  ASSERT_GT(h.scheduler->stats().preemptions, 0);
  bool resumed_from_cache = false;
  std::map<RequestId, int64_t> next_pos;
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      // A row starting before where the sequence's last one ended is a resumption.
      if (row.start_pos < next_pos[row.seq_id] && row.start_pos > 0) resumed_from_cache = true;
      next_pos[row.seq_id] = row.start_pos + static_cast<int64_t>(row.token_ids.size());
    }
  }
  EXPECT_TRUE(resumed_from_cache);
  EXPECT_GT(h.scheduler->stats().prefix_cache_hits, 0);
  // What a resumption takes from the cache is no part of the prompt's count: the prompts were
  // new when the requests were first scheduled.
  EXPECT_EQ(h.Final(1).cached_prompt_tokens, 0);
  EXPECT_EQ(h.Final(2).cached_prompt_tokens, 0);
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 8), 16));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(MakePrompt(2, 8), 16));
  EXPECT_EQ(h.scheduler->allocator().num_free(), 8);
}

// KV admission counts a request's cached prefix, in use by another, as available for it.
TEST(PrefixCacheTest, ACachedPrefixInUseCountsAsAvailableAtAdmission) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 7;
  Harness h(options);
  // Each needs 5 blocks (17 tokens + 3 generated); 4 of them are the shared prefix.
  ASSERT_OK(h.Submit(SharedPrefixRequest(1, 16, 1, 3)));
  ASSERT_TRUE(h.Step());
  ASSERT_OK(h.Submit(SharedPrefixRequest(2, 16, 1, 3)));
  ASSERT_TRUE(h.Step());
  // Without sharing 2 would need 5 of the 2 free blocks; with it, 1.
  ASSERT_EQ(h.last_plan().rows.size(), 2u);
  EXPECT_EQ(h.last_plan().rows[1].seq_id, 2);
  EXPECT_EQ(h.last_plan().rows[1].start_pos, 16);
  h.RunUntilIdle();
  EXPECT_EQ(h.scheduler->stats().preemptions, 0);
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(SharedPrefixRequest(2, 16, 1, 3).prompt_tokens, 3));
}

// With chunked prefill, blocks filled by an earlier chunk are published and reused at once.
TEST(PrefixCacheTest, ChunkedPrefillPublishesEachChunksBlocks) {
  SchedulerOptions options = TestOptions();
  options.prefill_chunk_size = 8;
  Harness h(options);
  ASSERT_OK(h.Submit(SharedPrefixRequest(1, 24, 1, 2)));
  ASSERT_TRUE(h.Step());  // tokens 0-7
  ASSERT_TRUE(h.Step());  // tokens 8-15
  EXPECT_EQ(h.scheduler->allocator().num_cached(), 4);
  // The second request shares the published 16 tokens only (what follows differs from the first's
  // blocks in flight), so it starts at once.
  ASSERT_OK(h.Submit(SharedPrefixRequest(2, 16, 9, 2)));
  ASSERT_TRUE(h.Step());
  const StepRow& row = h.last_plan().rows.back();
  ASSERT_EQ(row.seq_id, 2);
  EXPECT_EQ(row.start_pos, 16);
  EXPECT_EQ(row.token_ids.size(), 8u);
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(SharedPrefixRequest(2, 16, 9, 2).prompt_tokens, 2));
}

// The n choices of a request (or requests arriving together with one prompt) compute it once: the
// others wait for the first to publish its blocks, then take them from the cache.
TEST(PrefixCacheTest, RequestsArrivingTogetherComputeTheirSharedPromptOnce) {
  for (const bool ahead : {false, true}) {
    SCOPED_TRACE(ahead ? "planned ahead" : "one step at a time");
    Harness h(TestOptions());  // 4 tokens per block
    h.plan_ahead = ahead;
    for (RequestId id : {1, 2, 3}) ASSERT_OK(h.Submit(SharedPrefixRequest(id, 16, 2, 4)));
    ASSERT_OK(h.Submit(MakeRequest(4, 6, 4)));  // behind them, sharing nothing: not held back
    ASSERT_TRUE(h.Step());
    EXPECT_EQ(RowIds(h.plans()[0]), (std::vector<RequestId>{1, 4}));
    h.RunUntilIdle();
    for (RequestId id : {2, 3}) {
      const StepRow* row = FirstRow(h, id);
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(row->start_pos, 16) << id;
      EXPECT_EQ(row->token_ids.size(), 2u) << id;
      EXPECT_EQ(h.tokens[id],
                FakeExpectedTokens(SharedPrefixRequest(id, 16, 2, 4).prompt_tokens, 4));
    }
    EXPECT_EQ(h.tokens[1], FakeExpectedTokens(SharedPrefixRequest(1, 16, 2, 4).prompt_tokens, 4));
    EXPECT_EQ(h.tokens[4], FakeExpectedTokens(MakeRequest(4, 6, 4).prompt_tokens, 4));
    EXPECT_EQ(h.scheduler->stats().prefix_cache_hits, 2 * 16);
  }
}

// Waiting pays when the shared part is at least what the request computes after it; a short common
// prefix starts at once, and so does every request of a static batch (which no one joins later).
TEST(PrefixCacheTest, AShortSharedPrefixOrAStaticBatchDoesNotWait) {
  {
    Harness h(TestOptions());
    ASSERT_OK(h.Submit(SharedPrefixRequest(1, 8, 9, 2)));
    ASSERT_OK(h.Submit(SharedPrefixRequest(2, 8, 9, 2)));
    ASSERT_TRUE(h.Step());
    EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
  }
  {
    SchedulerOptions options = TestOptions();
    options.mode = BatchingMode::kStatic;
    Harness h(options);
    ASSERT_OK(h.Submit(SharedPrefixRequest(1, 16, 2, 2)));
    ASSERT_OK(h.Submit(SharedPrefixRequest(2, 16, 2, 2)));
    ASSERT_TRUE(h.Step());
    EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1, 2}));
  }
}

// A request waits through every chunk of the prefill it shares, and goes on with what is published
// when that sequence ends before the rest.
TEST(PrefixCacheTest, ARequestWaitsThroughTheSharedChunksAndNotForACancelledSequence) {
  SchedulerOptions options = TestOptions();
  options.prefill_chunk_size = 8;
  for (const bool cancel : {false, true}) {
    SCOPED_TRACE(cancel ? "the first is cancelled" : "the first runs");
    Harness h(options);
    ASSERT_OK(h.Submit(SharedPrefixRequest(1, 32, 1, 2)));
    ASSERT_OK(h.Submit(SharedPrefixRequest(2, 32, 1, 2)));
    ASSERT_TRUE(h.Step());  // 1: tokens 0-7; 2 waits
    ASSERT_TRUE(h.Step());  // 1: tokens 8-15; 2 waits
    EXPECT_EQ(RowIds(h.last_plan()), (std::vector<RequestId>{1}));
    if (cancel) ASSERT_OK(h.Cancel(1));
    h.RunUntilIdle();
    const StepRow* row = FirstRow(h, 2);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->start_pos, cancel ? 16 : 32);
    EXPECT_EQ(h.tokens[2], FakeExpectedTokens(SharedPrefixRequest(2, 32, 1, 2).prompt_tokens, 2));
  }
}

class EvictionObserver : public SchedulerObserver {
 public:
  void OnStepPlanned(const StepStats& stats) override {
    evictions += stats.prefix_cache_evictions;
    hits += stats.prefix_cache_hits;
    queries += stats.prefix_cache_queries;
    cached = stats.kv_blocks_cached;
  }
  int64_t evictions = 0;
  int64_t hits = 0;
  int64_t queries = 0;
  int32_t cached = 0;
};

TEST(PrefixCacheTest, EvictionFreesTheLeastRecentlyUsedPrefixFirst) {
  SchedulerOptions options = TestOptions();
  options.block_size = 4;
  options.num_blocks = 6;
  EvictionObserver observer;
  Harness h(options, &observer);
  // A, then B: each caches 2 full blocks (9 tokens + 1 generated = 3 blocks, 2 published).
  Request a = SharedPrefixRequest(1, 8, 1, 1);
  Request b = SharedPrefixRequest(2, 0, 9, 1);
  ASSERT_OK(h.Submit(a));
  h.RunUntilIdle();
  ASSERT_OK(h.Submit(b));
  h.RunUntilIdle();
  EXPECT_EQ(h.scheduler->allocator().num_cached(), 4);
  // C needs 4 new blocks: the 2 uncached ones, then A's (released longest ago), last block
  // first.
  ASSERT_OK(h.Submit(SharedPrefixRequest(3, 0, 13, 1)));
  h.RunUntilIdle();
  EXPECT_EQ(observer.evictions, 2);
  // B's prefix is still cached, A's is gone.
  Request b_again = b;
  b_again.id = 4;
  Request a_again = a;
  a_again.id = 5;
  ASSERT_OK(h.Submit(b_again));
  h.RunUntilIdle();
  EXPECT_EQ(FirstRow(h, 4)->start_pos, 8);
  ASSERT_OK(h.Submit(a_again));
  h.RunUntilIdle();
  EXPECT_EQ(FirstRow(h, 5)->start_pos, 0);
  EXPECT_EQ(observer.hits, h.scheduler->stats().prefix_cache_hits);
  EXPECT_EQ(observer.queries, h.scheduler->stats().prefix_cache_queries);
  EXPECT_GT(observer.cached, 0);
  EXPECT_EQ(h.tokens[5], h.tokens[1]);
  EXPECT_EQ(h.tokens[4], h.tokens[2]);
}

}  // namespace
}  // namespace convoy::testing
