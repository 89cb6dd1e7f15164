#include <algorithm>

#include "kernels/device_utils.cuh"
#include "kernels/soft_cap.cuh"

namespace convoy::kernels {
namespace {

__global__ void SoftCapKernel(SoftCapParams p) {
  GridDependencyWait();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < p.num_values;
       i += int64_t{gridDim.x} * blockDim.x) {
    p.values[i] = p.cap * tanhf(p.values[i] / p.cap);
  }
}

}  // namespace

cudaError_t LaunchSoftCap(const SoftCapParams& params, cudaStream_t stream) {
  if (params.values == nullptr || params.num_values < 0 || !(params.cap > 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (params.num_values == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((params.num_values + threads - 1) / threads, 65536);
  return LaunchKernel(SoftCapKernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream,
                      params);
}

}  // namespace convoy::kernels
