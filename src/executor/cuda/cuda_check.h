// Turning CUDA and cuBLAS error codes into absl::Status (INTERNAL, naming the call and the place).
#ifndef CONVOY_EXECUTOR_CUDA_CUDA_CHECK_H_
#define CONVOY_EXECUTOR_CUDA_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace convoy::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("CUDA error in %s (%s:%d): %s (%s)", what, file, line,
                                             cudaGetErrorString(err), cudaGetErrorName(err)));
}

inline absl::Status CublasStatus(cublasStatus_t err, const char* what, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("cuBLAS error in %s (%s:%d): %s", what, file, line,
                                             cublasGetStatusString(err)));
}

}  // namespace convoy::cuda

#define CUDA_RETURN_IF_ERROR(expr) \
  RETURN_IF_ERROR(::convoy::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__))
#define CUBLAS_RETURN_IF_ERROR(expr) \
  RETURN_IF_ERROR(::convoy::cuda::CublasStatus((expr), #expr, __FILE__, __LINE__))

#endif  // CONVOY_EXECUTOR_CUDA_CUDA_CHECK_H_
