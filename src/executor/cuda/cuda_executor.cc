#include "executor/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/device_buffer.h"
#include "executor/cuda/device_model.h"
#include "executor/cuda/gemm.h"
#include "executor/cuda/step_inputs.h"
#include "kernels/dependent_launch.cuh"
#include "kernels/embedding.cuh"
#include "kernels/gemv.cuh"
#include "kernels/paged_attention_decode.cuh"
#include "kernels/paged_attention_prefill.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rotary.cuh"
#include "kernels/sampling.cuh"
#include "kernels/silu_mul.cuh"
#include "kernels/soft_cap.cuh"
#include "spdlog/spdlog.h"

namespace convoy {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using kernels::HalfType;

namespace {

// The sliding window layer `layer` attends through, for the attention kernels; 0: none.
int32_t LayerWindow(const ModelConfig& c, int64_t layer) {
  if (!c.LayerSliding(layer)) return 0;
  return static_cast<int32_t>(std::min<int64_t>(c.sliding_window, INT32_MAX));
}

}  // namespace

bool CudaDeviceAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // a failed query is "no GPU"; with no driver the failure stays sticky
    return false;
  }
  return count > 0;
}

std::vector<int32_t> UsableGraphBatchSizes(const CudaExecutorOptions& options) {
  std::vector<int32_t> sizes;
  for (int32_t size : options.graph_batch_sizes) {
    if (size > 0 && size <= options.max_rows_per_step && size <= options.max_tokens_per_step &&
        size <= options.max_logit_rows) {
      sizes.push_back(size);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

struct CudaExecutor::Impl {
  ~Impl() {
    for (auto& [size, exec] : graphs) cudaGraphExecDestroy(exec);
    gemm.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  absl::Status Init(const CudaExecutorOptions& opts);
  absl::Status Forward(const cuda::StepLayout& layout);
  // y[m, n] (+)= x[m, k] . w^T, x in the model's 16-bit type, y fp32 or that type, whatever w is
  // stored in.
  absl::Status Product(const void* x, const cuda::DeviceMatrix& w, void* y, int64_t m, int64_t n,
                       int64_t k, bool y_f32, bool accumulate = false);
  absl::StatusOr<size_t> StageSamplingExtras(const StepPlan& plan, const cuda::PackedStep& packed);
  absl::StatusOr<cudaGraphExec_t> GraphFor(int64_t batch);
  absl::Status RunDecodeGraph(int64_t batch, const cuda::StepLayout& layout);
  // The step's inputs packed and copied, its kernels and the copy of its samples queued on
  // `stream`; Collect waits for them. The staging buffers stay the launched step's until then.
  // `accept` takes the plan's block tables (Executor::AcceptTables) once the plan is checked;
  // `table_of` then gives each row's whole table.
  absl::Status Launch(const StepPlan& plan, absl::FunctionRef<absl::Status()> accept,
                      absl::FunctionRef<absl::Span<const BlockId>(const StepRow&)> table_of);
  absl::StatusOr<StepResult> Collect();
  absl::Status CheckCapacity(const StepPlan& plan) const;

  // What Collect needs of the launched step.
  struct InFlight {
    struct Row {
      int64_t seq_id = 0;
      int64_t num_tokens = 0;
      int32_t num_top_logprobs = 0;
    };
    bool empty = true;
    cuda::PackedStep packed;
    std::vector<Row> rows;
    ExecutorTimes times;
    absl::Time launched_at;
  };
  bool launched = false;
  InFlight in_flight;
  // Each row's whole block table in the launched plan (the executor's copy, block_tables.h).
  std::vector<const BlockId*> row_tables;

  CudaExecutorOptions options;
  std::unique_ptr<cuda::DeviceModel> model;
  KvCacheSpec spec;
  int num_sms = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::Gemm> gemm;
  kernels::KvCacheLayout cache_layout;  // layer_offset set per layer
  int32_t scratch_block = 0;
  int64_t max_blocks_per_row = 0;
  int64_t partial_entries = 0;
  // Whether small steps may take the GEMV's fusions: the gate's (every product 16-bit and
  // 16-byte aligned), and the norms' and residual adds' (also no sandwich norms).
  bool fusable_gate = false;
  bool fusable_norms = false;
  CudaExecutor::SmallStepFusion Fusion(int64_t tokens) const {
    CudaExecutor::SmallStepFusion fusion;
    fusion.gate = fusable_gate && tokens >= 1 && tokens <= options.gemv_max_rows &&
                  tokens <= kernels::kGemvFusedMaxRows;
    fusion.norms =
        fusion.gate && fusable_norms && kernels::GemvNormFits(tokens, model->config().hidden_size);
    return fusion;
  }

  // Step buffers, sized for the capacities in `options`.
  DeviceBuffer kv_cache;
  DeviceBuffer residual, delta;           // f32 [tokens, hidden]
  DeviceBuffer normed, qkv, attn_out;     // 16-bit
  DeviceBuffer gate_up, act;              // 16-bit
  DeviceBuffer final_normed, logits;      // 16-bit [logit rows, hidden], f32 [logit rows, vocab]
  DeviceBuffer partial_out, partial_lse;  // attention splits
  DeviceBuffer split_counters;            // the splits' counters, zero between launches
  DeviceBuffer inputs;                    // the staged step arrays
  DeviceBuffer samples;                   // kernels::SampleOutput [rows]
  PinnedBuffer staging;                   // host side of `inputs`
  PinnedBuffer sample_staging;            // host side of `samples`
  size_t inputs_capacity = 0;
  // Sampling's extras for the step's constrained and adjusted rows: allowed-token bits, then
  // logit adjustments, which the rows' SampleRow point into; grown when a step needs more.
  DeviceBuffer extras;
  PinnedBuffer extras_staging;
  // Each adjusted row's merged entries, back to back, and where each row's begin (reused).
  std::vector<MergedLogitAdjustment> merged, row_merged;
  std::vector<size_t> merged_at;

  std::map<int64_t, cudaGraphExec_t> graphs;
  // Graph batch sizes that fit every step buffer (rows, tokens, logits rows), ascending.
  std::vector<int32_t> usable_graph_sizes;
  // Set once a capture or instantiation failed: every later step runs eagerly.
  bool graphs_disabled = false;
};

absl::Status CudaExecutor::Impl::Init(const CudaExecutorOptions& opts) {
  options = opts;
  const ModelConfig& c = model->config();
  if (opts.block_size <= 0 || opts.max_tokens_per_step <= 0 || opts.max_rows_per_step <= 0 ||
      opts.max_logit_rows <= 0 || opts.max_tokens_per_step > 65535) {
    return absl::InvalidArgumentError(
        "CudaExecutorOptions: block_size, max_tokens_per_step (<= 65535), max_rows_per_step and "
        "max_logit_rows must be positive");
  }
  if (opts.prefill_kernel_min_tokens < 0 || opts.prefill_kernel_min_tokens == 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaExecutorOptions: prefill_kernel_min_tokens must be 0 (off) or at least 2, got %d",
        opts.prefill_kernel_min_tokens));
  }
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, options.device));
  // The prefill kernels take head_dim 64, 96, 128 and 256, where the device gives a block the
  // tile's shared memory (at 256, an H100 or H200 does; an A100 or an Ada GPU does not). Elsewhere
  // every query goes through the decode kernel, which takes any number of them.
  int shared_per_block = 0;
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, options.device));
  const int64_t tile_bytes = kernels::PagedAttentionPrefillSharedBytes(
      static_cast<int>(c.head_dim), options.prefill_tensor_cores);
  if (tile_bytes == 0 || tile_bytes > shared_per_block) {
    if (options.prefill_kernel_min_tokens > 0) {
      spdlog::info(
          "head_dim {}: the prefill tile needs {} bytes of shared memory, the device gives a block "
          "{}; prompts go through the decode attention kernel",
          c.head_dim, tile_bytes, shared_per_block);
    }
    options.prefill_kernel_min_tokens = 0;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const bool packed =
      model->lm_head().packed() ||
      std::any_of(model->layers().begin(), model->layers().end(), [](const cuda::DeviceLayer& l) {
        return l.qkv.packed() || l.o_proj.packed() || l.gate_up.packed() || l.down_proj.packed();
      });
  if (packed && opts.dequant_scratch_bytes < 2 * std::max(c.hidden_size, c.intermediate_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaExecutorOptions: dequant_scratch_bytes (%d) must hold a weight row of %d values",
        opts.dequant_scratch_bytes, std::max(c.hidden_size, c.intermediate_size)));
  }
  ASSIGN_OR_RETURN(gemm, cuda::Gemm::Create(stream, opts.gemv_max_rows,
                                            packed ? opts.dequant_scratch_bytes : 0));
  auto gemv_ready = [](const cuda::DeviceMatrix& w) {
    return !w.packed() && reinterpret_cast<uintptr_t>(w.half) % 16 == 0;
  };
  fusable_gate =
      opts.fuse_small_batch && opts.gemv_max_rows > 0 && gemv_ready(model->lm_head()) &&
      c.hidden_size % 8 == 0 && c.intermediate_size % 8 == 0 && c.q_size() % 8 == 0 &&
      std::all_of(model->layers().begin(), model->layers().end(), [&](const cuda::DeviceLayer& l) {
        return gemv_ready(l.qkv) && gemv_ready(l.o_proj) && gemv_ready(l.gate_up) &&
               gemv_ready(l.down_proj);
      });
  fusable_norms =
      fusable_gate &&
      std::none_of(model->layers().begin(), model->layers().end(), [](const cuda::DeviceLayer& l) {
        return l.pre_ffn_norm != nullptr || l.post_ffn_norm != nullptr;
      });

  const int64_t t = opts.max_tokens_per_step, h = c.hidden_size, lr = opts.max_logit_rows;
  const int64_t qkv_cols = c.q_size() + 2 * c.kv_size();
  ASSIGN_OR_RETURN(residual, DeviceBuffer::Allocate(t * h * 4));
  ASSIGN_OR_RETURN(delta, DeviceBuffer::Allocate(t * h * 4));
  ASSIGN_OR_RETURN(normed, DeviceBuffer::Allocate(t * h * 2));
  ASSIGN_OR_RETURN(qkv, DeviceBuffer::Allocate(t * qkv_cols * 2));
  ASSIGN_OR_RETURN(attn_out, DeviceBuffer::Allocate(t * c.q_size() * 2));
  ASSIGN_OR_RETURN(gate_up, DeviceBuffer::Allocate(t * 2 * c.intermediate_size * 2));
  ASSIGN_OR_RETURN(act, DeviceBuffer::Allocate(t * c.intermediate_size * 2));
  ASSIGN_OR_RETURN(final_normed, DeviceBuffer::Allocate(lr * h * 2));
  ASSIGN_OR_RETURN(logits, DeviceBuffer::Allocate(lr * c.vocab_size * 4));
  partial_entries = int64_t{4} * num_sms * kernels::kMaxGqaGroup;
  ASSIGN_OR_RETURN(partial_out, DeviceBuffer::Allocate(partial_entries * c.head_dim * 4));
  ASSIGN_OR_RETURN(partial_lse, DeviceBuffer::Allocate(partial_entries * 4));
  // One per (query, KV head) of a split launch: fewer than the partial entries.
  ASSIGN_OR_RETURN(split_counters, DeviceBuffer::Allocate(partial_entries * 4));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(split_counters.get(), 0, partial_entries * 4, stream));
  const int64_t rows = opts.max_rows_per_step;
  ASSIGN_OR_RETURN(samples, DeviceBuffer::Allocate(rows * sizeof(kernels::SampleOutput)));
  ASSIGN_OR_RETURN(sample_staging, PinnedBuffer::Allocate(rows * sizeof(kernels::SampleOutput)));
  max_blocks_per_row = (c.max_position_embeddings + opts.block_size - 1) / opts.block_size;
  const cuda::StepLayout most = cuda::StepLayout::For(t + rows, rows, lr, rows);
  inputs_capacity = most.Bytes(rows * max_blocks_per_row + 1);
  ASSIGN_OR_RETURN(inputs, DeviceBuffer::Allocate(inputs_capacity));
  ASSIGN_OR_RETURN(staging, PinnedBuffer::Allocate(inputs_capacity));

  usable_graph_sizes = UsableGraphBatchSizes(opts);

  // Warm-up: cuBLAS sets itself up on its first product (never inside a graph capture), the GEMV
  // kernels need none. Over a packed matrix, a product of `normed` with itself does.
  const cuda::DeviceMatrix& first_qkv = model->layers()[0].qkv;
  RETURN_IF_ERROR(gemm->LinearCublas(
      normed.get(), first_qkv.packed() ? normed.get() : first_qkv.half, qkv.get(), 1,
      first_qkv.packed() ? 1 : qkv_cols, h, model->dtype(), false));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));

  spec.num_layers = static_cast<int32_t>(c.num_hidden_layers);
  spec.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  spec.head_dim = static_cast<int32_t>(c.head_dim);
  spec.block_size = opts.block_size;
  spec.dtype = model->dtype() == HalfType::kBF16 ? KvDtype::kBF16 : KvDtype::kF16;
  int64_t budget = opts.kv_cache_bytes;
  if (budget <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    budget = static_cast<int64_t>(opts.gpu_memory_fraction * static_cast<double>(free_bytes));
  }
  // One block more than the spec announces: the scratch block of padded graph rows.
  const int64_t blocks = spec.BlocksForBudget(budget) - 1;
  if (blocks < 1) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the KV cache budget of %d bytes holds no block of %d bytes", budget,
                        spec.BytesPerBlock()));
  }
  spec.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX - 1));
  scratch_block = spec.num_blocks;
  ASSIGN_OR_RETURN(kv_cache,
                   DeviceBuffer::Allocate((int64_t{spec.num_blocks} + 1) * spec.BytesPerBlock()));
  const int64_t per_kv = int64_t{spec.num_kv_heads} * spec.block_size * spec.head_dim;
  cache_layout.base = kv_cache.get();
  cache_layout.block_stride = spec.BytesPerBlock() / 2;
  cache_layout.v_offset = per_kv;
  cache_layout.block_size = spec.block_size;
  cache_layout.num_kv_heads = spec.num_kv_heads;
  cache_layout.head_dim = spec.head_dim;
  cache_layout.num_blocks = spec.num_blocks + 1;
  return absl::OkStatus();
}

absl::Status CudaExecutor::Impl::Forward(const cuda::StepLayout& layout) {
  // Per thread: the executor's setting holds for its launches whatever another executor chose.
  kernels::SetDependentLaunch(options.dependent_launch);
  const ModelConfig& c = model->config();
  const HalfType dt = model->dtype();
  const int64_t t = layout.num_tokens, h = c.hidden_size, in = c.intermediate_size;
  const int64_t qkv_cols = c.q_size() + 2 * c.kv_size();
  auto* base = inputs.as<std::byte>();
  const auto* ids = reinterpret_cast<const int32_t*>(base + layout.token_ids);
  const auto* positions = reinterpret_cast<const int32_t*>(base + layout.positions);
  const auto* token_row = reinterpret_cast<const int32_t*>(base + layout.token_row);
  const auto* row_block_offset = reinterpret_cast<const int32_t*>(base + layout.row_block_offset);
  const auto* logit_token = reinterpret_cast<const int32_t*>(base + layout.logit_token);
  const auto* sample_rows = reinterpret_cast<const kernels::SampleRow*>(base + layout.sample_rows);
  const auto* block_ids = reinterpret_cast<const int32_t*>(base + layout.block_ids);
  const auto* prefill_tiles = reinterpret_cast<const int32_t*>(base + layout.prefill_tiles);
  const auto* decode_tokens = reinterpret_cast<const int32_t*>(base + layout.decode_tokens);

  kernels::EmbeddingParams embed;
  embed.table = model->embed_tokens();
  embed.token_ids = ids;
  embed.out = residual.as<float>();
  embed.num_tokens = t;
  embed.hidden = h;
  embed.vocab = c.vocab_size;
  embed.scale = static_cast<float>(c.embedding_scale);
  embed.dtype = dt;
  CUDA_RETURN_IF_ERROR(kernels::LaunchEmbedding(embed, stream));

  kernels::RmsNormParams norm;
  norm.residual = residual.as<float>();
  norm.out = normed.get();
  norm.num_rows = t;
  norm.hidden = h;
  norm.eps = static_cast<float>(c.rms_norm_eps);
  norm.weight_offset = static_cast<float>(c.norm_weight_offset);
  norm.dtype = dt;
  // Sandwich norms (Gemma 3): a projection's output normed in place before the residual add.
  kernels::RmsNormParams sandwich = norm;
  sandwich.residual = delta.as<float>();
  sandwich.out = nullptr;
  sandwich.out_f32 = delta.as<float>();

  kernels::RotaryParams rope;
  rope.qkv = qkv.get();
  rope.row_stride = qkv_cols;
  rope.positions = positions;
  rope.inv_freq = model->inv_freq();
  rope.rotary_dim = static_cast<int32_t>(c.RotaryDim());
  rope.cos_sin_scale = model->rope_scale();
  rope.num_tokens = t;
  rope.num_q_heads = static_cast<int32_t>(c.num_attention_heads);
  rope.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  rope.head_dim = static_cast<int32_t>(c.head_dim);
  rope.norm_weight_offset = norm.weight_offset;
  rope.dtype = dt;

  kernels::KvWriteParams kv_write;
  kv_write.qkv = qkv.get();
  kv_write.row_stride = qkv_cols;
  kv_write.k_column = c.q_size();
  kv_write.positions = positions;
  kv_write.token_row = token_row;
  kv_write.row_block_offset = row_block_offset;
  kv_write.block_ids = block_ids;
  kv_write.num_tokens = t;
  kv_write.dtype = dt;
  rope.write_kv = true;
  rope.kv_write = kv_write;
  rope.norm_eps = static_cast<float>(c.rms_norm_eps);

  kernels::PagedAttentionDecodeParams attn;
  attn.q = qkv.get();
  attn.q_row_stride = qkv_cols;
  attn.out = attn_out.get();
  attn.positions = positions;
  attn.token_row = token_row;
  attn.row_block_offset = row_block_offset;
  attn.block_ids = block_ids;
  attn.num_queries = layout.num_decode_tokens;
  attn.query_list = decode_tokens;
  attn.num_q_heads = static_cast<int32_t>(c.num_attention_heads);
  // Gemma 3 scales scores by query_pre_attn_scalar^-1/2, every other family by head_dim^-1/2.
  attn.scale = static_cast<float>(1.0 / std::sqrt(c.query_pre_attn_scalar > 0
                                                      ? c.query_pre_attn_scalar
                                                      : static_cast<double>(c.head_dim)));
  attn.num_splits =
      kernels::ChooseAttentionSplits(layout.num_decode_tokens, spec.num_kv_heads, num_sms);
  attn.partial_out = partial_out.as<float>();
  attn.partial_lse = partial_lse.as<float>();
  attn.partial_capacity = partial_entries;
  attn.split_counters = split_counters.as<uint32_t>();
  attn.dtype = dt;

  kernels::PagedAttentionPrefillParams prefill;
  prefill.q = qkv.get();
  prefill.q_row_stride = qkv_cols;
  prefill.out = attn_out.get();
  prefill.positions = positions;
  prefill.token_row = token_row;
  prefill.row_block_offset = row_block_offset;
  prefill.block_ids = block_ids;
  prefill.tiles = prefill_tiles;
  prefill.num_tiles = layout.num_prefill_tiles;
  prefill.num_q_heads = attn.num_q_heads;
  prefill.scale = attn.scale;
  prefill.dtype = dt;
  prefill.tensor_cores = options.prefill_tensor_cores;

  kernels::SiluMulParams silu;
  silu.gate_up = gate_up.get();
  silu.out = act.get();
  silu.num_tokens = t;
  silu.intermediate = in;
  silu.activation = c.activation == Activation::kGeluTanh ? kernels::GateActivation::kGeluTanh
                                                          : kernels::GateActivation::kSilu;
  silu.dtype = dt;

  // Small steps fuse into the GEMV (CudaExecutorOptions::fuse_small_batch): the gate's activation
  // always, and without sandwich norms the norms too, the residual adds going into the o and down
  // products, which accumulate into the residual (the same fp32 add the norm kernel makes).
  const CudaExecutor::SmallStepFusion fusion = Fusion(t);
  const bool fuse_gate = fusion.gate, fuse_norms = fusion.norms;
  kernels::GemvParams fused;
  fused.m = t;
  fused.k = h;
  fused.dtype = dt;
  fused.norm.eps = norm.eps;
  fused.norm.weight_offset = norm.weight_offset;
  fused.activation = silu.activation;
  // y = norm(residual rows) . w^T (with the gate's epilogue when `gate`).
  auto norm_product = [&](const void* norm_weight, const void* w, void* y, int64_t n, bool gate) {
    kernels::GemvParams p = fused;
    p.norm.residual = residual.as<float>();
    p.norm.weight = norm_weight;
    p.w = w;
    p.y = y;
    p.n = n;
    p.gate = gate;
    return kernels::LaunchGemv(p, stream);
  };

  const int64_t layer_stride = int64_t{2} * cache_layout.v_offset;
  for (size_t l = 0; l < model->layers().size(); ++l) {
    const cuda::DeviceLayer& w = model->layers()[l];
    if (fuse_norms) {
      CUDA_RETURN_IF_ERROR(norm_product(w.input_norm, w.qkv.half, qkv.get(), qkv_cols, false));
    } else {
      norm.weight = w.input_norm;
      norm.delta = l == 0 ? nullptr : delta.as<float>();
      CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(norm, stream));
      RETURN_IF_ERROR(Product(normed.get(), w.qkv, qkv.get(), t, qkv_cols, h, false));
    }
    kernels::KvCacheLayout layer_cache = cache_layout;
    layer_cache.layer_offset = static_cast<int64_t>(l) * layer_stride;
    // The family's biases and per-head norms, the rotary embedding, then K and V into the cache,
    // in one launch.
    rope.inv_freq = model->inv_freq(c.LayerSliding(static_cast<int64_t>(l)));
    rope.qkv_bias = w.qkv_bias;
    rope.q_norm = w.q_norm;
    rope.k_norm = w.k_norm;
    rope.kv_write.cache = layer_cache;
    CUDA_RETURN_IF_ERROR(kernels::LaunchRotary(rope, stream));
    // Long rows' tokens by tiles, the rest one query at a time: disjoint parts of attn_out.
    prefill.cache = layer_cache;
    prefill.window = LayerWindow(c, static_cast<int64_t>(l));
    CUDA_RETURN_IF_ERROR(kernels::LaunchPagedAttentionPrefill(prefill, stream));
    attn.cache = layer_cache;
    attn.window = prefill.window;
    CUDA_RETURN_IF_ERROR(kernels::LaunchPagedAttentionDecode(attn, stream));
    if (fuse_norms) {
      RETURN_IF_ERROR(
          Product(attn_out.get(), w.o_proj, residual.get(), t, h, c.q_size(), true, true));
      CUDA_RETURN_IF_ERROR(norm_product(w.post_norm, w.gate_up.half, act.get(), 2 * in, true));
      RETURN_IF_ERROR(Product(act.get(), w.down_proj, residual.get(), t, h, in, true, true));
      continue;
    }
    RETURN_IF_ERROR(Product(attn_out.get(), w.o_proj, delta.get(), t, h, c.q_size(), true));
    if (w.pre_ffn_norm != nullptr) {
      sandwich.weight = w.post_norm;
      CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(sandwich, stream));
      norm.weight = w.pre_ffn_norm;
    } else {
      norm.weight = w.post_norm;
    }
    norm.delta = delta.as<float>();
    CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(norm, stream));
    if (fuse_gate) {
      kernels::GemvParams p = fused;
      p.x = normed.get();
      p.w = w.gate_up.half;
      p.y = act.get();
      p.n = 2 * in;
      p.gate = true;
      CUDA_RETURN_IF_ERROR(kernels::LaunchGemv(p, stream));
    } else {
      RETURN_IF_ERROR(Product(normed.get(), w.gate_up, gate_up.get(), t, 2 * in, h, false));
      CUDA_RETURN_IF_ERROR(kernels::LaunchSiluMul(silu, stream));
    }
    RETURN_IF_ERROR(Product(act.get(), w.down_proj, delta.get(), t, h, in, true));
    if (w.post_ffn_norm != nullptr) {
      sandwich.weight = w.post_ffn_norm;
      CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(sandwich, stream));
    }
  }

  const int64_t lr = layout.num_logit_rows;
  if (lr > 0) {
    if (fuse_norms && Fusion(lr).norms) {
      kernels::GemvParams p = fused;
      p.m = lr;
      p.norm.residual = residual.as<float>();
      p.norm.row_index = logit_token;
      p.norm.weight = model->final_norm();
      p.w = model->lm_head().half;
      p.y = logits.get();
      p.n = c.vocab_size;
      p.y_f32 = true;
      CUDA_RETURN_IF_ERROR(kernels::LaunchGemv(p, stream));
    } else {
      kernels::RmsNormParams final_norm = norm;
      final_norm.weight = model->final_norm();
      // With the fused norms the last down product already went into the residual.
      final_norm.delta = fuse_norms ? nullptr : delta.as<float>();
      final_norm.out = final_normed.get();
      final_norm.row_index = logit_token;
      final_norm.num_rows = lr;
      CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(final_norm, stream));
      RETURN_IF_ERROR(
          Product(final_normed.get(), model->lm_head(), logits.get(), lr, c.vocab_size, h, true));
    }
    if (c.final_logit_softcapping > 0) {
      kernels::SoftCapParams cap;
      cap.values = logits.as<float>();
      cap.num_values = lr * c.vocab_size;
      cap.cap = static_cast<float>(c.final_logit_softcapping);
      CUDA_RETURN_IF_ERROR(kernels::LaunchSoftCap(cap, stream));
    }
  }
  kernels::SamplingKernelParams sampling;
  sampling.logits = logits.as<float>();
  sampling.vocab = c.vocab_size;
  sampling.rows = sample_rows;
  sampling.out = samples.as<kernels::SampleOutput>();
  sampling.num_rows = layout.num_samples;
  CUDA_RETURN_IF_ERROR(kernels::LaunchSampling(sampling, stream));
  return absl::OkStatus();
}

absl::Status CudaExecutor::Impl::Product(const void* x, const cuda::DeviceMatrix& w, void* y,
                                         int64_t m, int64_t n, int64_t k, bool y_f32,
                                         bool accumulate) {
  const HalfType dt = model->dtype();
  if (!w.packed()) return gemm->Linear(x, w.half, y, m, n, k, dt, y_f32, accumulate);
  // Each part writes its own columns of y.
  int64_t first = 0;
  for (const cuda::DeviceMatrix::Part& part : w.parts) {
    void* part_y = static_cast<std::byte*>(y) + first * (y_f32 ? 4 : 2);
    RETURN_IF_ERROR(gemm->LinearQuant(x, part.blocks, part.type, part_y, m, part.rows, k, n, dt,
                                      y_f32, accumulate));
    first += part.rows;
  }
  return absl::OkStatus();
}

absl::StatusOr<cudaGraphExec_t> CudaExecutor::Impl::GraphFor(int64_t batch) {
  if (auto it = graphs.find(batch); it != graphs.end()) return it->second;
  const cuda::StepLayout layout = cuda::StepLayout::For(batch, batch, batch, batch);
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status forward = Forward(layout);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!forward.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return forward;
  }
  CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiate = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_RETURN_IF_ERROR(instantiate);
  graphs[batch] = exec;
  return exec;
}

// The first step of a batch size runs eagerly (cuBLAS meets the shapes outside a capture, and the
// step's inputs are already staged), then the graph is captured for the next ones. A failed
// capture turns graphs off for good: the step is run eagerly and the failure logged once.
absl::Status CudaExecutor::Impl::RunDecodeGraph(int64_t batch, const cuda::StepLayout& layout) {
  if (!graphs.contains(batch)) {
    RETURN_IF_ERROR(Forward(layout));
    // Captured work does not run, so the eager step's samples stay as they are.
    absl::StatusOr<cudaGraphExec_t> captured = GraphFor(batch);
    if (!captured.ok()) {
      graphs_disabled = true;
      cudaGetLastError();  // clear the error a failed capture leaves behind
      spdlog::warn("CUDA graph capture of decode batch {} failed, running eagerly from now on: {}",
                   batch, captured.status().ToString());
    }
    return absl::OkStatus();
  }
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs[batch], stream));
  return absl::OkStatus();
}

absl::Status CudaExecutor::Impl::CheckCapacity(const StepPlan& plan) const {
  int64_t tokens = 0, logit_rows = 0;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    const int64_t n = static_cast<int64_t>(row.token_ids.size());
    tokens += n;
    logit_rows += row.return_logits ? n : (row.sample ? 1 : 0);
    if (row.sample && row.sampling.num_top_logprobs > kernels::kMaxTopLogprobs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "row %d: num_top_logprobs is at most %d on the GPU", r, kernels::kMaxTopLogprobs));
    }
  }
  if (tokens > options.max_tokens_per_step ||
      static_cast<int64_t>(plan.rows.size()) > options.max_rows_per_step ||
      logit_rows > options.max_logit_rows) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "step of %d tokens, %d rows, %d logits rows exceeds the CUDA executor's capacity (%d, %d, "
        "%d)",
        tokens, plan.rows.size(), logit_rows, options.max_tokens_per_step,
        options.max_rows_per_step, options.max_logit_rows));
  }
  return absl::OkStatus();
}

// Fills the sampling rows' min_p and, for rows with allowed tokens or logit adjustments, their
// extras: the bits and the merged adjustments go into extras_staging (16-byte aligned parts), and
// the rows point at where they will be on the device. Returns the bytes to copy.
absl::StatusOr<size_t> CudaExecutor::Impl::StageSamplingExtras(const StepPlan& plan,
                                                               const cuda::PackedStep& packed) {
  auto* sample_rows =
      reinterpret_cast<kernels::SampleRow*>(staging.as<std::byte>() + packed.layout.sample_rows);
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  const size_t mask_bytes = (static_cast<size_t>(vocab) + 31) / 32 * 4;
  auto aligned = [](size_t n) { return (n + 15) / 16 * 16; };
  // Sizes first (each row's adjustments merged once, here), so that the buffers grow (rarely)
  // before anything is written.
  size_t bytes = 0;
  merged.clear();
  merged_at.assign(plan.rows.size() + 1, 0);
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    merged_at[r] = merged.size();
    if (packed.sample_index[r] < 0) continue;
    if (row.allowed_tokens != nullptr) bytes += aligned(mask_bytes);
    if (row.logit_adjustments != nullptr) {
      row.logit_adjustments->Merge(vocab, &row_merged);
      merged.insert(merged.end(), row_merged.begin(), row_merged.end());
      bytes += aligned(row_merged.size() * sizeof(kernels::LogitAdjustment));
    }
  }
  merged_at[plan.rows.size()] = merged.size();
  if (bytes > extras.size()) {
    const size_t grown = std::max(bytes, 2 * extras.size());
    ASSIGN_OR_RETURN(extras, DeviceBuffer::Allocate(grown));
    ASSIGN_OR_RETURN(extras_staging, PinnedBuffer::Allocate(grown));
  }
  size_t at = 0;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    if (packed.sample_index[r] < 0) continue;
    kernels::SampleRow& sr = sample_rows[packed.sample_index[r]];
    sr.min_p = row.sampling.min_p;
    if (row.allowed_tokens != nullptr) {
      std::memcpy(extras_staging.as<std::byte>() + at, row.allowed_tokens->Get(), mask_bytes);
      sr.allowed = reinterpret_cast<const uint32_t*>(extras.as<std::byte>() + at);
      at += aligned(mask_bytes);
    }
    if (row.logit_adjustments != nullptr) {
      const size_t count = merged_at[r + 1] - merged_at[r];
      auto* entries =
          reinterpret_cast<kernels::LogitAdjustment*>(extras_staging.as<std::byte>() + at);
      for (size_t e = 0; e < count; ++e) {
        const MergedLogitAdjustment& m = merged[merged_at[r] + e];
        entries[e] = {m.token, m.bias, m.repetition, m.subtract, 0.0f};
      }
      sr.adjustments = reinterpret_cast<kernels::LogitAdjustment*>(extras.as<std::byte>() + at);
      sr.num_adjustments = static_cast<int32_t>(count);
      at += aligned(count * sizeof(kernels::LogitAdjustment));
    }
  }
  return at;
}

absl::Status CudaExecutor::Impl::Launch(
    const StepPlan& plan, absl::FunctionRef<absl::Status()> accept,
    absl::FunctionRef<absl::Span<const BlockId>(const StepRow&)> table_of) {
  if (launched) return absl::FailedPreconditionError("a step is launched and not collected");
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(ValidateStepPlan(plan, model->config(), spec));
  RETURN_IF_ERROR(CheckCapacity(plan));
  RETURN_IF_ERROR(accept());
  row_tables.resize(plan.rows.size());
  for (size_t r = 0; r < plan.rows.size(); ++r) row_tables[r] = table_of(plan.rows[r]).data();
  InFlight step;
  step.empty = plan.rows.empty();
  if (step.empty) {
    in_flight = std::move(step);
    launched = true;
    return absl::OkStatus();
  }

  // Decode steps (one sampled token per row, no logits back) replay a graph.
  int64_t graph_batch = 0;
  if (options.use_cuda_graphs && !graphs_disabled) {
    const bool decode = std::all_of(plan.rows.begin(), plan.rows.end(), [](const StepRow& r) {
      return r.token_ids.size() == 1 && r.sample && !r.return_logits;
    });
    if (decode) {
      for (int32_t size : usable_graph_sizes) {
        if (size >= static_cast<int64_t>(plan.rows.size())) {
          graph_batch = size;
          break;
        }
      }
    }
  }
  ASSIGN_OR_RETURN(step.packed, cuda::PackStep(plan, row_tables, spec.block_size, scratch_block,
                                               graph_batch, options.prefill_kernel_min_tokens,
                                               staging.get(), inputs_capacity));
  ASSIGN_OR_RETURN(const size_t extras_bytes, StageSamplingExtras(plan, step.packed));
  step.rows.reserve(plan.rows.size());
  for (const StepRow& row : plan.rows) {
    step.rows.push_back(
        {row.seq_id, static_cast<int64_t>(row.token_ids.size()), row.sampling.num_top_logprobs});
  }
  const absl::Time packed = absl::Now();
  step.times.prepare = packed - start;
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(inputs.get(), staging.get(),
                                       step.packed.layout.Bytes(step.packed.num_block_ids),
                                       cudaMemcpyHostToDevice, stream));
  if (extras_bytes > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(extras.get(), extras_staging.get(), extras_bytes,
                                         cudaMemcpyHostToDevice, stream));
  }
  if (graph_batch > 0) {
    RETURN_IF_ERROR(RunDecodeGraph(graph_batch, step.packed.layout));
  } else {
    RETURN_IF_ERROR(Forward(step.packed.layout));
  }
  // The sampled tokens come back on the stream, behind the step; Collect waits for them.
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(sample_staging.get(), samples.get(),
                      step.packed.layout.num_samples * sizeof(kernels::SampleOutput),
                      cudaMemcpyDeviceToHost, stream));
  step.launched_at = packed;
  in_flight = std::move(step);
  launched = true;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> CudaExecutor::Impl::Collect() {
  if (!launched) return absl::FailedPreconditionError("no step is launched");
  launched = false;
  const InFlight step = std::move(in_flight);
  StepResult result;
  if (step.empty) return result;
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const absl::Time done = absl::Now();
  // Launch to the tokens on the host: the device's step as the host sees it.
  result.times.prepare = step.times.prepare;
  result.times.forward = done - step.launched_at;

  const int64_t vocab = model->config().vocab_size;
  const auto* outputs = sample_staging.as<kernels::SampleOutput>();
  result.rows.resize(step.rows.size());
  for (size_t r = 0; r < step.rows.size(); ++r) {
    const InFlight::Row& row = step.rows[r];
    RowResult& out = result.rows[r];
    out.seq_id = row.seq_id;
    if (step.packed.sample_index[r] >= 0) {
      const kernels::SampleOutput& s = outputs[step.packed.sample_index[r]];
      if (s.token < 0) {
        out.status = NoAllowedTokenError(row.seq_id);
        continue;
      }
      out.token = s.token;
      out.logprob = s.logprob;
      for (int i = 0; i < row.num_top_logprobs; ++i) {
        out.top_logprobs.push_back({s.top_tokens[i], s.top_logprobs[i]});
      }
    }
    if (step.packed.first_logits_row[r] >= 0) {
      const int64_t n = row.num_tokens;
      out.logits.resize(n * vocab);
      CUDA_RETURN_IF_ERROR(cudaMemcpy(out.logits.data(),
                                      logits.as<float>() + step.packed.first_logits_row[r] * vocab,
                                      n * vocab * sizeof(float), cudaMemcpyDeviceToHost));
    }
  }
  result.times.sample = absl::Now() - done;  // the host's share: results laid out
  result.padded_length = step.packed.padded_length;
  result.real_tokens = step.packed.real_tokens;
  result.computed_tokens = step.packed.layout.num_tokens;  // graph padding rows included
  result.padded_tokens =
      static_cast<int64_t>(step.rows.size()) * step.packed.padded_length - step.packed.real_tokens;
  return result;
}

CudaExecutor::CudaExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaExecutor::~CudaExecutor() = default;

namespace {

HalfType ToHalfType(CudaWeightType type) {
  return type == CudaWeightType::kF16 ? HalfType::kF16 : HalfType::kBF16;
}

// Every family's departures from Llama run on the CUDA kernels (Qwen2's QKV biases, Qwen3's and
// Gemma 3's per-head Q/K norms, sliding windows per layer, Phi-3's fused projections, LongRoPE,
// partial rotary embeddings, Gemma 3's GeGLU, sandwich norms, norm offsets, embedding and query
// scaling, per-layer rope bases and logit soft-capping); the kernels' shapes are what is left to
// refuse, before anything is uploaded.
absl::Status CheckShape(const ModelConfig& c) {
  if (c.head_dim != 64 && c.head_dim != 96 && c.head_dim != 128 && c.head_dim != 256) {
    return absl::UnimplementedError(absl::StrFormat(
        "the CUDA executor's attention kernels take head_dim 64, 96, 128 and 256, not %d (%s); "
        "serve it with the CPU executor",
        c.head_dim, c.architecture));
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0 ||
      c.num_attention_heads / c.num_key_value_heads > kernels::kMaxGqaGroup ||
      c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0 || c.hidden_size > 8192) {
    return absl::UnimplementedError(
        absl::StrFormat("the CUDA executor does not support this model shape (%s: hidden_size %d, "
                        "intermediate_size %d, %d query heads over %d key/value heads)",
                        c.architecture, c.hidden_size, c.intermediate_size, c.num_attention_heads,
                        c.num_key_value_heads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(
    const ModelWeights& weights, const CudaExecutorOptions& options) {
  RETURN_IF_ERROR(CheckShape(weights.config()));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->model, cuda::DeviceModel::Upload(weights, ToHalfType(options.weight_type),
                                                          options.native_weights));
  RETURN_IF_ERROR(impl->Init(options));
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::CreateRandom(
    const ModelConfig& config, const CudaExecutorOptions& options, uint64_t seed) {
  RETURN_IF_ERROR(CheckShape(config));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->model,
                   cuda::DeviceModel::Random(config, ToHalfType(options.weight_type), seed));
  RETURN_IF_ERROR(impl->Init(options));
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(impl)));
}

absl::StatusOr<StepResult> CudaExecutor::Step(const StepPlan& plan) {
  RETURN_IF_ERROR(Launch(plan));
  return Collect();
}
absl::Status CudaExecutor::Launch(const StepPlan& plan) {
  return impl_->Launch(
      plan, [&] { return AcceptTables(plan); },
      [this](const StepRow& row) { return TableOf(row); });
}
absl::StatusOr<StepResult> CudaExecutor::Collect() { return impl_->Collect(); }

CudaExecutor::SmallStepFusion CudaExecutor::FusionFor(int64_t tokens) const {
  return impl_->Fusion(tokens);
}
const ModelConfig& CudaExecutor::model_config() const { return impl_->model->config(); }
const KvCacheSpec& CudaExecutor::kv_spec() const { return impl_->spec; }
ExecutorLimits CudaExecutor::limits() const {
  ExecutorLimits limits;
  limits.max_tokens_per_step = impl_->options.max_tokens_per_step;
  limits.max_rows_per_step = impl_->options.max_rows_per_step;
  limits.max_top_logprobs = static_cast<int32_t>(std::min<int64_t>(
      {kMaxTopLogprobs, kernels::kMaxTopLogprobs, impl_->model->config().vocab_size}));
  limits.computes_padding = false;  // tokens are packed row after row
  limits.applies_token_constraints = true;
  limits.applies_extended_sampling = true;
  limits.scores_prompts = false;
  return limits;
}
absl::Status CudaExecutor::CheckRow(const StepRow& row) const {
  RETURN_IF_ERROR(Executor::CheckRow(row));
  if (row.return_logits && (row.allowed_tokens != nullptr || row.logit_adjustments != nullptr)) {
    // The sampling kernel rewrites such a row's logits in place.
    return absl::UnimplementedError(absl::StrFormat(
        "sequence %d: the CUDA executor does not return logits of a row with allowed tokens or "
        "logit adjustments",
        row.seq_id));
  }
  return RefusePromptScoring(row, "CUDA");
}
int64_t CudaExecutor::weight_bytes() const { return impl_->model->weight_bytes(); }

}  // namespace convoy
