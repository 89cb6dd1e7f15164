// A sequence's logits and greedy tokens do not depend on what shares its step: alone, padded in a
// batch of other lengths, or with its prompt split into chunks. Bit for bit: the batch-invariant
// executor (cpu_executor.h) promises the same bits, on several random models and with each KV
// cache type.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "engine/generator.h"
#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "kv/block_table.h"
#include "status_matchers.h"
#include "test_models.h"

namespace convoy {
namespace {

std::vector<int32_t> Prompt(int32_t length, int32_t salt, int64_t vocab) {
  std::vector<int32_t> p(length);
  for (int32_t i = 0; i < length; ++i)
    p[i] = static_cast<int32_t>((i * 37 + salt * 101 + 3) % vocab);
  return p;
}

// Where two logit vectors first differ in their bits (-1: nowhere; the size when only their
// sizes differ).
int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

// The random models: SmallGqaConfig with a few seeds, a wider one whose products span several
// panels and row tiles (hidden 160: not a multiple of the kernels' 16 or 64 outputs), and one with
// heads of 64 (the attention kernels that take 64 elements of a head at a time).
ModelConfig ModelFor(int model) {
  ModelConfig c = testing::SmallGqaConfig();
  if (model == 2) {
    c.hidden_size = 160;
    c.intermediate_size = 424;
    c.num_attention_heads = 10;
    c.num_key_value_heads = 5;
    c.vocab_size = 1001;
  }
  if (model == 3) {
    c.hidden_size = 256;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 64;
  }
  return c;
}

// Weights, skip_padding, model, KV cache type.
class BatchInvarianceTest
    : public ::testing::TestWithParam<std::tuple<CpuWeightFormat, bool, int, KvDtype>> {
 protected:
  void SetUp() override {
    const int model = std::get<2>(GetParam());
    weights_ = testing::LoadRandomModel("invariance" + std::to_string(model), ModelFor(model),
                                        DType::kF32, 11 + model);
    ASSERT_NE(weights_, nullptr);
    CpuExecutorOptions options;
    options.weight_format = std::get<0>(GetParam());
    options.skip_padding = std::get<1>(GetParam());
    options.kv_cache_bytes = 16 << 20;
    options.block_size = 8;
    options.kv_dtype = std::get<3>(GetParam());
    auto executor = CpuExecutor::Create(*weights_, options);
    ASSERT_OK(executor);
    executor_ = std::move(executor).value();
    ASSERT_TRUE(executor_->batch_invariant());
    allocator_ = std::make_unique<BlockAllocator>(executor_->kv_spec().num_blocks);
  }

  // Runs the prompts through prefill steps of at most `chunk` tokens each (0: whole prompts),
  // all rows together, and returns each prompt's logits at every position.
  std::vector<std::vector<float>> PrefillLogits(const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t chunk) {
    std::vector<BlockTable> tables;
    std::vector<std::vector<float>> logits(prompts.size());
    std::vector<int32_t> done(prompts.size(), 0);
    for (size_t i = 0; i < prompts.size(); ++i)
      tables.emplace_back(executor_->kv_spec().block_size);
    while (true) {
      StepPlan plan;
      std::vector<size_t> which;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const int32_t len = static_cast<int32_t>(prompts[i].size());
        if (done[i] == len) continue;
        const int32_t n = chunk > 0 ? std::min(chunk, len - done[i]) : len;
        StepRow row;
        row.seq_id = static_cast<int64_t>(i);
        row.start_pos = done[i];
        row.token_ids.assign(prompts[i].begin() + done[i], prompts[i].begin() + done[i] + n);
        EXPECT_OK(tables[i].Reserve(done[i] + n, allocator_.get()));
        row.block_table = tables[i].blocks();
        row.return_logits = true;
        row.sample = done[i] + n == len;
        plan.rows.push_back(std::move(row));
        which.push_back(i);
      }
      if (which.empty()) break;
      auto result = executor_->Step(plan);
      EXPECT_OK(result);
      if (!result.ok()) break;
      for (size_t k = 0; k < which.size(); ++k) {
        const auto& l = result->rows[k].logits;
        logits[which[k]].insert(logits[which[k]].end(), l.begin(), l.end());
        done[which[k]] += static_cast<int32_t>(plan.rows[k].token_ids.size());
      }
    }
    for (BlockTable& t : tables) t.ReleaseAll(allocator_.get());
    return logits;
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<BlockAllocator> allocator_;
};

TEST_P(BatchInvarianceTest, LogitsDoNotDependOnBatchOrChunking) {
  const int64_t vocab = weights_->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {Prompt(5, 1, vocab), Prompt(41, 2, vocab),
                                                     Prompt(1, 3, vocab), Prompt(17, 4, vocab)};
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(PrefillLogits({p}, 0)[0]);
  const auto batched = PrefillLogits(prompts, 0);
  const auto chunked = PrefillLogits(prompts, 7);
  const auto chunked_alone = PrefillLogits({prompts[1]}, 16);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(batched[i].size(), prompts[i].size() * vocab);
    EXPECT_EQ(FirstDifference(batched[i], alone[i]), -1) << "prompt " << i << " batched";
    EXPECT_EQ(FirstDifference(chunked[i], alone[i]), -1) << "prompt " << i << " chunked";
  }
  EXPECT_EQ(FirstDifference(chunked_alone[0], alone[1]), -1);
  EXPECT_EQ(allocator_->num_free(), allocator_->num_blocks());
}

TEST_P(BatchInvarianceTest, GreedyTokensDoNotDependOnBatchOrChunking) {
  const int64_t vocab = weights_->config().vocab_size;
  std::vector<GenerationRequest> requests;
  for (int32_t len : {3, 30, 12, 1, 57}) {
    GenerationRequest r;
    r.prompt = Prompt(len, len, vocab);
    r.max_tokens = 10 + len % 7;
    requests.push_back(r);
  }
  std::vector<GenerationOutput> alone;
  for (const auto& r : requests) {
    Generator g(executor_.get(), {});
    auto out = g.Generate({r});
    ASSERT_OK(out);
    alone.push_back((*out)[0]);
  }
  for (int32_t chunk : {0, 5, 16}) {
    Generator g(executor_.get(), {chunk});
    auto out = g.Generate(requests);
    ASSERT_OK(out);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ((*out)[i].token_ids, alone[i].token_ids) << "request " << i << " chunk " << chunk;
      ASSERT_EQ((*out)[i].logprobs.size(), alone[i].logprobs.size());
      EXPECT_EQ(std::memcmp((*out)[i].logprobs.data(), alone[i].logprobs.data(),
                            sizeof(float) * alone[i].logprobs.size()),
                0)
          << "request " << i << " chunk " << chunk;
    }
    EXPECT_EQ(g.allocator().num_free(), g.allocator().num_blocks());
  }
}

std::string Name(
    const ::testing::TestParamInfo<std::tuple<CpuWeightFormat, bool, int, KvDtype>>& info) {
  std::string name = std::get<0>(info.param) == CpuWeightFormat::kF32 ? "F32" : "BF16";
  name += std::get<1>(info.param) ? "SkipPadding" : "Padded";
  name += "Model";
  name += std::to_string(std::get<2>(info.param));
  if (std::get<3>(info.param) != KvDtype::kF32) {
    name += "Kv";
    name += KvDtypeName(std::get<3>(info.param));
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(WeightFormatsAndPadding, BatchInvarianceTest,
                         ::testing::Combine(::testing::Values(CpuWeightFormat::kF32,
                                                              CpuWeightFormat::kBF16),
                                            ::testing::Bool(), ::testing::Values(0, 1, 2),
                                            ::testing::Values(KvDtype::kF32)),
                         Name);

INSTANTIATE_TEST_SUITE_P(KvCacheTypes, BatchInvarianceTest,
                         ::testing::Combine(::testing::Values(CpuWeightFormat::kF32),
                                            ::testing::Bool(), ::testing::Values(0, 2, 3),
                                            ::testing::Values(KvDtype::kBF16, KvDtype::kInt8)),
                         Name);

}  // namespace
}  // namespace convoy
