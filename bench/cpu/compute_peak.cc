#include "compute_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "common/simd.h"  // the AVX-512 intrinsics, and HorizontalSum

#if !defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace convoy::bench {
namespace {

// Chains per thread: enough to cover the instruction's latency on two issue ports, few enough
// that they and the operands stay in the 32 vector registers.
constexpr int kChains = 16;
constexpr long kIterations = 4'000'000;

#if defined(__AVX512F__)
// kChains sums, each advanced by `step` kIterations times.
template <typename Step>
float Chains512(Step step) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_setzero_ps();
  for (long it = 0; it < kIterations; ++it) {
    for (int i = 0; i < kChains; ++i) acc[i] = step(acc[i]);
    // Keeps every chain in a register and each step of it in the loop.
    for (int i = 0; i < kChains; ++i) asm volatile("" : "+v"(acc[i]));
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return convoy::HorizontalSum(sum);
}
#endif

#if defined(__AVX512BF16__)
constexpr const char* kInstruction = "vdpbf16ps";
constexpr double kFlopsPerInstruction = 64;  // 16 lanes x 2 products x multiply and add

float Chains() {
  // Small operands (bf16 1.0 and 2^-30 in each half): the sums stay finite and normal.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x30803080);
  return Chains512([&](__m512 acc) { return _mm512_dpbf16_ps(acc, a, b); });
}
#elif defined(__AVX512F__)
constexpr const char* kInstruction = "vfmadd (fp32, AVX-512)";
constexpr double kFlopsPerInstruction = 32;

float Chains() {
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-9f);
  return Chains512([&](__m512 acc) { return _mm512_fmadd_ps(a, b, acc); });
}
#elif defined(__FMA__)
constexpr const char* kInstruction = "vfmadd (fp32, AVX2)";
constexpr double kFlopsPerInstruction = 16;

float Chains() {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_setzero_ps();
  const __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-9f);
  for (long it = 0; it < kIterations; ++it) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
    for (int i = 0; i < kChains; ++i) asm volatile("" : "+x"(acc[i]));
  }
  float lanes[8], sum = 0.0f;
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float x : lanes) sum += x;
  }
  return sum;
}
#else
constexpr const char* kInstruction = "scalar fp32 multiply and add";
constexpr double kFlopsPerInstruction = 2;

float Chains() {
  volatile float a_source = 0.999f, b_source = 1e-9f;
  const float a = a_source, b = b_source;
  float acc[kChains] = {};
  for (long it = 0; it < kIterations; ++it) {
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * a + b;
  }
  float sum = 0.0f;
  for (float x : acc) sum += x;
  return sum;
}
#endif

}  // namespace

ComputePeak MeasureComputePeak(int repeats) {
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r <= repeats; ++r) {
    int threads = 1;
    const auto t0 = std::chrono::steady_clock::now();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
#pragma omp single
      threads = omp_get_num_threads();
      total += Chains();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    const double flops =
        static_cast<double>(threads) * kIterations * kChains * kFlopsPerInstruction;
    if (r > 0) best = std::max(best, flops / s);
  }
  return {best, kInstruction};
}

}  // namespace convoy::bench
