#include "bench/gpu/bench_plans.h"

#include <algorithm>

namespace convoy::bench {
namespace {

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace

int32_t BenchShape::max_batch() const {
  return *std::max_element(decode_batches.begin(), decode_batches.end());
}

ModelConfig BenchLlama(bool eight_b) {
  ModelConfig c;
  c.vocab_size = 128256;
  c.hidden_size = eight_b ? 4096 : 2048;
  c.intermediate_size = eight_b ? 14336 : 8192;
  c.num_hidden_layers = eight_b ? 32 : 16;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = eight_b ? 128 : 64;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling.rope_type = "llama3";
  c.rope_scaling.factor = eight_b ? 8.0 : 32.0;
  c.tie_word_embeddings = !eight_b;
  c.torch_dtype = DType::kBF16;
  return c;
}

CudaExecutorOptions BenchExecutorOptions(const BenchShape& shape, bool graphs) {
  CudaExecutorOptions options;
  options.kv_cache_bytes = shape.kv_cache_bytes;
  options.block_size = shape.block_size;
  options.max_tokens_per_step =
      std::max(shape.prefill_tokens, shape.max_batch() * shape.prompt_tokens);
  options.max_rows_per_step = shape.max_batch();
  options.max_logit_rows = shape.max_batch();
  options.use_cuda_graphs = graphs;
  return options;
}

KvCacheSpec BenchKvSpec(const ModelConfig& config, const BenchShape& shape) {
  KvCacheSpec spec;
  spec.num_layers = static_cast<int32_t>(config.num_hidden_layers);
  spec.num_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
  spec.head_dim = static_cast<int32_t>(config.head_dim);
  spec.block_size = shape.block_size;
  spec.dtype = KvDtype::kF16;  // 16-bit K and V, as the CUDA executor stores them
  spec.num_blocks = spec.BlocksForBudget(shape.kv_cache_bytes) - 1;
  return spec;
}

int32_t DecodeBlocksPerSeq(const BenchShape& shape) {
  return CeilDiv(shape.decode_length(), shape.block_size);
}

int32_t PrefillBlocks(const BenchShape& shape) {
  return CeilDiv(shape.prefill_tokens, shape.block_size);
}

StepRow BenchRow(int32_t seq, std::vector<int32_t> tokens, int32_t start, int32_t blocks_per_seq,
                 int32_t block_size) {
  StepRow row;
  row.seq_id = seq;
  const int32_t used = CeilDiv(start + static_cast<int64_t>(tokens.size()), block_size);
  for (int32_t i = 0; i < used; ++i) row.block_table.push_back(seq * blocks_per_seq + i);
  row.token_ids = std::move(tokens);
  row.start_pos = start;
  return row;
}

StepPlan DecodePromptPlan(const BenchShape& shape, int32_t batch) {
  StepPlan plan;
  for (int32_t s = 0; s < batch; ++s) {
    std::vector<int32_t> tokens(shape.prompt_tokens);
    for (int32_t i = 0; i < shape.prompt_tokens; ++i) tokens[i] = (s * 7919 + i * 104729) % 128000;
    plan.rows.push_back(
        BenchRow(s, std::move(tokens), 0, DecodeBlocksPerSeq(shape), shape.block_size));
  }
  return plan;
}

StepPlan DecodeStepPlan(const BenchShape& shape, const std::vector<int32_t>& tokens, int32_t pos) {
  StepPlan plan;
  for (size_t s = 0; s < tokens.size(); ++s) {
    plan.rows.push_back(BenchRow(static_cast<int32_t>(s), {tokens[s]}, pos,
                                 DecodeBlocksPerSeq(shape), shape.block_size));
  }
  return plan;
}

StepPlan PrefillPlan(const BenchShape& shape) {
  std::vector<int32_t> ids(shape.prefill_tokens);
  for (int32_t i = 0; i < shape.prefill_tokens; ++i) ids[i] = (i * 104729) % 128000;
  StepPlan plan;
  plan.rows.push_back(BenchRow(0, std::move(ids), 0, PrefillBlocks(shape), shape.block_size));
  return plan;
}

}  // namespace convoy::bench
