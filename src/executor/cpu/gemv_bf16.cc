#include "executor/cpu/gemv_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/x86_intrinsics.h"

// The kernel is compiled for AVX-512 BF16 whatever the build's -march, and only called after
// Bf16GemvAvailable() said the CPU has it.
#define CONVOY_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace convoy {
namespace {

// Each output block of 64 splits into four units of 16 outputs (one vector of accumulators); the
// threads share the units evenly, so a layer of 576 outputs keeps two threads equally busy.
constexpr int64_t kUnit = 16;
constexpr int64_t kUnitsPerBlock = kBf16GemvOutputBlock / kUnit;
// Below this many weights a product runs on the calling thread: waking the team costs more.
constexpr int64_t kMinParallelWeights = int64_t{1} << 16;

// Units [q0, q0 + Q) of one output block, for M rows. `w` points at the block, `x[r]` at row r's
// bf16 inputs, `y[r]` at row r's output for the block's first output; `valid` outputs of the
// block (counted from its start) exist in y.
template <int M, int Q>
CONVOY_TARGET_AVX512BF16 void BlockProduct(const uint16_t* w, int64_t pairs, int q0,
                                           const uint16_t* const* x, float* const* y,
                                           int64_t valid) {
  __m512 acc[M][Q];
  for (int r = 0; r < M; ++r)
    for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_setzero_ps();
  const uint16_t* wp = w + q0 * 2 * kUnit;
  for (int64_t p = 0; p < pairs; ++p, wp += 2 * kBf16GemvOutputBlock) {
    __m512bh wv[Q];
    for (int q = 0; q < Q; ++q)
      wv[q] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp + q * 2 * kUnit));
    for (int r = 0; r < M; ++r) {
      int32_t pair;
      std::memcpy(&pair, x[r] + 2 * p, sizeof pair);
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], wv[q], xv);
    }
  }
  for (int q = 0; q < Q; ++q) {
    const int64_t first = (q0 + q) * kUnit;
    const int64_t count = std::clamp<int64_t>(valid - first, 0, kUnit);
    const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << count) - 1);
    for (int r = 0; r < M; ++r) _mm512_mask_storeu_ps(y[r] + first, mask, acc[r][q]);
  }
}

using BlockFn = void (*)(const uint16_t*, int64_t, int, const uint16_t* const*, float* const*,
                         int64_t);

template <int M>
BlockFn ForUnits(int q) {
  switch (q) {
    case 1:
      return BlockProduct<M, 1>;
    case 2:
      return BlockProduct<M, 2>;
    case 3:
      return BlockProduct<M, 3>;
    default:
      return BlockProduct<M, 4>;
  }
}

BlockFn For(int64_t m, int q) {
  switch (m) {
    case 1:
      return ForUnits<1>(q);
    case 2:
      return ForUnits<2>(q);
    case 3:
      return ForUnits<3>(q);
    default:
      return ForUnits<4>(q);
  }
}

// Units [begin, end) of the whole product, for every tile of rows.
void Units(const uint16_t* weights, int64_t k_padded, int64_t n, const uint16_t* x, int64_t m,
           float* y, int64_t begin, int64_t end) {
  const uint16_t* rows[kBf16GemvMaxRows];
  float* out[kBf16GemvMaxRows];
  for (int64_t u = begin; u < end;) {
    const int64_t block = u / kUnitsPerBlock;
    const int q0 = static_cast<int>(u % kUnitsPerBlock);
    const int q = static_cast<int>(std::min<int64_t>(kUnitsPerBlock - q0, end - u));
    const int64_t n0 = block * kBf16GemvOutputBlock;
    for (int64_t r0 = 0; r0 < m; r0 += kBf16GemvMaxRows) {
      const int64_t tile = std::min(kBf16GemvMaxRows, m - r0);
      for (int64_t r = 0; r < tile; ++r) {
        rows[r] = x + (r0 + r) * k_padded;
        out[r] = y + (r0 + r) * n + n0;
      }
      For(tile, q)(weights + block * k_padded * kBf16GemvOutputBlock, k_padded / 2, q0, rows, out,
                   n - n0);
    }
    u += q;
  }
}

}  // namespace

bool Bf16GemvAvailable() {
  static const bool available =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return available;
}

void Bf16Gemv(const uint16_t* weights, int64_t k_padded, int64_t n, const uint16_t* x, int64_t m,
              float* y) {
  const int64_t units = (n + kUnit - 1) / kUnit;
#pragma omp parallel if (k_padded * n >= kMinParallelWeights)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    Units(weights, k_padded, n, x, m, y, units * t / threads, units * (t + 1) / threads);
  }
}

}  // namespace convoy
