// Small-batch matrix product for decode: y[m, n] (+)= x[m, k] . w[n, k]^T for 1 <= m <= 8, the
// semantics of cuda::Gemm::Linear (row-major, 16-bit x and w, fp32 accumulation, y in the 16-bit
// type or fp32). At these batch sizes the product is bound by reading w once, so the kernel is
// built for bandwidth rather than for arithmetic:
//
// - A block is 8 warps. Each warp owns R output rows (R = 1 for m <= 2, 2 for m <= 4, else 4: more
//   rows share each load of x when m is large) and one of `k_slices` interleaved slices of k.
//   Lane l of slice s reads the 16-byte chunks c = 32 s + l + j * 32 k_slices of its rows, so the
//   warps of one row group together read contiguous runs of w, and every load is 16 B, coalesced.
// - Each loop iteration issues 4 independent 16-byte loads of w per lane (U chunks of R rows, U R =
//   4) before the first multiply; w is read with ld.global.nc and no L1 allocation (it is read
//   once per step), x through the read-only cache (it is tiny and shared by every warp).
// - fp32 accumulators (m R per lane) stay in registers (m is a template parameter); warp shuffles
//   then shared memory sum the lanes and the k slices in a fixed order (deterministic).
// - k_slices (1, 2, 4 or 8) grows while the grid has too few warps to keep enough loads in flight
//   (n small, e.g. 512 or 2048 rows) and each lane still has a full iteration of work.
#ifndef CONVOY_KERNELS_GEMV_CUH_
#define CONVOY_KERNELS_GEMV_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

inline constexpr int kGemvMaxRows = 8;

struct GemvParams {
  const void* x = nullptr;  // [m, k], dtype, rows contiguous; 16-byte aligned
  const void* w = nullptr;  // [n, k], dtype, rows contiguous; 16-byte aligned
  void* y = nullptr;        // [m, n], fp32 when y_f32 else dtype, rows contiguous; any alignment
  int64_t m = 0;            // 1 .. kGemvMaxRows
  int64_t n = 0;            // >= 1
  int64_t k = 0;            // a positive multiple of 8
  HalfType dtype = HalfType::kBF16;
  bool y_f32 = false;
  bool accumulate = false;  // y += the product (added in fp32, then rounded) instead of y =
};

// cudaErrorInvalidValue when a pointer is null, x or w is not 16-byte aligned, or a size is out of
// range; otherwise the launch's error.
cudaError_t LaunchGemv(const GemvParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_GEMV_CUH_
