#include <algorithm>

#include "kernels/device_utils.cuh"
#include "kernels/fill_random.cuh"
#include "kernels/sampling.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void FillRandomKernel(FillRandomParams p) {
  T* data = static_cast<T*>(p.data);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < p.num_elements;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = SplitMix64(p.seed ^ SplitMix64(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(bits >> 40) * 0x1.0p-23f - 1.0f;  // [-1, 1)
    data[i] = FromFloat<T>(p.offset + p.scale * u);
  }
}

}  // namespace

cudaError_t LaunchFillRandom(const FillRandomParams& params, cudaStream_t stream) {
  if (params.data == nullptr || params.num_elements < 0) return cudaErrorInvalidValue;
  if (params.num_elements == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((params.num_elements + threads - 1) / threads, 8192);
  CONVOY_DISPATCH_HALF(params.dtype, FillRandomKernel<T><<<blocks, threads, 0, stream>>>(params));
  return cudaGetLastError();
}

}  // namespace convoy::kernels
