#include "memory_bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/simd.h"

namespace convoy::bench {

double MeasureStreamingReadBandwidth(int64_t bytes, int repeats) {
  const int64_t n = bytes / 64 * 16;  // floats, whole cache lines
  float* data = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>((i * 2654435761u) % 1000) + 1.0f;
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
#if defined(__AVX512F__)
      __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; i += 32) {
        acc0 = _mm512_add_ps(acc0, _mm512_load_ps(data + i));
        acc1 = _mm512_add_ps(acc1, _mm512_load_ps(data + i + 16));
      }
      total += convoy::HorizontalSum(_mm512_add_ps(acc0, acc1));
#else
      // Eight independent sums, so that the additions keep up with the loads.
      float acc[8] = {};
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += data[i + k];
      }
      for (float a : acc) total += a;
#endif
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    if (r > 0) best = std::max(best, static_cast<double>(n) * sizeof(float) / s);
  }
  std::free(data);
  return best;
}

}  // namespace convoy::bench
