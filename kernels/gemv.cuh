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
//
// Two fusions for decode steps of up to kGemvFusedMaxRows rows, each bit for bit the kernels it
// replaces (kernels/device_utils.cuh holds the shared arithmetic):
// - An RMS-norm prologue (`norm.residual` set, `x` null): x is the RMS norm of fp32 rows, as
//   LaunchRmsNorm without a delta writes it in the 16-bit type. Every block normalizes the m rows
//   itself (the same reduction order as the norm kernel) into shared memory, then streams w as
//   above; the norm kernel's launch and x's round trip through memory go.
// - A gated epilogue (`gate` set): w is the fused gate/up matrix (n rows, the gate half first), and
//   y[m, n / 2] = act(x . gate_j) * (x . up_j), each product rounded to the 16-bit type first, as
//   the product followed by LaunchSiluMul computes it. A warp owns gate row j with up row j.
#ifndef CONVOY_KERNELS_GEMV_CUH_
#define CONVOY_KERNELS_GEMV_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"
#include "kernels/silu_mul.cuh"

namespace convoy::kernels {

inline constexpr int kGemvMaxRows = 8;
// The most rows of x the fused prologue and epilogue take.
inline constexpr int kGemvFusedMaxRows = 4;

// x as the RMS norm of fp32 rows (kernels/rms_norm.cuh without a delta).
struct GemvNorm {
  const float* residual = nullptr;  // [*, k] fp32, 16-byte aligned; null: no prologue
  // x row r normalizes residual row row_index[r] (device memory); null: row r.
  const int32_t* row_index = nullptr;
  const void* weight = nullptr;  // [k], dtype
  float eps = 1e-6f;
  float weight_offset = 0.0f;
};

// Whether the norm prologue takes m rows of k: the normalized rows live in the block's shared
// memory, m * k 16-bit values of at most 40 KiB (the kernel's own take the rest of the 48 KiB a
// block has without opting in). Llama-3.1-8B's hidden size of 4096 fits 4 rows, 8192 fits 2.
constexpr bool GemvNormFits(int64_t m, int64_t k) {
  return m >= 1 && m <= kGemvFusedMaxRows && k >= 8 && m * k * 2 <= 40 * 1024;
}

struct GemvParams {
  const void* x = nullptr;  // [m, k], dtype, rows contiguous; 16-byte aligned; null with `norm`
  const void* w = nullptr;  // [n, k], dtype, rows contiguous; 16-byte aligned
  void* y = nullptr;        // [m, n], fp32 when y_f32 else dtype, rows contiguous; any alignment
  int64_t m = 0;            // 1 .. kGemvMaxRows
  int64_t n = 0;            // >= 1
  int64_t k = 0;            // a positive multiple of 8
  HalfType dtype = HalfType::kBF16;
  bool y_f32 = false;
  bool accumulate = false;  // y += the product (added in fp32, then rounded) instead of y =
  GemvNorm norm;            // the prologue, when norm.residual is set
  // The gated epilogue when set: n is even, y is [m, n / 2] in dtype, accumulate is off.
  bool gate = false;
  GateActivation activation = GateActivation::kSilu;
};

// cudaErrorInvalidValue when a pointer is null, x or w is not 16-byte aligned, or a size is out of
// range, or a fusion's terms are not met (x and norm.residual both or neither set, the norm with
// rows that do not fit GemvNormFits, the gate with m > kGemvFusedMaxRows, an odd n, y_f32 or
// accumulate); otherwise the launch's error.
cudaError_t LaunchGemv(const GemvParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_GEMV_CUH_
