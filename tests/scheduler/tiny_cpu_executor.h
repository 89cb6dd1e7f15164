// A CpuExecutor over a TinyModelConfig model whose KV cache holds exactly `num_blocks` blocks, for
// scheduler tests that need preemption to happen.
#ifndef CONVOY_TESTS_SCHEDULER_TINY_CPU_EXECUTOR_H_
#define CONVOY_TESTS_SCHEDULER_TINY_CPU_EXECUTOR_H_

#include <memory>

#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "test_models.h"

namespace convoy::testing {

inline std::unique_ptr<CpuExecutor> MakeTinyCpuExecutor(const ModelWeights& weights,
                                                        int32_t num_blocks, int32_t block_size) {
  CpuExecutorOptions options;
  options.num_threads = 2;
  options.block_size = block_size;
  options.weight_format = CpuWeightFormat::kF32;
  const ModelConfig& c = TinyModelConfig();
  options.kv_cache_bytes = int64_t{num_blocks} * 2 * c.num_hidden_layers * c.num_key_value_heads *
                           c.head_dim * block_size * static_cast<int64_t>(sizeof(float));
  auto executor = CpuExecutor::Create(weights, options);
  EXPECT_TRUE(executor.ok()) << executor.status();
  return executor.ok() ? std::move(executor).value() : nullptr;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SCHEDULER_TINY_CPU_EXECUTOR_H_
