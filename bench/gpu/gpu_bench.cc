// Measures the CUDA executor on random-weight Llama shapes made on the device, against limits
// measured in the same run (device-to-device copy bandwidth, cuBLAS bf16 matrix-product rate), and
// prints one table. Usage: gpu_bench [--quick]   (--quick: the 1B shape only, fewer steps)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "executor/cuda/cuda_executor.h"
#include "kernels/fill_random.cuh"

namespace convoy {
namespace {

#define BENCH_CHECK(expr)                                                           \
  do {                                                                              \
    if (!(expr)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (false)

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes read plus bytes written per second by large device-to-device copies.
double CopyBandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  BENCH_CHECK(cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess);
  kernels::FillRandomParams fill;
  fill.data = a;
  fill.num_elements = bytes / 2;
  BENCH_CHECK(kernels::LaunchFillRandom(fill, nullptr) == cudaSuccess);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  const int reps = 20;
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(stop);
  BENCH_CHECK(cudaEventSynchronize(stop) == cudaSuccess);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * reps / (ms * 1e-3);
}

// FLOP/s of a bf16 8192^3 product through cuBLAS, on random data.
double GemmRate() {
  const int n = 8192;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t bytes = size_t{n} * n * 2;
  BENCH_CHECK(cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
              cudaMalloc(&c, bytes) == cudaSuccess);
  for (void* p : {a, b}) {
    kernels::FillRandomParams fill;
    fill.data = p;
    fill.num_elements = int64_t{n} * n;
    fill.seed = reinterpret_cast<uintptr_t>(p);
    BENCH_CHECK(kernels::LaunchFillRandom(fill, nullptr) == cudaSuccess);
  }
  cublasHandle_t handle;
  BENCH_CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    BENCH_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n,
                             b, CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  };
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int reps = 10;
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i) run();
  cudaEventRecord(stop);
  BENCH_CHECK(cudaEventSynchronize(stop) == cudaSuccess);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * n * n * double{n} * reps / (ms * 1e-3);
}

ModelConfig Llama(bool eight_b) {
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

std::unique_ptr<CudaExecutor> MakeExecutor(const ModelConfig& config, bool graphs) {
  CudaExecutorOptions options;
  options.kv_cache_bytes = int64_t{8} << 30;
  options.max_tokens_per_step = 4096;
  options.max_rows_per_step = 64;
  options.max_logit_rows = 64;
  options.use_cuda_graphs = graphs;
  auto executor = CudaExecutor::CreateRandom(config, options, 1234);
  if (!executor.ok()) {
    std::fprintf(stderr, "CreateRandom: %s\n", executor.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*executor);
}

constexpr int kBlocksPerSeq = 140;  // 2,240 positions

StepRow MakeRow(int seq, std::vector<int32_t> tokens, int32_t start) {
  StepRow row;
  row.seq_id = seq;
  row.token_ids = std::move(tokens);
  row.start_pos = start;
  for (int i = 0; i < kBlocksPerSeq; ++i) row.block_table.push_back(seq * kBlocksPerSeq + i);
  return row;
}

void Step(CudaExecutor& executor, const StepPlan& plan, StepResult* result) {
  auto r = executor.Step(plan);
  if (!r.ok()) {
    std::fprintf(stderr, "Step: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  *result = std::move(*r);
}

// Decode tokens/s at `batch` after a 128-token prompt per sequence; also the seconds per step.
double DecodeRate(CudaExecutor& executor, int batch, int steps, double* step_seconds) {
  const int prompt = 128;
  StepPlan plan;
  for (int s = 0; s < batch; ++s) {
    std::vector<int32_t> tokens(prompt);
    for (int i = 0; i < prompt; ++i) tokens[i] = (s * 7919 + i * 104729) % 128000;
    plan.rows.push_back(MakeRow(s, tokens, 0));
  }
  StepResult result;
  Step(executor, plan, &result);
  int32_t pos = prompt;
  double start = 0;
  const int warmup = 3;
  for (int step = 0; step < warmup + steps; ++step) {
    if (step == warmup) start = Seconds();
    StepPlan decode;
    for (int s = 0; s < batch; ++s) decode.rows.push_back(MakeRow(s, {result.rows[s].token}, pos));
    Step(executor, decode, &result);
    ++pos;
  }
  const double elapsed = Seconds() - start;
  *step_seconds = elapsed / steps;
  return batch * steps / elapsed;
}

double PrefillRate(CudaExecutor& executor, int tokens, int reps) {
  StepPlan plan;
  std::vector<int32_t> ids(tokens);
  for (int i = 0; i < tokens; ++i) ids[i] = (i * 104729) % 128000;
  plan.rows.push_back(MakeRow(0, ids, 0));
  StepResult result;
  Step(executor, plan, &result);
  const double start = Seconds();
  for (int i = 0; i < reps; ++i) Step(executor, plan, &result);
  return tokens * reps / (Seconds() - start);
}

double PrefillFlops(const ModelConfig& c, int tokens) {
  const double linear = 2.0 * tokens *
                        (c.num_hidden_layers *
                         (c.hidden_size * (c.q_size() + 2 * c.kv_size()) +
                          c.q_size() * c.hidden_size + 3.0 * c.hidden_size * c.intermediate_size));
  const double attention =
      2.0 * 2.0 * c.num_hidden_layers * c.q_size() * (static_cast<double>(tokens) * tokens / 2.0);
  return linear + attention + 2.0 * c.vocab_size * c.hidden_size;
}

int Main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!CudaDeviceAvailable()) {
    std::printf("no GPU: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const double copy_bw = CopyBandwidth();
  const double gemm_rate = GemmRate();
  std::vector<std::string> lines;
  char buf[512];
  std::snprintf(buf, sizeof buf, "| device | %.100s, %d SMs |", prop.name,
                prop.multiProcessorCount);
  lines.push_back(buf);
  std::snprintf(buf, sizeof buf, "| D2D copy bandwidth (read+write) | %.0f GB/s |", copy_bw / 1e9);
  lines.push_back(buf);
  std::snprintf(buf, sizeof buf, "| cuBLAS bf16 8192^3 | %.0f TFLOP/s |", gemm_rate / 1e12);
  lines.push_back(buf);
  const int steps = quick ? 16 : 48;
  for (bool eight_b : quick ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
    const ModelConfig config = Llama(eight_b);
    const char* name = eight_b ? "8B" : "1B";
    auto executor = MakeExecutor(config, true);
    const double weight_bytes = static_cast<double>(executor->weight_bytes());
    for (int batch : {1, 8, 64}) {
      double step_s = 0;
      const double rate = DecodeRate(*executor, batch, steps, &step_s);
      if (batch == 1) {
        // Batch-1 bytes per step: every weight (the tied embedding once, as the lm_head) plus the
        // KV cache read (about 150 positions).
        const double kv = 150.0 * 2 * config.num_hidden_layers * config.kv_size() * 2;
        const double bytes =
            weight_bytes -
            (config.tie_word_embeddings ? 0.0 : 2.0 * config.vocab_size * config.hidden_size) + kv;
        std::snprintf(buf, sizeof buf,
                      "| %s decode b=1 | %.0f tok/s, %.3f ms/step, %.0f GB/s = %.0f%% of copy bw "
                      "(target %s) |",
                      name, rate, step_s * 1e3, bytes / step_s / 1e9,
                      100.0 * bytes / step_s / copy_bw, eight_b ? ">=75%" : ">=45%");
      } else {
        std::snprintf(buf, sizeof buf, "| %s decode b=%d | %.0f tok/s, %.3f ms/step |", name, batch,
                      rate, step_s * 1e3);
      }
      lines.push_back(buf);
      std::printf("%s\n", buf);
      std::fflush(stdout);
    }
    const int prefill_tokens = 2048;
    const double prefill = PrefillRate(*executor, prefill_tokens, quick ? 2 : 4);
    const double flops = PrefillFlops(config, prefill_tokens) * prefill / prefill_tokens;
    std::snprintf(
        buf, sizeof buf,
        "| %s prefill 2048 | %.0f tok/s, %.0f TFLOP/s = %.0f%% of cuBLAS (target >=60%%) |", name,
        prefill, flops / 1e12, 100.0 * flops / gemm_rate);
    lines.push_back(buf);
    std::printf("%s\n", buf);
    if (!eight_b) {
      executor.reset();
      auto no_graphs = MakeExecutor(config, false);
      double off_s = 0, on_s = 0;
      DecodeRate(*no_graphs, 1, steps, &off_s);
      no_graphs.reset();
      auto with_graphs = MakeExecutor(config, true);
      DecodeRate(*with_graphs, 1, steps, &on_s);
      std::snprintf(buf, sizeof buf,
                    "| 1B b=1 CUDA graphs | off %.3f ms, on %.3f ms: %.2fx (target >=1.25x) |",
                    off_s * 1e3, on_s * 1e3, off_s / on_s);
      lines.push_back(buf);
      std::printf("%s\n", buf);
    }
    std::fflush(stdout);
  }
  std::printf("\n=== gpu_bench ===\n");
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
