// The CUDA executor: the Llama forward pass on one NVIDIA GPU. Weights live on the device in bf16
// (or fp16), or with native_weights a quantized file's projections in their GGUF blocks; the paged
// KV cache is one device allocation in the same type, laid out per block as
// [layer][k|v][kv_head][slot][head_dim]. Matrix products run through cuBLAS, or the GEMV kernel
// when a step has few tokens; everything else is a kernel from kernels/. A step runs on one stream:
// its inputs go up in one copy from pinned memory, the sampled tokens come back in one copy, and
// decode steps replay CUDA graphs captured per batch size. Nothing is allocated on the device
// inside a step.
//
// Not thread-safe: one engine loop calls Step at a time. A CUDA failure fails the step with
// INTERNAL and a message naming the call; the executor stays usable unless the error is one that
// breaks the CUDA context (then every later step fails the same way).
#ifndef CONVOY_EXECUTOR_CUDA_CUDA_EXECUTOR_H_
#define CONVOY_EXECUTOR_CUDA_CUDA_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/executor.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace convoy {

enum class CudaWeightType { kBF16, kF16 };

struct CudaExecutorOptions {
  int device = 0;
  CudaWeightType weight_type = CudaWeightType::kBF16;
  // The KV cache takes this fraction of the device memory free after the weights, the step
  // buffers and a warm-up.
  double gpu_memory_fraction = 0.9;
  // When > 0, the KV cache takes exactly this many bytes instead (tests, benchmarks).
  int64_t kv_cache_bytes = 0;
  int32_t block_size = 16;
  // Capacities of one step: tokens (prompt chunks plus decode tokens), rows, and rows of logits
  // (one per sampled row plus every position of rows that return logits).
  int32_t max_tokens_per_step = 8192;
  int32_t max_rows_per_step = 256;
  int32_t max_logit_rows = 512;
  bool use_cuda_graphs = true;
  // Rows with at least this many tokens in a step (prompt chunks) take the prefill attention
  // kernel, which reads K and V once per tile of 64 queries; shorter rows, and every row when 0,
  // take the decode kernel, one query at a time. At least 2: decode steps stay on the decode
  // kernel (and in their CUDA graphs).
  int32_t prefill_kernel_min_tokens = 16;
  // The prefill kernel's products on tensor cores (bf16/f16 mma, fp32 accumulation); false runs
  // them on CUDA cores in fp32 (the kernel they are measured against).
  bool prefill_tensor_cores = true;
  // Matrix products with up to this many rows of activations (steps of up to this many tokens, and
  // the lm_head of up to this many logits rows) take the GEMV kernel of kernels/gemv.cuh, built to
  // stream the weights at the memory's bandwidth; larger ones, and all when 0, take cuBLAS. 0 .. 8.
  // 4: on an H200 (docs/perf/gpu.md, 2026-12-04) the kernel beat cuBLAS on a Llama layer's
  // products up to 4 rows and lost from 6, where the CUDA cores' multiply-adds start to count.
  int32_t gemv_max_rows = 4;
  // Steps of up to min(gemv_max_rows, 4) tokens fuse into the GEMV (kernels/gemv.cuh) the RMS norms
  // before the qkv, gate/up and lm_head products, the residual adds after the o and down products
  // (they accumulate into the residual) and the gate's activation: three launches fewer per layer,
  // the same values bit for bit. Needs 16-bit matrices (not native_weights' blocks); the norms'
  // part also a family without sandwich norms (Gemma 3 keeps its norm launches). False: unfused.
  bool fuse_small_batch = true;
  // Keep the projections and the lm_head of a quantized GGUF file in their blocks on the device
  // (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; cuda::DeviceModel says what stays
  // 16-bit): products of up to 8 rows of activations take the quantized GEMV
  // (kernels/quant_gemv.cuh), larger ones dequantize panels of rows to the 16-bit type for cuBLAS.
  // Off: every weight is converted to the 16-bit type at load. Not yet run on a GPU
  // (docs/perf/gpu.md), hence off by default.
  bool native_weights = false;
  // With native weights, the buffer the panels of larger products are dequantized into.
  int64_t dequant_scratch_bytes = int64_t{64} << 20;
  // Kernels launched as programmatic dependent launches where the GPU has them (sm_90): each is
  // scheduled while the one before it finishes (kernels/dependent_launch.cuh). False: plain
  // launches, one after the other.
  bool dependent_launch = true;
  // Decode steps of up to the largest size are padded to the next size here and replayed.
  std::vector<int32_t> graph_batch_sizes = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128};
};

// The graph batch sizes a decode step may be padded to: those of `options.graph_batch_sizes` that
// fit every step buffer (rows, tokens and logits rows of one step), ascending, without repeats.
std::vector<int32_t> UsableGraphBatchSizes(const CudaExecutorOptions& options);

// Whether a CUDA device can be used. Errors from the runtime (no driver, no device) mean no.
bool CudaDeviceAvailable();

class CudaExecutor final : public Executor {
 public:
  // Uploads `weights` (which may be released afterwards) and sizes the KV cache. Every family the
  // CPU executor runs (Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma 3); a shape the kernels do not
  // take (a head_dim other than 64, 96, 128 or 256, a GQA group over 8, a hidden size over 8192)
  // is UNIMPLEMENTED, naming it and the architecture, before any device is touched.
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const ModelWeights& weights,
                                                              const CudaExecutorOptions& options);
  // A model of this shape with random weights made on the device (benchmarks).
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> CreateRandom(
      const ModelConfig& config, const CudaExecutorOptions& options, uint64_t seed);
  ~CudaExecutor() override;

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override;
  // The step's kernels and the copy of its sampled tokens are queued on the executor's stream;
  // Collect waits for them, so the engine emits the previous step's tokens meanwhile.
  absl::Status Launch(const StepPlan& plan) override;
  absl::StatusOr<StepResult> Collect() override;
  bool steps_asynchronously() const override { return true; }
  const ModelConfig& model_config() const override;
  const KvCacheSpec& kv_spec() const override;
  // The step capacities of the options; padding is never computed (tokens are packed).
  ExecutorLimits limits() const override;
  // Executor::CheckRow; refuses prompt scoring, and the logits of a row with allowed tokens or
  // logit adjustments (the sampling kernel rewrites that row's logits in place).
  absl::Status CheckRow(const StepRow& row) const override;

  // Bytes of weights on the device (for bandwidth figures).
  int64_t weight_bytes() const;

  // What a step of `tokens` tokens fuses into the GEMV kernel (CudaExecutorOptions::
  // fuse_small_batch): the gate's activation, and the RMS norms with the residual adds.
  struct SmallStepFusion {
    bool gate = false;
    bool norms = false;
  };
  SmallStepFusion FusionFor(int64_t tokens) const;

 private:
  struct Impl;
  explicit CudaExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CUDA_CUDA_EXECUTOR_H_
