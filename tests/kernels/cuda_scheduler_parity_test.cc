// The CUDA executor under the real scheduler and every shipped config (chunked prefill, priorities,
// preemption with recomputation) against the CPU executor running each request alone: the same
// greedy tokens. The model is written in bf16 so both read the same weights; the GPU computes in
// bf16 and the CPU in fp32, so a near-tie late in a sequence may flip, and the bar is the first 8
// tokens of every request (all tokens are counted and reported).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "executor/cuda/cuda_executor.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "model/test_dir.h"
#include "scheduler/parity_harness.h"
#include "status_matchers.h"

namespace convoy::testing {
namespace {

constexpr int32_t kBlockSize = 16;

ModelConfig GpuParityConfig() {
  ModelConfig c;
  c.vocab_size = 320;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 256;
  c.rope_theta = 10000.0;
  c.torch_dtype = DType::kBF16;
  return c;
}

const ModelWeights& Weights() {
  static const ModelWeights* weights = [] {
    const std::string dir = ProcessDir("convoy_cuda_sched_parity");
    RandomModelOptions options;
    options.config = GpuParityConfig();
    options.seed = 9;
    options.dtype = DType::kBF16;
    absl::Status written = WriteRandomModel(dir, options);
    EXPECT_TRUE(written.ok()) << written;
    auto loaded = ModelWeights::Load(dir);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->release() : nullptr;
  }();
  return *weights;
}

// Each request alone on the CPU, with room for everything.
const std::map<RequestId, std::vector<int32_t>>& CpuReference() {
  static const auto* reference = [] {
    auto* out = new std::map<RequestId, std::vector<int32_t>>;
    CpuExecutorOptions options;
    options.num_threads = 2;
    options.block_size = kBlockSize;
    options.weight_format = CpuWeightFormat::kF32;
    options.kv_cache_bytes = int64_t{64} << 20;
    auto executor = CpuExecutor::Create(Weights(), options);
    EXPECT_OK(executor);
    if (!executor.ok()) return out;
    SchedulerOptions scheduler;
    scheduler.priority_levels = 2;
    for (const Request& request : ParityRequests()) {
      Request alone = request;
      alone.priority = 0;
      (*out)[request.id] = RunToCompletion(**executor, scheduler, {alone}).tokens[request.id];
    }
    return out;
  }();
  return *reference;
}

class CudaSchedulerParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSchedulerParityTest, GreedyTokensMatchTheCpuExecutorAlone) {
  CONVOY_SKIP_WITHOUT_GPU();
  const SchedulerOptions options = ShippedSchedulerOptions(GetParam());
  CudaExecutorOptions gpu_options;
  gpu_options.block_size = kBlockSize;
  const ModelConfig& c = GpuParityConfig();
  const int64_t block_bytes =
      int64_t{2} * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * kBlockSize * 2;
  // 12 usable blocks (192 tokens; the executor keeps one more as scratch) for requests needing up
  // to 6 blocks each: preemption happens.
  gpu_options.kv_cache_bytes = 13 * block_bytes;
  gpu_options.max_tokens_per_step = std::max<int32_t>(options.max_num_batched_tokens, 512);
  gpu_options.max_rows_per_step = std::max<int32_t>(options.max_batch_size, 16);
  gpu_options.max_logit_rows = gpu_options.max_rows_per_step;
  auto gpu = CudaExecutor::Create(Weights(), gpu_options);
  ASSERT_OK(gpu);
  const ParityRun run = RunToCompletion(**gpu, options, ParityRequests());
  const auto& reference = CpuReference();
  int total = 0, same = 0;
  for (const auto& [id, want] : reference) {
    ASSERT_FALSE(want.empty());
    ASSERT_TRUE(run.tokens.contains(id)) << "request " << id;
    const std::vector<int32_t>& got = run.tokens.at(id);
    ASSERT_EQ(got.size(), want.size()) << "request " << id;
    const size_t prefix = std::min<size_t>(8, want.size());
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + prefix),
              std::vector<int32_t>(want.begin(), want.begin() + prefix))
        << "request " << id << " under " << GetParam();
    for (size_t i = 0; i < want.size() && got[i] == want[i]; ++i) ++same;
    total += static_cast<int>(want.size());
  }
  EXPECT_GT(run.preemptions, 0) << GetParam();
  std::printf("GPU_CHECK sched_parity %s tokens_equal_until_divergence %d/%d preemptions %lld\n",
              GetParam().c_str(), same, total, static_cast<long long>(run.preemptions));
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, CudaSchedulerParityTest,
                         ::testing::ValuesIn(ShippedConfigs()), ConfigTestName);

}  // namespace
}  // namespace convoy::testing
