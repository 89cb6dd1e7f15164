// The CPU executor's forward step on a TinyLlama-shaped random model (1.1B parameters; or a real
// model, see CONVOY_BENCH_MODEL):
// prefill tokens/s and the matrix-product rate it implies, as a fraction of this machine's
// multiply-add peak measured in the same run (compute_peak.h), decode tokens/s at several batch
// sizes, and batch-1 decode's weight-read rate as a fraction of the streaming-read bandwidth
// measured in the same run.
//
//   build/bench/cpu/cpu_forward_bench [--benchmark_filter=...]
// Environment: CONVOY_BENCH_MODEL_DIR (where the random model is written once and reused; default
// ./bench-models), CONVOY_BENCH_SHAPE=tinyllama|tiny (tiny: a seconds-long smoke run),
// CONVOY_BENCH_MODEL (a real model instead: a .gguf file or a model directory; the matrix-product
// ceiling stays TinyLlama's MLP shape).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"
#include "compute_peak.h"
#include "executor/cpu/cpu_executor.h"
#include "executor/cpu/linear.h"
#include "kv/block_allocator.h"
#include "kv/block_table.h"
#include "memory_bandwidth.h"
#include "model/model_weights.h"
#include "model/random_model.h"

namespace convoy::bench {
namespace {

ModelConfig BenchConfig() {
  const char* shape = std::getenv("CONVOY_BENCH_SHAPE");
  ModelConfig c;
  if (shape != nullptr && std::string(shape) == "tiny") {
    c.vocab_size = 512;
    c.hidden_size = 128;
    c.intermediate_size = 352;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
  } else {  // TinyLlama-1.1B
    c.vocab_size = 32000;
    c.hidden_size = 2048;
    c.intermediate_size = 5632;
    c.num_hidden_layers = 22;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 4;
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.max_position_embeddings = 2048;
  c.torch_dtype = DType::kBF16;
  return c;
}

// Parameters the linear layers (and the lm_head) read per token.
double LinearParameters(const ModelConfig& c) {
  const double per_layer = static_cast<double>(c.hidden_size) * (c.q_size() + 2 * c.kv_size()) +
                           static_cast<double>(c.q_size()) * c.hidden_size +
                           3.0 * c.hidden_size * c.intermediate_size;
  return per_layer * c.num_hidden_layers + static_cast<double>(c.vocab_size) * c.hidden_size;
}

double StreamBandwidth() {
  static const double bw = [] {
    const double b = MeasureStreamingReadBandwidth(int64_t{2} << 30, 5);
    std::fprintf(stderr, "streaming-read bandwidth: %.1f GB/s\n", b / 1e9);
    return b;
  }();
  return bw;
}

const ModelWeights& Weights() {
  static std::unique_ptr<ModelWeights> weights = [] {
    const ModelConfig c = BenchConfig();
    const char* base = std::getenv("CONVOY_BENCH_MODEL_DIR");
    const char* real = std::getenv("CONVOY_BENCH_MODEL");
    const bool use_real = real != nullptr && *real != '\0';
    const std::string dir = use_real ? std::string(real)
                                     : std::string(base ? base : "bench-models") + "/random-" +
                                           std::to_string(c.hidden_size) + "x" +
                                           std::to_string(c.num_hidden_layers) + "-bf16";
    if (!use_real && !std::filesystem::exists(dir + "/config.json")) {
      std::fprintf(stderr, "writing random model to %s\n", dir.c_str());
      RandomModelOptions options{c, 1, DType::kBF16, 1};
      absl::Status s = WriteRandomModel(dir, options);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        std::exit(1);
      }
    }
    auto w = ModelWeights::Load(dir);
    if (!w.ok()) {
      std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
      std::exit(1);
    }
    return std::move(w).value();
  }();
  return *weights;
}

// The weight format, the products and the attention's work items: "bf16" and "f32" are
// batch-invariant (the project's kernels for every product; bf16 only where the CPU has AVX-512
// BF16, fp32 weights elsewhere) with attention items that share K and V: what convoyd runs.
// "bf16_fewrow" is the executor before batch invariance: oneDNN's products, the few-row kernel
// for decode steps; "bf16_onednn" and "f32_onednn" keep every product in oneDNN; "bf16_attn1"
// runs one attention item per token and head. The "_kv_" variants keep the KV cache in another
// type (cpu_executor.h kv_dtype); "_ctx512" decodes after a 512-token prompt instead of 128, where
// attention reads four times the cache.
struct Variant {
  CpuWeightFormat format;
  bool few_row_kernel;
  bool share_attention_kv = true;
  bool batch_invariant = true;
  KvDtype kv_dtype = KvDtype::kF32;
  int32_t decode_context = 128;  // BM_Decode's prompt length
};
constexpr Variant kBf16{CpuWeightFormat::kBF16, true};
constexpr Variant kBf16FewRow{CpuWeightFormat::kBF16, true, true, false};
constexpr Variant kBf16OneDnn{CpuWeightFormat::kBF16, false, true, false};
constexpr Variant kBf16Attn1{CpuWeightFormat::kBF16, true, false};
constexpr Variant kF32{CpuWeightFormat::kF32, false};
constexpr Variant kF32OneDnn{CpuWeightFormat::kF32, false, true, false};
// A quantized file (CONVOY_BENCH_MODEL=file.gguf) in its own blocks (quant_matmul.h).
constexpr Variant kNative{CpuWeightFormat::kNative, false};
constexpr Variant kNativeKvBf16{
    .format = CpuWeightFormat::kNative, .few_row_kernel = false, .kv_dtype = KvDtype::kBF16};
constexpr Variant kNativeKvInt8{
    .format = CpuWeightFormat::kNative, .few_row_kernel = false, .kv_dtype = KvDtype::kInt8};
constexpr Variant kNativeCtx512{
    .format = CpuWeightFormat::kNative, .few_row_kernel = false, .decode_context = 512};
constexpr Variant kNativeKvBf16Ctx512{.format = CpuWeightFormat::kNative,
                                      .few_row_kernel = false,
                                      .kv_dtype = KvDtype::kBF16,
                                      .decode_context = 512};
constexpr Variant kNativeKvInt8Ctx512{.format = CpuWeightFormat::kNative,
                                      .few_row_kernel = false,
                                      .kv_dtype = KvDtype::kInt8,
                                      .decode_context = 512};

// One executor (one copy of the weights) in memory at a time.
CpuExecutor& Executor(Variant variant) {
  static std::unique_ptr<CpuExecutor> executor;
  static Variant current{CpuWeightFormat::kAuto, false};
  if (executor == nullptr || current.format != variant.format ||
      current.few_row_kernel != variant.few_row_kernel ||
      current.share_attention_kv != variant.share_attention_kv ||
      current.batch_invariant != variant.batch_invariant || current.kv_dtype != variant.kv_dtype) {
    executor.reset();
    CpuExecutorOptions options;
    options.weight_format = variant.format;
    options.few_row_kernel = variant.few_row_kernel;
    options.share_attention_kv = variant.share_attention_kv;
    options.batch_invariant = variant.batch_invariant;
    options.kv_dtype = variant.kv_dtype;
    options.kv_cache_bytes = int64_t{1} << 30;
    auto created = CpuExecutor::Create(Weights(), options);
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      std::exit(1);
    }
    executor = std::move(created).value();
    current = variant;
  }
  return *executor;
}

// The weight format the executor runs (bf16 may fall back to fp32) and its products.
std::string Describe(const CpuExecutor& executor) {
  std::string label = CpuWeightFormatName(executor.weight_format());
  label += executor.batch_invariant()  ? " (batch-invariant)"
           : executor.few_row_kernel() ? " (few-row kernel)"
                                       : " (oneDNN)";
  if (executor.kv_spec().dtype != KvDtype::kF32) {
    label += std::string(", KV cache ") + KvDtypeName(executor.kv_spec().dtype);
  }
  return label;
}

void BM_StreamingRead(benchmark::State& state) {
  for (auto _ : state) {
    state.counters["GB/s"] = StreamBandwidth() / 1e9;
  }
}

// One decode step for `batch` sequences, each with `context` tokens already in the cache.
void BM_Decode(benchmark::State& state, Variant variant) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  const int32_t context = variant.decode_context;
  CpuExecutor& executor = Executor(variant);
  const ModelConfig& c = executor.model_config();
  BlockAllocator allocator(executor.kv_spec().num_blocks);
  std::vector<BlockTable> tables;
  StepPlan prefill, decode;
  for (int32_t b = 0; b < batch; ++b) {
    tables.emplace_back(executor.kv_spec().block_size);
    if (!tables.back().Reserve(context + 1, &allocator).ok()) {
      state.SkipWithError("KV cache too small");
      return;
    }
    StepRow row;
    row.seq_id = b;
    for (int32_t t = 0; t < context; ++t)
      row.token_ids.push_back(static_cast<int32_t>((b * 131 + t * 7) % (c.vocab_size - 3) + 3));
    row.block_table = tables.back().blocks();
    prefill.rows.push_back(row);
    row.token_ids = {static_cast<int32_t>((b * 17) % (c.vocab_size - 5) + 5)};
    row.start_pos = context;
    decode.rows.push_back(row);
  }
  for (const StepRow& row : prefill.rows) {  // one at a time: keeps the padded matrix small
    StepPlan one;
    one.rows.push_back(row);
    if (!executor.Step(one).ok()) state.SkipWithError("prefill failed");
  }
  if (!executor.Step(decode).ok()) state.SkipWithError("warm-up step failed");
  // This machine's bandwidth drifts by tens of percent from minute to minute (other tenants), so
  // the limit is measured right before and right after the decode steps and averaged.
  const double bandwidth_before = MeasureStreamingReadBandwidth(int64_t{1} << 30, 3);
  for (auto _ : state) {
    auto result = executor.Step(decode);  // rewrites position `context`: the same work each time
    if (!result.ok()) state.SkipWithError(std::string(result.status().message()).c_str());
    benchmark::DoNotOptimize(result);
  }
  const double bandwidth =
      (bandwidth_before + MeasureStreamingReadBandwidth(int64_t{1} << 30, 3)) / 2;
  const double bytes_per_step = static_cast<double>(executor.linear_weight_bytes());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weights_GB/s"] =
      benchmark::Counter(bytes_per_step / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["stream_GB/s"] = bandwidth / 1e9;
  state.SetLabel(Describe(executor));
  // The fraction itself: weight bytes per step over step time, against the streaming read.
  state.counters["bw_fraction"] =
      benchmark::Counter(bytes_per_step / bandwidth, benchmark::Counter::kIsIterationInvariantRate);
}

// Prefill of one `length`-token prompt.
void BM_Prefill(benchmark::State& state, Variant variant) {
  const int32_t length = static_cast<int32_t>(state.range(0));
  CpuExecutor& executor = Executor(variant);
  const ModelConfig& c = executor.model_config();
  BlockAllocator allocator(executor.kv_spec().num_blocks);
  BlockTable table(executor.kv_spec().block_size);
  if (!table.Reserve(length, &allocator).ok()) {
    state.SkipWithError("KV cache too small");
    return;
  }
  StepPlan plan;
  StepRow row;
  for (int32_t t = 0; t < length; ++t) row.token_ids.push_back((t * 7919) % (c.vocab_size - 3) + 3);
  row.block_table = table.blocks();
  plan.rows.push_back(row);
  // One untimed step: the first run of a batch shape creates oneDNN's primitives and touches
  // fresh scratch memory.
  if (!executor.Step(plan).ok()) state.SkipWithError("warm-up step failed");
  // The machine's multiply-add peak drifts with other tenants as its bandwidth does: measured
  // right before and right after the steps and averaged.
  const ComputePeak peak_before = MeasureComputePeak(3);
  for (auto _ : state) {
    auto result = executor.Step(plan);
    if (!result.ok()) state.SkipWithError(std::string(result.status().message()).c_str());
    benchmark::DoNotOptimize(result);
  }
  const double peak = (peak_before.flops + MeasureComputePeak(3).flops) / 2;
  // Linear layers for every token; the lm_head runs for the sampled position only.
  const double layer_params =
      LinearParameters(c) - static_cast<double>(c.vocab_size) * c.hidden_size;
  const double flop_per_token = 2.0 * layer_params;
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(length),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["matmul_TFLOP/s"] = benchmark::Counter(
      flop_per_token * length / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  // What another engine's prefill rate is converted with to compare it to the same peak.
  state.counters["matmul_flop_per_token"] = flop_per_token;
  state.counters["peak_TFLOP/s"] = peak / 1e12;
  // The products' rate against the peak (attention, norms and the rest not counted as work).
  state.counters["peak_fraction"] = benchmark::Counter(
      flop_per_token * length / peak, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(Describe(executor) + " (peak: " + peak_before.instruction + ")");
}

// The library's ceiling: one bf16 product of TinyLlama's MLP shape (M tokens x 2048 -> 5632),
// weights in oneDNN's blocked layout, as the prefill's linear layers run it.
void BM_MatmulBF16(benchmark::State& state) {
  const int64_t m = state.range(0), k = 2048, n = 5632;
  std::vector<uint16_t> weights(n * k);
  for (int64_t i = 0; i < n * k; ++i) weights[i] = FloatToBF16(static_cast<float>(i % 97) / 97.0f);
  TensorView view;
  view.name = "bench.weight";
  view.dtype = DType::kBF16;
  view.shape = {n, k};
  view.data = reinterpret_cast<const std::byte*>(weights.data());
  view.num_bytes = weights.size() * 2;
  auto linear = Linear::Create({&view}, LinearFormat::kBF16);
  if (!linear.ok()) {
    state.SkipWithError(std::string(linear.status().message()).c_str());
    return;
  }
  std::vector<float> x(m * k), y(m * n);
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<float>(i % 13) / 13.0f;
  for (auto _ : state) {
    (*linear)->Forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * m * k * n / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

// One fp32 product of a SmolLM2-135M layer's shape alone, M rows: the batch-invariant kernel
// (gemm_f32.h) or oneDNN's. Weights and inputs are random and touched.
void BM_LinearF32(benchmark::State& state, bool batch_invariant) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  std::vector<float> weights(n * k);
  uint32_t seed = 1;
  for (float& w : weights) {
    seed = seed * 1664525u + 1013904223u;
    w = static_cast<float>(seed >> 8) / (1 << 24) - 0.5f;
  }
  TensorView view;
  view.name = "bench.weight";
  view.dtype = DType::kF32;
  view.shape = {n, k};
  view.data = reinterpret_cast<const std::byte*>(weights.data());
  view.num_bytes = weights.size() * sizeof(float);
  auto linear = Linear::Create({&view}, LinearFormat::kF32, false, batch_invariant);
  if (!linear.ok()) {
    state.SkipWithError(std::string(linear.status().message()).c_str());
    return;
  }
  std::vector<float> x(m * k), y(m * n);
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
  (*linear)->Forward(x.data(), m, y.data());
  for (auto _ : state) {
    (*linear)->Forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * k * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(batch_invariant ? "batch-invariant" : "oneDNN");
}

// The fastest repetition: on a shared machine others' work only ever slows a run down.
double Fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void LinearShapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 4, 16, 128, 512}) {
    b->Args({m, 576, 3072});  // gate and up
    b->Args({m, 1536, 576});  // down
  }
}

// Whole prompts of 128 and 512 tokens; decode steps of 1, 4 and 16 rows; the fastest of the
// repetitions reported beside their mean.
void PromptSteps(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", Fastest)->Arg(128)->Arg(512);
  b->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
}
void DecodeSteps(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", Fastest)->Arg(1)->Arg(4)->Arg(16);
  b->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_LinearF32, invariant, true)
    ->Apply(LinearShapes)
    ->ArgNames({"m", "k", "n"})
    ->ComputeStatistics("min", Fastest)
    ->MinTime(0.5)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearF32, onednn, false)
    ->Apply(LinearShapes)
    ->ArgNames({"m", "k", "n"})
    ->ComputeStatistics("min", Fastest)
    ->MinTime(0.5)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_StreamingRead)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulBF16)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill, bf16, kBf16)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
// The same prompts with one attention item per token and head: sharing K and V's gain.
BENCHMARK_CAPTURE(BM_Prefill, bf16_attn1, kBf16Attn1)
    ->Arg(128)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, bf16, kBf16)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
// The same steps with every product in oneDNN: the few-row kernel's gain, in the same run.
BENCHMARK_CAPTURE(BM_Decode, bf16_onednn, kBf16OneDnn)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, bf16_attn1, kBf16Attn1)
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, bf16_fewrow, kBf16FewRow)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
// fp32 weights (what a CPU without AVX-512 BF16 runs): batch-invariant against oneDNN, the cost
// of the invariance in the same run.
BENCHMARK_CAPTURE(BM_Prefill, f32, kF32)->Apply(PromptSteps);
BENCHMARK_CAPTURE(BM_Prefill, f32_onednn, kF32OneDnn)->Apply(PromptSteps);
BENCHMARK_CAPTURE(BM_Decode, f32, kF32)->Apply(DecodeSteps);
BENCHMARK_CAPTURE(BM_Decode, f32_onednn, kF32OneDnn)->Apply(DecodeSteps);
// A quantized file's own blocks (set CONVOY_BENCH_MODEL to a GGUF file; on the random bf16 model
// every layer falls back to fp32): the same steps as f32 and bf16 above, in the same run.
BENCHMARK_CAPTURE(BM_Prefill, native, kNative)->Apply(PromptSteps);
BENCHMARK_CAPTURE(BM_Decode, native, kNative)->Apply(DecodeSteps);
// The KV cache's types side by side: the same native decode steps after 128 and 512 tokens.
BENCHMARK_CAPTURE(BM_Decode, native_kv_bf16, kNativeKvBf16)->Apply(DecodeSteps);
BENCHMARK_CAPTURE(BM_Decode, native_kv_int8, kNativeKvInt8)->Apply(DecodeSteps);
BENCHMARK_CAPTURE(BM_Decode, native_ctx512, kNativeCtx512)->Apply(DecodeSteps);
BENCHMARK_CAPTURE(BM_Decode, native_kv_bf16_ctx512, kNativeKvBf16Ctx512)->Apply(DecodeSteps);
BENCHMARK_CAPTURE(BM_Decode, native_kv_int8_ctx512, kNativeKvInt8Ctx512)->Apply(DecodeSteps);

}  // namespace
}  // namespace convoy::bench

BENCHMARK_MAIN();
