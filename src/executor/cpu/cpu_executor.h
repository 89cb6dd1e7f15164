// The CPU executor: the forward pass of every family of ModelFamilies() (Llama, and the QKV biases
// and per-head Q/K norms of Qwen2 and Qwen3, the sliding window of Mistral and Phi-3, and Gemma 3's
// GeGLU, sandwich norms, scaled embeddings, per-layer windows and rope bases and soft-capped
// logits, read from ModelConfig) over a paged KV cache in host memory. With a sliding window, K and
// V blocks wholly before a row's window are never read; they are not freed either (the block
// tables, which the scheduler owns, keep them until the sequence ends). Linear layers run through
// the project's kernels or oneDNN (fp32 or bf16 weights); attention, norms and rotary embeddings
// are parallelized with OpenMP, the same threads oneDNN uses. Not thread-safe: one engine loop
// calls Step at a time.
//
// Batch invariance (CpuExecutorOptions::batch_invariant, the default): a sequence's logits, and so
// its greedy tokens and logprobs, are the same bits whatever else the step holds and however its
// tokens reach the step: alone or beside other rows (padded or not), its prompt whole or in
// chunks of any size, its tail against a cached prefix, or recomputed after preemption; and
// whatever the number of threads. Every operation computes a token's values from that token's
// inputs (and its own context's K and V) in one fixed order: the products through kernels with
// one reduction order per output element (gemm_f32.h, gemv_bf16.h), attention, norms, SiLU and
// sampling per token or row; threads never split a reduction. Not promised across CPUs with and
// without AVX-512 (other attention and norm code) nor across weight formats. The CUDA executor
// does not promise it either: cuBLAS picks its algorithm by shape.
#ifndef CONVOY_EXECUTOR_CPU_CPU_EXECUTOR_H_
#define CONVOY_EXECUTOR_CPU_CPU_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "executor/executor.h"
#include "kv/kv_cache_spec.h"
#include "model/model_weights.h"

namespace convoy {

enum class CpuWeightFormat {
  kAuto,    // native for a quantized GGUF file, bf16 when the checkpoint is bf16, fp32 otherwise
  kF32,     // exact: what the reference comparisons use
  kBF16,    // half the bytes per decode step; oneDNN matrix products
  kNative,  // quantized tensors stay in their GGUF blocks (quant_matmul.h); others run as kF32
};

// "auto", "f32", "bf16", "native": the spelling of the tools' --weights flag and of benchmarks.
const char* CpuWeightFormatName(CpuWeightFormat format);
// The format so named; nullopt for any other text.
std::optional<CpuWeightFormat> ParseCpuWeightFormat(std::string_view name);
// The KV cache type named "f32", "bf16" or "int8" (KvDtypeName's spelling of the types the CPU
// cache stores: the tools' --kv-dtype flag); nullopt for any other text.
std::optional<KvDtype> ParseCpuKvDtype(std::string_view name);

struct CpuExecutorOptions {
  int num_threads = 0;  // 0: every core
  int64_t kv_cache_bytes = int64_t{1} << 30;
  // Memory a step's activations and logits may take: with kMaxRowsPerStep rows' logits set
  // aside, it bounds the token slots of one step (limits().max_tokens_per_step), so that no
  // config the engine accepts can ask a step for more memory than this. (Rows that ask for the
  // logits of every position, tests' and debugging's, are not counted.)
  int64_t step_memory_bytes = int64_t{2} << 30;
  int32_t block_size = 16;
  // The type the KV cache stores K and V in: kF32, kBF16 (twice fp32's tokens in
  // kv_cache_bytes) or kInt8 (with a scale per token, KV head and k|v; attention.h). Batch
  // invariance holds for each.
  KvDtype kv_dtype = KvDtype::kF32;
  CpuWeightFormat weight_format = CpuWeightFormat::kAuto;
  // Rows of a step are padded to the longest and masked. With skip_padding the padding slots are
  // not computed at all: rows are packed back to back for the dense layers and attention masks
  // each to its own length. Same results; StepResult::computed_tokens tells the difference.
  bool skip_padding = false;
  // Batch invariance as said above. It needs the project's kernels for every product: fp32
  // weights through gemm_f32.h; bf16 weights through gemv_bf16.h, only where the CPU has AVX-512
  // BF16 (elsewhere the layers keep fp32 weights, as weight_format() then says). false: products
  // through oneDNN, whose result for a row depends on the step's rows (for benchmarks).
  bool batch_invariant = true;
  // Without batch_invariant: bf16 products of few rows (decode steps) through the project's kernel
  // (gemv_bf16.h) where the CPU has AVX-512 BF16; false keeps them in oneDNN (for benchmarks that
  // compare the two).
  bool few_row_kernel = true;
  // Attention work items that share each K and V block across the queries of a KV head's group
  // and a few tokens (AttentionShape::share_kv); false: one item per token and head (for
  // benchmarks that compare the two; the results are the same).
  bool share_attention_kv = true;
};

class CpuExecutor final : public Executor {
 public:
  // Prepares the weights (converted and laid out once for the matrix-product library) and
  // allocates the KV cache: kv_cache_bytes / bytes per block blocks. The weights may be released
  // after Create returns.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const ModelWeights& weights,
                                                             const CpuExecutorOptions& options);
  ~CpuExecutor() override;

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override;
  const ModelConfig& model_config() const override;
  const KvCacheSpec& kv_spec() const override;
  // Rows one step may hold. More gain nothing on a CPU: a step of this many decode rows is
  // already bound by compute, not by reading the weights.
  static constexpr int32_t kMaxRowsPerStep = 1024;

  // kMaxRowsPerStep rows, and the token slots that step_memory_bytes holds beside their logits
  // (StepBytesPerToken each); padding computed unless skip_padding.
  ExecutorLimits limits() const override;
  // The step memory one token slot's activations take at most, through one layer.
  int64_t StepBytesPerToken() const;
  // The format the linear layers' weights are in: kNative when any layer runs on its quantized
  // blocks (the others, stored unquantized, run on fp32 weights); kBF16 only when every layer has
  // bf16 weights (bf16 was asked for, or kAuto on a bf16 checkpoint, and oneDNN has a bf16
  // product on this CPU); kF32 otherwise. Never kAuto.
  CpuWeightFormat weight_format() const;
  // Bytes the model's weights take in this executor: the linear layers as they are kept, the
  // embedding table (kept in the file's storage, rows converted on lookup) and the norms.
  int64_t weight_bytes() const;
  // Bytes of weights one step's products read: every linear layer and the lm_head, as kept.
  int64_t linear_weight_bytes() const;
  // Whether decode steps' products go through the project's bf16 kernel (every layer's does).
  bool few_row_kernel() const;
  // Whether every layer's product is batch-invariant (the promise above holds).
  bool batch_invariant() const;

 private:
  struct Impl;
  explicit CpuExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_CPU_EXECUTOR_H_
