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
#include "executor/cuda/gemm.h"
#include "kernels/fill_random.cuh"
#include "kernels/gemv.cuh"

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

// What an executor of the comparisons leaves out; the default is the shipped executor.
struct Variant {
  bool graphs = true;
  bool prefill_tensor_cores = true;
  bool gemv = true;
  bool dependent_launch = true;
  bool fuse_small_batch = true;
};

std::unique_ptr<CudaExecutor> MakeExecutor(const ModelConfig& config, const BenchShape& shape,
                                           const Variant& variant = {}) {
  CudaExecutorOptions options = BenchExecutorOptions(shape, variant.graphs);
  options.prefill_tensor_cores = variant.prefill_tensor_cores;
  if (!variant.gemv) options.gemv_max_rows = 0;
  options.dependent_launch = variant.dependent_launch;
  options.fuse_small_batch = variant.fuse_small_batch;
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

// One layer's four products (qkv, o, gate_up, down, as the executor calls them) at m rows of
// activations, through the GEMV kernel and through cuBLAS: microseconds per layer for each m, and
// the GEMV's weight bytes over its time at m = 1 against the copy bandwidth. The weights (over
// 100 MB) do not fit the L2, so every repetition streams them from memory.
std::string ProductSweep(const ModelConfig& c, const char* name, double copy_bw) {
  struct Product {
    int64_t n, k;
    bool y_f32;
  };
  const int64_t h = c.hidden_size, in = c.intermediate_size;
  const Product products[] = {{c.q_size() + 2 * c.kv_size(), h, false},
                              {h, c.q_size(), true},
                              {2 * in, h, false},
                              {h, in, true}};
  std::vector<void*> weights;
  int64_t weight_bytes = 0, max_n = 0, max_k = 0;
  for (const Product& p : products) {
    void* w = nullptr;
    BENCH_CHECK(cudaMalloc(&w, p.n * p.k * 2) == cudaSuccess);
    kernels::FillRandomParams fill;
    fill.data = w;
    fill.num_elements = p.n * p.k;
    fill.seed = weights.size() + 7;
    BENCH_CHECK(kernels::LaunchFillRandom(fill, nullptr) == cudaSuccess);
    weights.push_back(w);
    weight_bytes += p.n * p.k * 2;
    max_n = std::max(max_n, p.n);
    max_k = std::max(max_k, p.k);
  }
  void *x = nullptr, *y = nullptr;
  constexpr int kMaxM = 64;
  BENCH_CHECK(cudaMalloc(&x, kMaxM * max_k * 2) == cudaSuccess &&
              cudaMalloc(&y, kMaxM * max_n * 4) == cudaSuccess);
  kernels::FillRandomParams fill;
  fill.data = x;
  fill.num_elements = kMaxM * max_k;
  BENCH_CHECK(kernels::LaunchFillRandom(fill, nullptr) == cudaSuccess);
  BENCH_CHECK(cudaMemset(y, 0, kMaxM * max_n * 4) == cudaSuccess);
  auto gemv = cuda::Gemm::Create(nullptr, kernels::kGemvMaxRows);
  auto cublas = cuda::Gemm::Create(nullptr, 0);
  BENCH_CHECK(gemv.ok() && cublas.ok());
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // All four products, or only product `only`.
  auto layer_us = [&](cuda::Gemm& gemm, int m, int only = -1) {
    auto layer = [&] {
      for (size_t i = 0; i < weights.size(); ++i) {
        if (only >= 0 && static_cast<int>(i) != only) continue;
        const Product& p = products[i];
        BENCH_CHECK(
            gemm.Linear(x, weights[i], y, m, p.n, p.k, kernels::HalfType::kBF16, p.y_f32, p.y_f32)
                .ok());
      }
    };
    for (int i = 0; i < 3; ++i) layer();
    const int reps = 20;
    cudaEventRecord(start);
    for (int i = 0; i < reps; ++i) layer();
    cudaEventRecord(stop);
    BENCH_CHECK(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return 1e3 * ms / reps;
  };
  std::string gemv_us, cublas_us;
  double gemv_m1 = 0;
  for (int m : {1, 2, 3, 4, 6, 8}) {
    const double g = layer_us(**gemv, m), b = layer_us(**cublas, m);
    if (m == 1) gemv_m1 = g;
    char part[32];
    std::snprintf(part, sizeof part, "%s%.0f", gemv_us.empty() ? "" : "/", g);
    gemv_us.append(part);
    std::snprintf(part, sizeof part, "%s%.0f", cublas_us.empty() ? "" : "/", b);
    cublas_us.append(part);
  }
  // Each product alone at m = 1 (the GEMV), and the layer at batch 64 (cuBLAS).
  std::string each;
  const char* names[] = {"qkv", "o", "gate_up", "down"};
  for (int i = 0; i < 4; ++i) {
    const double us = layer_us(**gemv, 1, i);
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.1f us %.0f GB/s", each.empty() ? "" : ", ", names[i],
                  us, products[i].n * products[i].k * 2 / (us * 1e-6) / 1e9);
    each.append(part);
  }
  const double b64 = layer_us(**cublas, 64);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* w : weights) cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "| %s one layer's products, us at m=1/2/3/4/6/8 | GEMV %s; cuBLAS %s; GEMV m=1 "
                "%.0f GB/s = %.0f%% of copy bw (%s); cuBLAS m=64 %.0f us |",
                name, gemv_us.c_str(), cublas_us.c_str(), weight_bytes / (gemv_m1 * 1e-6) / 1e9,
                100.0 * weight_bytes / (gemv_m1 * 1e-6) / copy_bw, each.c_str(), b64);
  return buf;
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
    std::snprintf(buf, sizeof buf, "%s", ProductSweep(config, name, copy_bw).c_str());
    emit();
    auto executor = MakeExecutor(config, shape);
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
                      100.0 * bytes / step_s / copy_bw, eight_b ? ">=80%" : ">=60%");
      } else {
        std::snprintf(buf, sizeof buf, "| %s decode b=%d | %.0f tok/s, %.3f ms/step |", name, batch,
                      rate, step_s * 1e3);
      }
      emit();
    }
    // Batch-1 decode with one part of the executor left out against the whole (twice each,
    // interleaved: the spread of one's two runs is the noise), at batch 1 and 8.
    auto without = [&](const char* what, const Variant& variant) {
      auto other = MakeExecutor(config, shape, variant);
      for (int batch : {1, 8}) {
        double off_s[2] = {0, 0}, on_s[2] = {0, 0};
        for (int i = 0; i < 2; ++i) {
          DecodeRate(*other, shape, batch, &off_s[i]);
          DecodeRate(*executor, shape, batch, &on_s[i]);
        }
        const double off = std::min(off_s[0], off_s[1]), on = std::min(on_s[0], on_s[1]);
        std::snprintf(buf, sizeof buf,
                      "| %s b=%d %s | with %.3f/%.3f ms, without %.3f/%.3f ms: %.2fx |", name,
                      batch, what, on_s[0] * 1e3, on_s[1] * 1e3, off_s[0] * 1e3, off_s[1] * 1e3,
                      off / on);
        emit();
      }
    };
    Variant cublas_only;
    cublas_only.gemv = false;
    without("GEMV kernel (without: cuBLAS)", cublas_only);
    Variant unfused;
    unfused.fuse_small_batch = false;
    without("GEMV fusions (norms, residual adds, gate)", unfused);
    Variant plain_launch;
    plain_launch.dependent_launch = false;
    without("dependent launch", plain_launch);
    const double prefill = PrefillRate(*executor, shape, quick ? 2 : 4);
    const double flops =
        PrefillFlops(config, shape.prefill_tokens) * prefill / shape.prefill_tokens;
    std::snprintf(buf, sizeof buf,
                  "| %s prefill %d | %.0f tok/s, %.0f TFLOP/s = %.0f%% of cuBLAS (target %s) |",
                  name, shape.prefill_tokens, prefill, flops / 1e12, 100.0 * flops / gemm_rate,
                  eight_b ? ">=60%" : ">=45%");
    emit();
    {
      // The same prefill with the attention's products on CUDA cores, and the tensor-core
      // executor again after it: the spread of the two tensor-core runs is the noise.
      Variant cuda_cores_variant;
      cuda_cores_variant.prefill_tensor_cores = false;
      auto cuda_cores = MakeExecutor(config, shape, cuda_cores_variant);
      const double simt = PrefillRate(*cuda_cores, shape, quick ? 2 : 4);
      cuda_cores.reset();
      const double again = PrefillRate(*executor, shape, quick ? 2 : 4);
      std::snprintf(buf, sizeof buf,
                    "| %s prefill %d, attention on CUDA cores | %.0f tok/s; tensor cores %.0f "
                    "then %.0f tok/s: %.2fx |",
                    name, shape.prefill_tokens, simt, prefill, again,
                    std::min(prefill, again) / simt);
      emit();
    }
    if (!eight_b) {
      // Off and on, twice each, interleaved: the spread between the two runs of one is the noise.
      Variant no_graphs_variant;
      no_graphs_variant.graphs = false;
      auto no_graphs = MakeExecutor(config, shape, no_graphs_variant);
      double off_s[2] = {0, 0}, on_s[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        DecodeRate(*no_graphs, shape, 1, &off_s[i]);
        DecodeRate(*executor, shape, 1, &on_s[i]);
      }
      const double off = std::min(off_s[0], off_s[1]), on = std::min(on_s[0], on_s[1]);
      std::snprintf(buf, sizeof buf,
                    "| 1B b=1 CUDA graphs | off %.3f/%.3f ms, on %.3f/%.3f ms: %.2fx (target "
                    ">=1.3x) |",
                    off_s[0] * 1e3, off_s[1] * 1e3, on_s[0] * 1e3, on_s[1] * 1e3, off / on);
      emit();
      no_graphs.reset();
    }
  }
  std::printf("\n=== gpu_bench ===\n");
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
