// Tiny Llama GGUF files (mixed quantized types, Q/K rows permuted as llama.cpp writes them)
// through ModelWeights and the CPU executor in fp32, against the logits of transformers'
// LlamaForCausalLM built from gguf-py's dequantization of the same files
// (scripts/fixtures/gguf_fixtures.py).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "kv/block_allocator.h"
#include "kv/block_table.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"

namespace convoy {
namespace {

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<float>>> logits;  // [prompt][position][vocab]
};

std::string FixtureDir() { return TestSourceDir() + "/tests/fixtures/gguf/llama/"; }

Reference LoadReference(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(testing::ReadBytes(path));
  return {j["prompts"].get<std::vector<std::vector<int32_t>>>(),
          j["logits"].get<std::vector<std::vector<std::vector<float>>>>()};
}

// max |got - want| / max |want| over one prompt's logits.
double RelativeError(const std::vector<float>& got, const std::vector<std::vector<float>>& want) {
  double max_diff = 0.0, max_ref = 0.0;
  size_t i = 0;
  for (const auto& row : want) {
    for (float w : row) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i++]) - w));
      max_ref = std::max(max_ref, std::abs(static_cast<double>(w)));
    }
  }
  return max_diff / max_ref;
}

class GgufReferenceTest : public ::testing::TestWithParam<std::string> {};

// All prompts in one padded batch, then each alone: both match transformers within 1e-4.
TEST_P(GgufReferenceTest, LogitsMatchTransformersInFp32) {
  auto weights = ModelWeights::Load(FixtureDir() + GetParam() + ".gguf");
  ASSERT_OK(weights);
  CpuExecutorOptions options;
  options.weight_format = CpuWeightFormat::kF32;
  options.kv_cache_bytes = 8 << 20;
  options.block_size = 4;
  auto executor = CpuExecutor::Create(**weights, options);
  ASSERT_OK(executor);
  const Reference ref = LoadReference(FixtureDir() + GetParam() + ".reference.json");
  ASSERT_FALSE(ref.prompts.empty());
  const int64_t vocab = (*weights)->config().vocab_size;
  BlockAllocator allocator((*executor)->kv_spec().num_blocks);
  double worst = 0.0;

  auto run = [&](const std::vector<size_t>& which) {
    StepPlan plan;
    std::vector<BlockTable> tables;
    for (size_t p : which) {
      BlockTable table(options.block_size);
      EXPECT_OK(table.Reserve(static_cast<int64_t>(ref.prompts[p].size()), &allocator));
      StepRow row;
      row.seq_id = static_cast<int64_t>(p);
      row.token_ids = ref.prompts[p];
      row.block_table = table.blocks();
      row.return_logits = true;
      plan.rows.push_back(row);
      tables.push_back(std::move(table));
    }
    auto result = (*executor)->Step(plan);
    EXPECT_OK(result);
    for (size_t k = 0; k < which.size() && result.ok(); ++k) {
      const size_t p = which[k];
      const auto& got = result->rows[k].logits;
      ASSERT_EQ(got.size(), ref.prompts[p].size() * vocab);
      const double err = RelativeError(got, ref.logits[p]);
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-4) << GetParam() << " prompt " << p << " in a batch of " << which.size();
      const auto& last = ref.logits[p].back();
      EXPECT_EQ(result->rows[k].token, std::max_element(last.begin(), last.end()) - last.begin());
    }
    for (BlockTable& t : tables) t.ReleaseAll(&allocator);
  };

  std::vector<size_t> all(ref.prompts.size());
  for (size_t p = 0; p < all.size(); ++p) all[p] = p;
  run(all);
  for (size_t p = 0; p < all.size(); ++p) run({p});
  EXPECT_EQ(allocator.num_free(), allocator.num_blocks());
  std::cout << GetParam() << ": max relative logit error vs transformers " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufReferenceTest,
                         ::testing::Values("tiny_llama", "tied_llama3"));

}  // namespace
}  // namespace convoy
