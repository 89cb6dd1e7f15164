// Matrix products: 16-bit inputs, fp32 accumulation. Products of up to `gemv_max_rows` rows of x
// (decode) take the bandwidth-bound GEMV kernel of kernels/gemv.cuh, the rest cuBLAS. Weights kept
// in GGUF blocks (LinearQuant) take the quantized GEMV (kernels/quant_gemv.cuh) up to 8 rows of x,
// and beyond that are dequantized to the 16-bit type a panel of rows at a time into a scratch
// buffer that cuBLAS multiplies. Capturable into CUDA graphs (the workspace and the scratch are
// fixed, so nothing is allocated while a step runs).
#ifndef CONVOY_EXECUTOR_CUDA_GEMM_H_
#define CONVOY_EXECUTOR_CUDA_GEMM_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "executor/cuda/device_buffer.h"
#include "kernels/gguf_blocks.cuh"
#include "kernels/half_type.cuh"

namespace convoy::cuda {

class Gemm {
 public:
  // REQUIRES: 0 <= gemv_max_rows <= kernels::kGemvMaxRows (0: always cuBLAS), else
  // INVALID_ARGUMENT. `dequant_scratch_bytes` (0: none) is the panel buffer of LinearQuant's
  // products of many rows; it must hold at least one weight row in the 16-bit type.
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(cudaStream_t stream, int gemv_max_rows = 0,
                                                      int64_t dequant_scratch_bytes = 0);
  ~Gemm();

  // y[m, n] = x[m, k] . w[n, k]^T (+ y when accumulate), row-major. x and w are `dtype`; y is
  // fp32 when y_f32, else `dtype`. The GEMV kernel runs when m <= gemv_max_rows, k % 8 == 0 and x
  // and w are 16-byte aligned; cuBLAS otherwise.
  absl::Status Linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                      kernels::HalfType dtype, bool y_f32, bool accumulate = false);
  // The same product, always through cuBLAS (its warm-up, comparisons).
  absl::Status LinearCublas(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                            kernels::HalfType dtype, bool y_f32, bool accumulate = false);

  // y[i * ldy + j] = sum over c of x[i, c] * W[j, c] (+ y when accumulate) for i < m, j < n, where
  // W is n rows of GGUF blocks of `type` at `w` (kernels/gguf_blocks.cuh; any alignment), x is
  // [m, k] in `dtype` (16-byte aligned) and y fp32 when y_f32, else `dtype`. m <= 8: the
  // quantized GEMV, W's exact values against x (fp32 sums); more: W rounded to `dtype` by panels
  // and cuBLAS. FAILED_PRECONDITION for m > 8 without a scratch buffer that holds a row;
  // INVALID_ARGUMENT for a k the type's blocks do not divide.
  absl::Status LinearQuant(const void* x, const void* w, kernels::GgufBlockType type, void* y,
                           int64_t m, int64_t n, int64_t k, int64_t ldy, kernels::HalfType dtype,
                           bool y_f32, bool accumulate = false);

  // Rows of W the scratch buffer holds as 16-bit values at this k (0 without one).
  int64_t PanelRows(int64_t k) const;

 private:
  Gemm() = default;
  // cuBLAS's product with y's leading dimension ldy.
  absl::Status Cublas(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                      int64_t ldy, kernels::HalfType dtype, bool y_f32, bool accumulate);

  cudaStream_t stream_ = nullptr;
  int gemv_max_rows_ = 0;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer dequant_scratch_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_GEMM_H_
