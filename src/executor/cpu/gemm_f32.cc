#include "executor/cpu/gemm_f32.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

// The kernel is compiled for AVX2 + FMA whatever the build's -march, and only called after
// Avx2Available() said the CPU has them.
#define CONVOY_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))

namespace convoy {
namespace {

constexpr int64_t kPanel = PackedF32Matrix::kPanel;
// Rows of one tile at most: 6 rows x 2 vectors of 8 outputs are 12 of the 16 ymm registers.
constexpr int kMaxTileRows = 6;
// Panels a thread runs every row tile against before it moves on (their weights stay in cache).
constexpr int64_t kPanelGroup = 4;
// Inputs per pass over a row tile when there are several tiles: a tile's rows (6 KiB) and a
// panel's weights (16 KiB) for them stay in L1 while the tile runs. The sums are carried from one
// pass to the next through y, in fp32, so each output's chain is the same as in one pass.
constexpr int64_t kInputBlock = 256;
// Below this many multiply-adds a product runs on the calling thread: waking the team costs more.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

// Panels one tile of `rows` rows covers: about 12 accumulators, so that one row (a decode step)
// still has eight independent chains in flight.
constexpr int PanelsPerTile(int rows) { return rows == 1 ? 4 : rows == 2 ? 3 : rows == 3 ? 2 : 1; }

// R rows x P panels: y[r * ldy + j] for j < min(valid, P * kPanel), from inputs [0, k) of the
// panels at `w` (`stride` floats apart) and of the rows at x (ldx apart). The sums start from 0,
// or with `carry` from the y they continue.
template <int R, int P>
CONVOY_TARGET_AVX2_FMA void TileAvx2(const float* w, int64_t stride, int64_t k, const float* x,
                                     int64_t ldx, float* y, int64_t ldy, int64_t valid,
                                     bool carry) {
  __m256 acc[R][P][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
  }
  if (carry) {
    for (int p = 0; p < P; ++p) {
      for (int h = 0; h < 2; ++h) {
        const int64_t first = p * kPanel + h * 8;
        if (first >= valid) break;
        for (int r = 0; r < R; ++r) {
          const float* src = y + r * ldy + first;
          if (valid - first >= 8) {
            acc[r][p][h] = _mm256_loadu_ps(src);
          } else {
            alignas(32) float lanes[8] = {};
            std::memcpy(lanes, src, sizeof(float) * (valid - first));
            acc[r][p][h] = _mm256_load_ps(lanes);
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    const float* wi = w + i * kPanel;
    __m256 wv[P][2];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      wv[p][0] = _mm256_load_ps(wi + p * stride);
      wv[p][1] = _mm256_load_ps(wi + p * stride + 8);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + r * ldx + i);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        acc[r][p][0] = _mm256_fmadd_ps(xv, wv[p][0], acc[r][p][0]);
        acc[r][p][1] = _mm256_fmadd_ps(xv, wv[p][1], acc[r][p][1]);
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    for (int h = 0; h < 2; ++h) {
      const int64_t first = p * kPanel + h * 8;
      if (first >= valid) break;
      for (int r = 0; r < R; ++r) {
        float* dst = y + r * ldy + first;
        if (valid - first >= 8) {
          _mm256_storeu_ps(dst, acc[r][p][h]);
        } else {
          alignas(32) float lanes[8];
          _mm256_store_ps(lanes, acc[r][p][h]);
          std::memcpy(dst, lanes, sizeof(float) * (valid - first));
        }
      }
    }
  }
}

// The same outputs as TileAvx2, one at a time with std::fma.
void TilePortable(int rows, int panels, const float* w, int64_t k, const float* x, int64_t ldx,
                  float* y, int64_t ldy, int64_t valid) {
  const int64_t outputs = std::min<int64_t>(valid, panels * kPanel);
  for (int r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < outputs; ++j) {
      const float* wj = w + (j / kPanel) * k * kPanel + j % kPanel;
      const float* xr = x + r * ldx;
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(xr[i], wj[i * kPanel], acc);
      y[r * ldy + j] = acc;
    }
  }
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                        int64_t, bool);

TileFn Avx2Tile(int rows, int panels) {
  switch (rows * 8 + panels) {
    case 1 * 8 + 1:
      return TileAvx2<1, 1>;
    case 1 * 8 + 2:
      return TileAvx2<1, 2>;
    case 1 * 8 + 3:
      return TileAvx2<1, 3>;
    case 1 * 8 + 4:
      return TileAvx2<1, 4>;
    case 2 * 8 + 1:
      return TileAvx2<2, 1>;
    case 2 * 8 + 2:
      return TileAvx2<2, 2>;
    case 2 * 8 + 3:
      return TileAvx2<2, 3>;
    case 3 * 8 + 1:
      return TileAvx2<3, 1>;
    case 3 * 8 + 2:
      return TileAvx2<3, 2>;
    case 4 * 8 + 1:
      return TileAvx2<4, 1>;
    case 5 * 8 + 1:
      return TileAvx2<5, 1>;
    default:
      return TileAvx2<6, 1>;
  }
}

}  // namespace

bool PackedF32Matrix::Avx2Available() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

PackedF32Matrix::PackedF32Matrix(const float* w, int64_t n, int64_t k)
    : n_(n), k_(k), panels_((n + kPanel - 1) / kPanel) {
  const size_t bytes = sizeof(float) * panels_ * k_ * kPanel;
  packed_.reset(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (packed_ == nullptr) throw std::bad_alloc();
  float* out = packed_.get();
  for (int64_t p = 0; p < panels_; ++p) {
    for (int64_t i = 0; i < k_; ++i) {
      for (int64_t lane = 0; lane < kPanel; ++lane, ++out) {
        const int64_t j = p * kPanel + lane;
        *out = j < n_ ? w[j * k_ + i] : 0.0f;
      }
    }
  }
}

void PackedF32Matrix::Product(const float* x, int64_t m, float* y, Path path) const {
  if (m <= 0) return;
  const bool avx2 = path == Path::kBest && Avx2Available();
#pragma omp parallel if (m * k_ * n_ >= kMinParallelWork)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t begin = panels_ * t / threads;
    const int64_t end = panels_ * (t + 1) / threads;
    // One row tile reads each weight once: no pass over blocks of inputs.
    const int64_t input_block = avx2 && m > kMaxTileRows ? kInputBlock : k_;
    for (int64_t g = begin; g < end; g += kPanelGroup) {
      const int64_t group_end = std::min(g + kPanelGroup, end);
      for (int64_t i0 = 0; i0 < k_; i0 += input_block) {
        const int64_t inputs = std::min(input_block, k_ - i0);
        for (int64_t r0 = 0; r0 < m; r0 += kMaxTileRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kMaxTileRows, m - r0));
          for (int64_t p = g; p < group_end;) {
            const int panels =
                static_cast<int>(std::min<int64_t>(PanelsPerTile(rows), group_end - p));
            const float* w = packed_.get() + p * k_ * kPanel;
            float* out = y + r0 * n_ + p * kPanel;
            const int64_t valid = n_ - p * kPanel;
            if (avx2) {
              Avx2Tile(rows, panels)(w + i0 * kPanel, k_ * kPanel, inputs, x + r0 * k_ + i0, k_,
                                     out, n_, valid, i0 > 0);
            } else {
              TilePortable(rows, panels, w, k_, x + r0 * k_, k_, out, n_, valid);
            }
            p += panels;
          }
        }
      }
    }
  }
}

}  // namespace convoy
