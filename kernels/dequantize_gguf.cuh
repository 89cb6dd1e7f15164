// GGUF blocks to the 16-bit type, rows at a time: the first half of a quantized product with many
// rows of activations (prefill), whose second half is the cuBLAS product over the result
// (executor/cuda/gemm.h). Each value is the reference dequantizer's (gguf_blocks.cuh) rounded to
// nearest even in the 16-bit type.
#ifndef CONVOY_KERNELS_DEQUANTIZE_GGUF_CUH_
#define CONVOY_KERNELS_DEQUANTIZE_GGUF_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gguf_blocks.cuh"
#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct DequantizeGgufParams {
  const void* w = nullptr;  // rows of GgufRowBytes(type, k) bytes, back to back; any alignment
  void* out = nullptr;      // [rows, k], dtype; 16-byte aligned
  int64_t rows = 0;         // >= 1
  int64_t k = 0;            // a positive multiple of the type's block
  GgufBlockType type = GgufBlockType::kQ8_0;
  HalfType dtype = HalfType::kBF16;
};

// cudaErrorInvalidValue when a pointer is null, out is not 16-byte aligned, the type is not a
// GgufBlockType or a size is out of range; otherwise the launch's error.
cudaError_t LaunchDequantizeGguf(const DequantizeGgufParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_DEQUANTIZE_GGUF_CUH_
