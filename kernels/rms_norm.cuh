// RMSNorm fused with the residual add: residual += delta (when given), then
// out = residual * rsqrt(mean(residual^2) + eps) * (weight_offset + weight), rounded to the 16-bit
// type (or, into out_f32, kept in fp32).
#ifndef CONVOY_KERNELS_RMS_NORM_CUH_
#define CONVOY_KERNELS_RMS_NORM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct RmsNormParams {
  float* residual = nullptr;     // [*, hidden]; updated in place when delta is set
  const float* delta = nullptr;  // [*, hidden] or null
  const void* weight = nullptr;  // [hidden], dtype
  void* out = nullptr;           // [num_rows, hidden], dtype; or
  float* out_f32 = nullptr;      // [num_rows, hidden]: exactly one of the two (may be `residual`)
  // Output row r normalizes residual row row_index[r] (device memory); null: row r.
  const int32_t* row_index = nullptr;
  int64_t num_rows = 0;
  int64_t hidden = 0;  // a multiple of 4
  float eps = 1e-6f;
  // Added to each weight (Gemma's norms scale by 1 + weight as stored in its checkpoints).
  float weight_offset = 0.0f;
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchRmsNorm(const RmsNormParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_RMS_NORM_CUH_
