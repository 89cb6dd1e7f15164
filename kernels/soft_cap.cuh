// Logit soft-capping (Gemma 3's final_logit_softcapping): x = cap * tanh(x / cap), in place.
#ifndef CONVOY_KERNELS_SOFT_CAP_CUH_
#define CONVOY_KERNELS_SOFT_CAP_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::kernels {

struct SoftCapParams {
  float* values = nullptr;  // [num_values]
  int64_t num_values = 0;
  float cap = 0.0f;  // positive
};

cudaError_t LaunchSoftCap(const SoftCapParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_SOFT_CAP_CUH_
