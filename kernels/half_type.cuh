// The 16-bit floating-point format of weights, activations and the KV cache on the device. Shared
// by every launcher; includable from plain C++.
#ifndef CONVOY_KERNELS_HALF_TYPE_CUH_
#define CONVOY_KERNELS_HALF_TYPE_CUH_

#if defined(__CUDACC__)
#define CONVOY_HOST_DEVICE __host__ __device__
#else
#define CONVOY_HOST_DEVICE
#endif

namespace convoy::kernels {

enum class HalfType { kBF16, kF16 };

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_HALF_TYPE_CUH_
