// The bf16 matrix product of the CPU executor's decode steps, and of every step of a
// batch-invariant executor: y[m, n] = x[m, k] W^T over weights already in oneDNN's blocked bf16
// layout (so that the same single copy of the weights serves oneDNN's products for larger m).
//
// A decode step reads every weight once per step and multiplies it by one to a few rows, so its
// speed is the speed at which the weights stream from memory. This kernel reads them in the order
// they lie in memory, 256 bytes at a time, with AVX-512 BF16 dot products (two bf16 products
// accumulated into fp32 per lane), and splits the outputs evenly over the OpenMP threads. Rows go
// in tiles of up to kBf16GemvMaxRows, all of them against one thread's outputs while those weights
// are in cache. Each output is one chain of dot products over the pairs of inputs in order,
// whatever m and the tiling, so a row's results do not depend on the other rows.
#ifndef CONVOY_EXECUTOR_CPU_GEMV_BF16_H_
#define CONVOY_EXECUTOR_CPU_GEMV_BF16_H_

#include <cstdint>

namespace convoy {

// The rows of one tile; a product of at most this many rows is what the executor sends here when
// it is not batch-invariant (beyond it oneDNN's product is about as fast).
inline constexpr int64_t kBf16GemvMaxRows = 4;

// The layout the kernel reads (oneDNN's "BA16a64b2a" for a [k, n] bf16 weight): outputs in blocks
// of 64; each block holds, for every pair of input features (2p, 2p + 1), the 64 outputs' two
// weights side by side: W[n0 + j][2p + i] at block(n0) + p * 128 + 2 * j + i. Blocks follow each
// other, each k_padded * 64 values long; k is padded to a multiple of 32 and n to one of 64, with
// zeros.
inline constexpr int64_t kBf16GemvOutputBlock = 64;
inline constexpr int64_t kBf16GemvInputBlock = 32;

// Whether this CPU has the AVX-512 BF16 instructions the kernel uses.
bool Bf16GemvAvailable();

// y[r * n + j] = sum_i x[r * k_padded + i] * W[j][i] for r < m, j < n, over
// `weights` in the layout above. x holds bf16 values, each row k_padded long and zero beyond k.
// Requires Bf16GemvAvailable().
void Bf16Gemv(const uint16_t* weights, int64_t k_padded, int64_t n, const uint16_t* x, int64_t m,
              float* y);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_GEMV_BF16_H_
