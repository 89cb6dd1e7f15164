#include "executor/cuda/gemm.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "executor/cuda/cuda_check.h"
#include "kernels/dequantize_gguf.cuh"
#include "kernels/gemv.cuh"
#include "kernels/quant_gemv.cuh"

namespace convoy::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cudaDataType_t CudaType(kernels::HalfType dtype) {
  return dtype == kernels::HalfType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::Create(cudaStream_t stream, int gemv_max_rows,
                                                   int64_t dequant_scratch_bytes) {
  if (gemv_max_rows < 0 || gemv_max_rows > kernels::kGemvMaxRows) {
    return absl::InvalidArgumentError(absl::StrFormat("gemv_max_rows must be in [0, %d], got %d",
                                                      kernels::kGemvMaxRows, gemv_max_rows));
  }
  if (dequant_scratch_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dequant_scratch_bytes must not be negative, got %d", dequant_scratch_bytes));
  }
  std::unique_ptr<Gemm> gemm(new Gemm());
  gemm->stream_ = stream;
  gemm->gemv_max_rows_ = gemv_max_rows;
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&gemm->handle_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(gemm->handle_, stream));
  ASSIGN_OR_RETURN(gemm->workspace_, DeviceBuffer::Allocate(kWorkspaceBytes));
  CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(gemm->handle_, gemm->workspace_.get(), gemm->workspace_.size()));
  CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(gemm->handle_, CUBLAS_DEFAULT_MATH));
  if (dequant_scratch_bytes > 0) {
    ASSIGN_OR_RETURN(gemm->dequant_scratch_, DeviceBuffer::Allocate(dequant_scratch_bytes));
  }
  return gemm;
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status Gemm::Linear(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                          kernels::HalfType dtype, bool y_f32, bool accumulate) {
  if (m <= 0) return absl::OkStatus();
  if (m <= gemv_max_rows_ && n > 0 && k > 0 && k % 8 == 0 && Aligned16(x) && Aligned16(w)) {
    kernels::GemvParams p;
    p.x = x;
    p.w = w;
    p.y = y;
    p.m = m;
    p.n = n;
    p.k = k;
    p.dtype = dtype;
    p.y_f32 = y_f32;
    p.accumulate = accumulate;
    CUDA_RETURN_IF_ERROR(kernels::LaunchGemv(p, stream_));
    return absl::OkStatus();
  }
  return LinearCublas(x, w, y, m, n, k, dtype, y_f32, accumulate);
}

absl::Status Gemm::LinearCublas(const void* x, const void* w, void* y, int64_t m, int64_t n,
                                int64_t k, kernels::HalfType dtype, bool y_f32, bool accumulate) {
  return Cublas(x, w, y, m, n, k, n, dtype, y_f32, accumulate);
}

int64_t Gemm::PanelRows(int64_t k) const {
  return k > 0 ? static_cast<int64_t>(dequant_scratch_.size()) / (k * 2) : 0;
}

absl::Status Gemm::LinearQuant(const void* x, const void* w, kernels::GgufBlockType type, void* y,
                               int64_t m, int64_t n, int64_t k, int64_t ldy,
                               kernels::HalfType dtype, bool y_f32, bool accumulate) {
  if (m <= 0 || n <= 0) return absl::OkStatus();
  if (k <= 0 || k % kernels::GgufBlockElements(type) != 0 || ldy < n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "quantized product: k = %d is not a positive multiple of the type's block of %d, or "
        "ldy = %d < n = %d",
        k, kernels::GgufBlockElements(type), ldy, n));
  }
  if (m <= kernels::kQuantGemvMaxRows) {
    kernels::QuantGemvParams p;
    p.x = x;
    p.w = w;
    p.y = y;
    p.m = m;
    p.n = n;
    p.k = k;
    p.ldy = ldy;
    p.type = type;
    p.dtype = dtype;
    p.y_f32 = y_f32;
    p.accumulate = accumulate;
    CUDA_RETURN_IF_ERROR(kernels::LaunchQuantGemv(p, stream_));
    return absl::OkStatus();
  }
  const int64_t panel = PanelRows(k);
  if (panel < 1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "quantized product of %d rows needs a dequantization scratch of at least %d bytes, have %d",
        m, k * 2, dequant_scratch_.size()));
  }
  const int64_t row_bytes = kernels::GgufRowBytes(type, k);
  const int64_t y_bytes = y_f32 ? 4 : 2;
  for (int64_t first = 0; first < n; first += panel) {
    const int64_t rows = std::min(panel, n - first);
    kernels::DequantizeGgufParams d;
    d.w = static_cast<const std::byte*>(w) + first * row_bytes;
    d.out = dequant_scratch_.get();
    d.rows = rows;
    d.k = k;
    d.type = type;
    d.dtype = dtype;
    CUDA_RETURN_IF_ERROR(kernels::LaunchDequantizeGguf(d, stream_));
    RETURN_IF_ERROR(Cublas(x, dequant_scratch_.get(), static_cast<std::byte*>(y) + first * y_bytes,
                           m, rows, k, ldy, dtype, y_f32, accumulate));
  }
  return absl::OkStatus();
}

absl::Status Gemm::Cublas(const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
                          int64_t ldy, kernels::HalfType dtype, bool y_f32, bool accumulate) {
  if (m <= 0) return absl::OkStatus();
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  // Column-major view: y^T[n, m] = w[n, k] (stored as k x n) transposed times x^T[k, m].
  CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, w, CudaType(dtype), static_cast<int>(k), x, CudaType(dtype),
      static_cast<int>(k), &beta, y, y_f32 ? CUDA_R_32F : CudaType(dtype), static_cast<int>(ldy),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace convoy::cuda
