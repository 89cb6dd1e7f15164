// Small-batch matrix product over weights kept in their GGUF blocks, for decode:
// y[i, j] (+)= sum over c of x[i, c] * W[j, c] for i < m <= 8, j < n, where W's rows are GGUF
// blocks of one type (gguf_blocks.cuh) and x is the executor's 16-bit type. One pass over the
// packed weights serves every row of x.
//
// Numerics: each weight is decoded in registers to the reference dequantizer's fp32 value
// (DecodeGgufGroup, the same bits as model/gguf_dequantize.h), x is read as it is (bf16 or f16, no
// 8-bit quantization of the activations), and the products are summed in fp32: the result is the
// dequantized product with fp32 accumulation, no other rounding (then rounded to y's type).
//
// Work: a block of 8 warps, one weight row per warp; lane l decodes groups l, l + 32, ... of 32
// consecutive values of its row and multiplies each by every row of x; the lanes' sums meet by
// warp shuffles in a fixed order (deterministic).
#ifndef CONVOY_KERNELS_QUANT_GEMV_CUH_
#define CONVOY_KERNELS_QUANT_GEMV_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gguf_blocks.cuh"
#include "kernels/half_type.cuh"

namespace convoy::kernels {

inline constexpr int kQuantGemvMaxRows = 8;

struct QuantGemvParams {
  const void* x = nullptr;  // [m, k], dtype, leading dimension k; 16-byte aligned
  // n rows of GgufRowBytes(type, k) bytes each, back to back; any alignment.
  const void* w = nullptr;
  void* y = nullptr;  // y[i * ldy + j]; fp32 when y_f32 else dtype; any alignment
  int64_t m = 0;      // 1 .. kQuantGemvMaxRows
  int64_t n = 0;      // >= 1
  int64_t k = 0;      // a positive multiple of the type's block
  int64_t ldy = 0;    // >= n
  GgufBlockType type = GgufBlockType::kQ8_0;
  HalfType dtype = HalfType::kBF16;
  bool y_f32 = false;
  bool accumulate = false;  // y += the product (added in fp32, then rounded) instead of y =
};

// cudaErrorInvalidValue when a pointer is null, x is not 16-byte aligned, the type is not a
// GgufBlockType or a size is out of range; otherwise the launch's error.
cudaError_t LaunchQuantGemv(const QuantGemvParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_QUANT_GEMV_CUH_
