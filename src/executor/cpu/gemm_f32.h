// The CPU executor's batch-invariant fp32 matrix product: y[m, n] = x[m, k] W^T over weights
// packed once, at construction, into panels of 16 outputs ([n / 16][k][16], the last panel padded
// with zeros).
//
// Contract: every output is one chain of fused multiply-adds over k in order,
//   acc = 0; for i = 0 .. k - 1: acc = fma(x[r][i], W[j][i], acc); y[r][j] = acc,
// each step rounded to fp32. So y[r][j] depends on row r of x and on W only: not on m, on the
// other rows, on the number of threads, nor on whether the AVX2 + FMA kernel or the portable one
// (std::fma, for CPUs without them) runs; the bits are the same.
//
// Threads share the panels (never k). Row tiles of up to six rows run against the same panels
// while they are in cache, a block of inputs at a time (a sum carried from block to block through
// y in fp32 is the same chain); a tile of one row (a decode step) covers four panels at a time, so
// the multiply-adds of different outputs hide each other's latency.
#ifndef CONVOY_EXECUTOR_CPU_GEMM_F32_H_
#define CONVOY_EXECUTOR_CPU_GEMM_F32_H_

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace convoy {

class PackedF32Matrix {
 public:
  // Outputs per panel.
  static constexpr int64_t kPanel = 16;

  // Which code computes the product; the results are the same bits either way.
  enum class Path {
    kBest,      // AVX2 + FMA where the CPU has them, else portable
    kPortable,  // std::fma, one output at a time
  };

  // Packs `w`: n rows of k floats (the Hugging Face [out, in] layout). Requires n, k > 0.
  PackedF32Matrix(const float* w, int64_t n, int64_t k);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

  // y[r * n + j] = sum over i of x[r * k + i] * W[j][i], for r < m, as the contract above says.
  // Writes nothing beyond y[m * n - 1]. Parallel over the OpenMP threads when the weights are
  // large enough to pay for waking them.
  void Product(const float* x, int64_t m, float* y, Path path = Path::kBest) const;

  // Whether this CPU runs the AVX2 + FMA kernel.
  static bool Avx2Available();

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };

  int64_t n_;
  int64_t k_;
  int64_t panels_;
  std::unique_ptr<float[], Free> packed_;  // 64-byte aligned
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_GEMM_F32_H_
