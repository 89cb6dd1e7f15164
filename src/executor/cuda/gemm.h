// Matrix products through cuBLAS: 16-bit inputs, fp32 accumulation. Capturable into CUDA graphs
// (the workspace is fixed, so cuBLAS allocates nothing while a step runs).
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
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(cudaStream_t stream);
  ~Gemm();

  // y[m, n] = x[m, k] . w[n, k]^T (+ y when accumulate), row-major. x and w are `dtype`; y is
  // fp32 when y_f32, else `dtype`.
  absl::Status Linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                      kernels::HalfType dtype, bool y_f32, bool accumulate = false);

 private:
  Gemm() = default;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_GEMM_H_
