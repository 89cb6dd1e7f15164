// Matrix products: 16-bit inputs, fp32 accumulation. Products of up to `gemv_max_rows` rows of x
// (decode) take the bandwidth-bound GEMV kernel of kernels/gemv.cuh, the rest cuBLAS. Capturable
// into CUDA graphs (the workspace is fixed, so cuBLAS allocates nothing while a step runs).
#ifndef CONVOY_EXECUTOR_CUDA_GEMM_H_
#define CONVOY_EXECUTOR_CUDA_GEMM_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "executor/cuda/device_buffer.h"
#include "kernels/half_type.cuh"

namespace convoy::cuda {

class Gemm {
 public:
  // REQUIRES: 0 <= gemv_max_rows <= kernels::kGemvMaxRows (0: always cuBLAS), else
  // INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(cudaStream_t stream, int gemv_max_rows = 0);
  ~Gemm();

  // y[m, n] = x[m, k] . w[n, k]^T (+ y when accumulate), row-major. x and w are `dtype`; y is
  // fp32 when y_f32, else `dtype`. The GEMV kernel runs when m <= gemv_max_rows, k % 8 == 0 and x
  // and w are 16-byte aligned; cuBLAS otherwise.
  absl::Status Linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                      kernels::HalfType dtype, bool y_f32, bool accumulate = false);
  // The same product, always through cuBLAS (its warm-up, comparisons).
  absl::Status LinearCublas(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                            kernels::HalfType dtype, bool y_f32, bool accumulate = false);

 private:
  Gemm() = default;
  cudaStream_t stream_ = nullptr;
  int gemv_max_rows_ = 0;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_GEMM_H_
