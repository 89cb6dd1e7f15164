// Fills a 16-bit tensor with offset + scale * u, u uniform in [-1, 1) from a counter-based hash of
// (seed, index): random model weights made on the device, with no file behind them.
#ifndef CONVOY_KERNELS_FILL_RANDOM_CUH_
#define CONVOY_KERNELS_FILL_RANDOM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

struct FillRandomParams {
  void* data = nullptr;
  int64_t num_elements = 0;
  float scale = 1.0f;
  float offset = 0.0f;
  uint64_t seed = 0;
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchFillRandom(const FillRandomParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_FILL_RANDOM_CUH_
