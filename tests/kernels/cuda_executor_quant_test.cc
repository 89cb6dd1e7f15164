// The CUDA executor with native weights (CudaExecutorOptions::native_weights) on a small quantized
// GGUF Llama written here, its projections in every GGUF type the kernels run (layer 0: Q4_K and
// Q6_K as a Q4_K_M file mixes them, V in Q6_K beside Q4_K Q and K, and Q5_K; layer 1: Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q2_K, Q3_K; the lm_head Q6_K), against the CPU executor on the same file:
// - its weights take the file's blocks, not 16 bits per weight;
// - logits within 3e-2 (relative) of the CPU's dequantized fp32 path (kF32), through a prompt step
//   (products of many rows: panels dequantized to bf16 for cuBLAS) and decode steps (the quantized
//   GEMV, eager and replayed from CUDA graphs). The bf16 test beside it allows 2e-2 for bf16
//   activations; the prompt step here also rounds the weights to bf16. (The CPU's own native path,
//   8-bit activations, is 2.1e-2 from its fp32 path on this model, and agrees on 51 of 52 tokens.)
// - greedy tokens, teacher-forced on the fp32 path's tokens, agree with the CPU's native path
//   (kNative, 8-bit activations) at 90% or more of the positions.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_executor.h"
#include "executor/cuda/cuda_executor.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "kernels/random_gguf_blocks.h"
#include "model/gguf_file.h"
#include "model/gguf_test_builder.h"
#include "model/model_weights.h"
#include "model/test_dir.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using kernels::GgufBlockType;
using testing::GgufBuilder;
using testing::RelativeError;

constexpr int64_t kHidden = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kIntermediate = 512,
                  kLayers = 2, kVocab = 320;

std::string Blocks(GgufBlockType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<uint8_t> blocks =
      testing::RandomGgufBlocks(type, rows * cols / kernels::GgufBlockElements(type), seed,
                                std::sqrt(3.0f / static_cast<float>(cols)));
  return std::string(blocks.begin(), blocks.end());
}

std::vector<float> Uniform(int64_t n, float offset, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = offset + dist(rng);
  return v;
}

// The model's GGUF bytes, and the bytes its quantized tensors take.
std::string QuantizedLlama(int64_t* quantized_bytes) {
  GgufBuilder b;
  b.String("general.architecture", "llama")
      .U32("llama.context_length", 512)
      .U32("llama.embedding_length", kHidden)
      .U32("llama.block_count", kLayers)
      .U32("llama.feed_forward_length", kIntermediate)
      .U32("llama.attention.head_count", kHeads)
      .U32("llama.attention.head_count_kv", kKvHeads)
      .F32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .F32("llama.rope.freq_base", 10000.0f)
      .U32("llama.rope.dimension_count", kHeadDim)
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.eos_token_id", 2);
  std::mt19937 rng(11);
  uint32_t seed = 500;
  *quantized_bytes = 0;
  auto quantized = [&](const std::string& name, GgufBlockType type, int64_t rows, int64_t cols) {
    std::string data = Blocks(type, rows, cols, ++seed);
    *quantized_bytes += static_cast<int64_t>(data.size());
    b.Tensor(name, static_cast<uint32_t>(type),
             {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)}, std::move(data));
  };
  b.F32Tensor("token_embd.weight", {kVocab, kHidden}, Uniform(kVocab * kHidden, 0.0f, 1.0f, rng));
  b.F32Tensor("output_norm.weight", {kHidden}, Uniform(kHidden, 1.0f, 0.1f, rng));
  quantized("output.weight", GgufBlockType::kQ6_K, kVocab, kHidden);
  using T = GgufBlockType;
  // q, k, v, o, gate, up, down per layer.
  const T types[kLayers][7] = {
      {T::kQ4_K, T::kQ4_K, T::kQ6_K, T::kQ4_K, T::kQ5_K, T::kQ4_K, T::kQ6_K},
      {T::kQ4_0, T::kQ4_1, T::kQ5_0, T::kQ5_1, T::kQ8_0, T::kQ2_K, T::kQ3_K}};
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    const T* t = types[l];
    b.F32Tensor(p + "attn_norm.weight", {kHidden}, Uniform(kHidden, 1.0f, 0.1f, rng));
    quantized(p + "attn_q.weight", t[0], kHeads * kHeadDim, kHidden);
    quantized(p + "attn_k.weight", t[1], kKvHeads * kHeadDim, kHidden);
    quantized(p + "attn_v.weight", t[2], kKvHeads * kHeadDim, kHidden);
    quantized(p + "attn_output.weight", t[3], kHidden, kHeads * kHeadDim);
    b.F32Tensor(p + "ffn_norm.weight", {kHidden}, Uniform(kHidden, 1.0f, 0.1f, rng));
    quantized(p + "ffn_gate.weight", t[4], kIntermediate, kHidden);
    quantized(p + "ffn_up.weight", t[5], kIntermediate, kHidden);
    quantized(p + "ffn_down.weight", t[6], kHidden, kIntermediate);
  }
  return b.Build();
}

std::vector<int32_t> Tokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % kVocab);
  return t;
}

StepRow Row(int seq, std::vector<int32_t> tokens, int32_t start, bool logits) {
  StepRow row;
  row.seq_id = seq;
  row.token_ids = std::move(tokens);
  row.start_pos = start;
  for (int i = 0; i < 40; ++i) row.block_table.push_back(seq * 40 + i);
  row.sample = true;
  row.return_logits = logits;
  return row;
}

TEST(CudaExecutorNativeWeights, QuantizedGgufGivesTheCpuExecutorsLogitsAndTokens) {
  CONVOY_SKIP_WITHOUT_GPU();
  testing::TestDir dir;
  int64_t quantized_bytes = 0;
  testing::WriteBytes(dir.Join("q.gguf"), QuantizedLlama(&quantized_bytes));
  auto weights = ModelWeights::Load(dir.Join("q.gguf"));
  ASSERT_OK(weights);

  auto cpu = [&](CpuWeightFormat format) {
    CpuExecutorOptions options;
    options.num_threads = 2;
    options.weight_format = format;
    options.kv_cache_bytes = int64_t{200} * 2 * kLayers * kKvHeads * 16 * kHeadDim * 4;
    auto executor = CpuExecutor::Create(**weights, options);
    EXPECT_OK(executor);
    return executor.ok() ? std::move(*executor) : nullptr;
  };
  auto gpu = [&](bool native) {
    CudaExecutorOptions options;
    options.native_weights = native;
    options.kv_cache_bytes = int64_t{200} * 2 * kLayers * kKvHeads * 16 * kHeadDim * 2;
    options.max_tokens_per_step = 512;
    options.max_rows_per_step = 16;
    auto executor = CudaExecutor::Create(**weights, options);
    EXPECT_OK(executor);
    return executor.ok() ? std::move(*executor) : nullptr;
  };
  std::unique_ptr<CpuExecutor> cpu_f32 = cpu(CpuWeightFormat::kF32);
  std::unique_ptr<CpuExecutor> cpu_native = cpu(CpuWeightFormat::kNative);
  std::unique_ptr<CudaExecutor> native = gpu(true);
  ASSERT_TRUE(cpu_f32 != nullptr && cpu_native != nullptr && native != nullptr);
  {
    // The file's blocks, plus the 16-bit embedding and norms and each part's alignment.
    std::unique_ptr<CudaExecutor> half = gpu(false);
    ASSERT_NE(half, nullptr);
    const int64_t expected = quantized_bytes + 2 * (kVocab * kHidden + kHidden * (2 * kLayers + 1));
    std::printf("GPU_CHECK native_weight_bytes %ld of 16-bit %ld, file blocks %ld\n",
                static_cast<long>(native->weight_bytes()), static_cast<long>(half->weight_bytes()),
                static_cast<long>(quantized_bytes));
    EXPECT_GE(native->weight_bytes(), expected);
    EXPECT_LE(native->weight_bytes(), expected + 64 * 256);
    EXPECT_LT(native->weight_bytes(), half->weight_bytes() / 2);
  }

  double worst = 0.0;
  int agree_native = 0, agree_f32 = 0, compared = 0;
  // Teacher-forced: every executor gets the fp32 path's tokens.
  auto run = [&](const StepPlan& plan) -> std::vector<int32_t> {
    auto want = cpu_f32->Step(plan);
    auto got = native->Step(plan);
    auto cpu_q = cpu_native->Step(plan);
    EXPECT_OK(want);
    EXPECT_OK(got);
    EXPECT_OK(cpu_q);
    if (!want.ok() || !got.ok() || !cpu_q.ok()) return {};
    std::vector<int32_t> next;
    for (size_t r = 0; r < plan.rows.size(); ++r) {
      if (plan.rows[r].return_logits) {
        const double err = RelativeError(got->rows[r].logits, want->rows[r].logits);
        worst = std::max(worst, err);
        EXPECT_LT(err, 3e-2) << "row " << r;
      }
      ++compared;
      agree_native += got->rows[r].token == cpu_q->rows[r].token ? 1 : 0;
      agree_f32 += got->rows[r].token == want->rows[r].token ? 1 : 0;
      next.push_back(want->rows[r].token);
    }
    return next;
  };
  // A prompt step of 113 tokens (the panels), then 12 decode steps of 4 rows (the GEMV; the odd
  // ones return logits and run eagerly, the even ones replay graphs).
  StepPlan plan;
  plan.rows.push_back(Row(0, Tokens(37, 1), 0, true));
  plan.rows.push_back(Row(1, Tokens(5, 2), 0, true));
  plan.rows.push_back(Row(2, Tokens(70, 3), 0, true));
  plan.rows.push_back(Row(3, {9}, 0, true));
  std::vector<int32_t> next = run(plan);
  ASSERT_EQ(next.size(), 4u);
  std::vector<int32_t> pos = {37, 5, 70, 1};
  for (int step = 0; step < 12; ++step) {
    plan.rows.clear();
    for (int s = 0; s < 4; ++s) plan.rows.push_back(Row(s, {next[s]}, pos[s]++, step % 2 == 1));
    next = run(plan);
    ASSERT_EQ(next.size(), 4u);
  }
  std::printf(
      "GPU_CHECK native_parity logits_rel_err %.3e greedy_agree_cpu_native %d/%d "
      "greedy_agree_cpu_f32 %d/%d\n",
      worst, agree_native, compared, agree_f32, compared);
  EXPECT_GE(agree_native * 10, compared * 9);
  EXPECT_GE(agree_f32 * 10, compared * 9);
}

}  // namespace
}  // namespace convoy
