// Measures the CUDA executor on random-weight Llama shapes made on the device, against limits
// measured in the same run (device-to-device copy bandwidth, cuBLAS bf16 matrix-product rate), and
// prints one table. Usage: gpu_bench [--quick]   (--quick: the 1B shape only, fewer steps)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/gpu/bench_plans.h"
#include "executor/cuda/cuda_executor.h"
#include "kernels/fill_random.cuh"

namespace convoy {
namespace {

using bench::BenchShape;

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

std::unique_ptr<CudaExecutor> MakeExecutor(const ModelConfig& config, const BenchShape& shape,
                                           bool graphs, bool prefill_kernel = true) {
  CudaExecutorOptions options = BenchExecutorOptions(shape, graphs);
  if (!prefill_kernel) options.prefill_kernel_min_tokens = 0;
  auto executor = CudaExecutor::CreateRandom(config, options, 1234);
  if (!executor.ok()) {
    std::fprintf(stderr, "CreateRandom: %s\n", executor.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*executor);
}

void Step(CudaExecutor& executor, const StepPlan& plan, StepResult* result) {
  auto r = executor.Step(plan);
  if (!r.ok()) {
    std::fprintf(stderr, "Step: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  *result = std::move(*r);
}

// Decode tokens/s at `batch` after a prompt per sequence; also the seconds per step.
double DecodeRate(CudaExecutor& executor, const BenchShape& shape, int batch,
                  double* step_seconds) {
  StepResult result;
  Step(executor, DecodePromptPlan(shape, batch), &result);
  int32_t pos = shape.prompt_tokens;
  double start = 0;
  std::vector<int32_t> tokens(batch);
  for (int step = 0; step < shape.warmup_steps + shape.decode_steps; ++step) {
    if (step == shape.warmup_steps) start = Seconds();
    for (int s = 0; s < batch; ++s) tokens[s] = result.rows[s].token;
    Step(executor, DecodeStepPlan(shape, tokens, pos), &result);
    ++pos;
  }
  const double elapsed = Seconds() - start;
  *step_seconds = elapsed / shape.decode_steps;
  return batch * shape.decode_steps / elapsed;
}

double PrefillRate(CudaExecutor& executor, const BenchShape& shape, int reps) {
  const StepPlan plan = PrefillPlan(shape);
  StepResult result;
  Step(executor, plan, &result);
  const double start = Seconds();
  for (int i = 0; i < reps; ++i) Step(executor, plan, &result);
  return static_cast<double>(shape.prefill_tokens) * reps / (Seconds() - start);
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
    // Where a GPU is required (the device run of scripts/gpu-check.sh), its absence is a failure.
    const char* required = std::getenv("CONVOY_REQUIRE_GPU");
    const bool must = required != nullptr && std::strcmp(required, "1") == 0;
    std::printf("%s: no usable GPU, nothing to measure\n", must ? "FAILED" : "skipped");
    return must ? 1 : 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const double copy_bw = CopyBandwidth();
  const double gemm_rate = GemmRate();
  std::vector<std::string> lines;
  char buf[512];
  auto emit = [&] {
    lines.push_back(buf);
    std::printf("%s\n", buf);
    std::fflush(stdout);
  };
  std::snprintf(buf, sizeof buf, "| device | %.100s, %d SMs |", prop.name,
                prop.multiProcessorCount);
  emit();
  std::snprintf(buf, sizeof buf, "| D2D copy bandwidth (read+write) | %.0f GB/s |", copy_bw / 1e9);
  emit();
  std::snprintf(buf, sizeof buf, "| cuBLAS bf16 8192^3 | %.0f TFLOP/s |", gemm_rate / 1e12);
  emit();
  BenchShape shape;
  if (quick) shape.decode_steps = 16;
  for (bool eight_b : quick ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
    const ModelConfig config = bench::BenchLlama(eight_b);
    const char* name = eight_b ? "8B" : "1B";
    auto executor = MakeExecutor(config, shape, true);
    const double weight_bytes = static_cast<double>(executor->weight_bytes());
    for (int batch : shape.decode_batches) {
      double step_s = 0;
      const double rate = DecodeRate(*executor, shape, batch, &step_s);
      if (batch == 1) {
        // Batch-1 bytes per step: every weight (a tied embedding once, as the lm_head; the
        // embedding rows gathered are negligible) plus the K and V read at the mean context.
        const double context = shape.prompt_tokens + shape.warmup_steps + shape.decode_steps / 2.0;
        const double kv = context * 2 * config.num_hidden_layers * config.kv_size() * 2;
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
      emit();
    }
    const double prefill = PrefillRate(*executor, shape, quick ? 2 : 4);
    const double flops =
        PrefillFlops(config, shape.prefill_tokens) * prefill / shape.prefill_tokens;
    std::snprintf(buf, sizeof buf,
                  "| %s prefill %d | %.0f tok/s, %.0f TFLOP/s = %.0f%% of cuBLAS (target >=60%%) |",
                  name, shape.prefill_tokens, prefill, flops / 1e12, 100.0 * flops / gemm_rate);
    emit();
    if (!eight_b) {
      // The same prefill with every query through the decode attention kernel.
      auto decode_attention = MakeExecutor(config, shape, true, /*prefill_kernel=*/false);
      const double old_rate = PrefillRate(*decode_attention, shape, quick ? 2 : 4);
      decode_attention.reset();
      std::snprintf(buf, sizeof buf,
                    "| 1B prefill %d, attention by the decode kernel | %.0f tok/s: the prefill "
                    "kernel is %.2fx faster |",
                    shape.prefill_tokens, old_rate, prefill / old_rate);
      emit();
      // Off and on, twice each, interleaved: the spread between the two runs of one is the noise.
      auto no_graphs = MakeExecutor(config, shape, false);
      double off_s[2] = {0, 0}, on_s[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        DecodeRate(*no_graphs, shape, 1, &off_s[i]);
        DecodeRate(*executor, shape, 1, &on_s[i]);
      }
      const double off = std::min(off_s[0], off_s[1]), on = std::min(on_s[0], on_s[1]);
      std::snprintf(buf, sizeof buf,
                    "| 1B b=1 CUDA graphs | off %.3f/%.3f ms, on %.3f/%.3f ms: %.2fx (target "
                    ">=1.25x) |",
                    off_s[0] * 1e3, off_s[1] * 1e3, on_s[0] * 1e3, on_s[1] * 1e3, off / on);
      emit();
    }
  }
  std::printf("\n=== gpu_bench ===\n");
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
