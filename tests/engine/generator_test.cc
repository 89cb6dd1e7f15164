#include "engine/generator.h"

#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = testing::LoadRandomModel("generator", testing::SmallGqaConfig());
    ASSERT_NE(weights_, nullptr);
  }
  std::unique_ptr<CpuExecutor> MakeExecutor(int64_t kv_bytes) {
    CpuExecutorOptions options;
    options.kv_cache_bytes = kv_bytes;
    options.block_size = 4;
    auto executor = CpuExecutor::Create(*weights_, options);
    EXPECT_OK(executor);
    return executor.ok() ? std::move(executor).value() : nullptr;
  }
  std::unique_ptr<ModelWeights> weights_;
};

TEST_F(GeneratorTest, StopsAtMaxTokensOrAStopTokenAndFreesEveryBlock) {
  auto executor = MakeExecutor(4 << 20);
  Generator g(executor.get(), {});
  GenerationRequest a;
  a.prompt = {1, 2, 3, 4, 5, 6, 7};
  a.max_tokens = 9;
  auto first = g.Generate({a});
  ASSERT_OK(first);
  ASSERT_EQ((*first)[0].token_ids.size(), 9u);
  EXPECT_EQ((*first)[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ((*first)[0].logprobs.size(), 9u);
  for (float lp : (*first)[0].logprobs) EXPECT_LE(lp, 0.0f);

  // Stopping on the fourth token it produced: the stop token is kept, nothing follows.
  GenerationRequest b = a;
  b.stop_token_ids = {(*first)[0].token_ids[3]};
  auto second = g.Generate({b, a});
  ASSERT_OK(second);
  const auto& stopped = (*second)[0];
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  const auto stop_at =
      std::find(stopped.token_ids.begin(), stopped.token_ids.end(), b.stop_token_ids[0]);
  ASSERT_NE(stop_at, stopped.token_ids.end());
  EXPECT_EQ(stop_at + 1, stopped.token_ids.end());
  EXPECT_EQ((*second)[1].token_ids, (*first)[0].token_ids);
  EXPECT_EQ(g.allocator().num_free(), g.allocator().num_blocks());
  EXPECT_OK(g.allocator().CheckInvariants());
}

TEST_F(GeneratorTest, TopLogprobsComePerToken) {
  auto executor = MakeExecutor(4 << 20);
  Generator g(executor.get(), {});
  GenerationRequest r;
  r.prompt = {9, 8, 7};
  r.max_tokens = 4;
  r.sampling.num_top_logprobs = 3;
  auto out = g.Generate({r});
  ASSERT_OK(out);
  ASSERT_EQ((*out)[0].top_logprobs.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_EQ((*out)[0].top_logprobs[t].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ((*out)[0].top_logprobs[t][0].token, (*out)[0].token_ids[t]);
    EXPECT_FLOAT_EQ((*out)[0].top_logprobs[t][0].logprob, (*out)[0].logprobs[t]);
  }
}

TEST_F(GeneratorTest, SeededSamplingRepeatsAndDoesNotDependOnTheBatch) {
  auto executor = MakeExecutor(4 << 20);
  Generator g(executor.get(), {});
  GenerationRequest r;
  r.prompt = {4, 40, 44};
  r.max_tokens = 12;
  r.sampling = {0.9f, 50, 0.95f, 1234, 0};
  GenerationRequest other = r;
  other.prompt = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
  other.sampling.seed = 99;
  auto alone = g.Generate({r});
  auto batched = g.Generate({other, r});
  ASSERT_OK(alone);
  ASSERT_OK(batched);
  EXPECT_EQ((*alone)[0].token_ids, (*batched)[1].token_ids);
  GenerationRequest reseeded = r;
  reseeded.sampling.seed = 1235;
  auto different = g.Generate({reseeded});
  ASSERT_OK(different);
  EXPECT_NE((*different)[0].token_ids, (*alone)[0].token_ids);
}

TEST_F(GeneratorTest, RefusesBadRequestsNamingTheField) {
  auto executor = MakeExecutor(4 << 20);
  Generator g(executor.get(), {});
  GenerationRequest ok;
  ok.prompt = {1, 2};
  GenerationRequest empty = ok;
  empty.prompt.clear();
  GenerationRequest vocab = ok;
  vocab.prompt = {1, 320};
  GenerationRequest zero = ok;
  zero.max_tokens = 0;
  GenerationRequest too_long = ok;
  too_long.max_tokens = 512;
  EXPECT_THAT(g.Generate({ok, empty}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("request 1: prompt is empty")));
  EXPECT_THAT(g.Generate({vocab}), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("prompt[1] = 320 is outside")));
  EXPECT_THAT(g.Generate({zero}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_tokens")));
  EXPECT_THAT(g.Generate({too_long}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds the context")));
}

TEST_F(GeneratorTest, CacheExhaustionFailsCleanlyAndFreesBlocks) {
  // 6 blocks of 4 tokens: two 10-token prompts fit, their growth does not.
  auto executor = MakeExecutor(int64_t{6} * 2 * 4 * 2 * 16 * 4 * 4);
  ASSERT_EQ(executor->kv_spec().num_blocks, 6);
  Generator g(executor.get(), {});
  GenerationRequest r;
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  r.max_tokens = 8;
  EXPECT_THAT(g.Generate({r, r}),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("KV cache full")));
  EXPECT_EQ(g.allocator().num_free(), 6);
  auto single = g.Generate({r});
  EXPECT_OK(single);
  EXPECT_EQ(g.allocator().num_free(), 6);
}

}  // namespace
}  // namespace convoy
