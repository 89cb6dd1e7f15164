#include <algorithm>

#include "kernels/device_utils.cuh"
#include "kernels/silu_mul.cuh"

namespace convoy::kernels {
namespace {

template <typename T, GateActivation kActivation>
__global__ void SiluMulKernel(SiluMulParams p) {
  GridDependencyWait();
  const int64_t vecs_per_row = p.intermediate / 8;
  const int64_t total = p.num_tokens * vecs_per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t token = i / vecs_per_row;
    const int64_t v = i - token * vecs_per_row;
    const auto* in = reinterpret_cast<const Pack8<T>*>(static_cast<const T*>(p.gate_up) +
                                                       token * 2 * p.intermediate);
    const Pack8<T> gate = in[v];
    const Pack8<T> up = in[vecs_per_row + v];
    Pack8<T> result;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      result.v[j] = GatedValue<T, kActivation>(ToFloat(gate.v[j]), ToFloat(up.v[j]));
    }
    reinterpret_cast<Pack8<T>*>(static_cast<T*>(p.out) + token * p.intermediate)[v] = result;
  }
}

}  // namespace

cudaError_t LaunchSiluMul(const SiluMulParams& params, cudaStream_t stream) {
  const SiluMulParams& p = params;
  if (p.gate_up == nullptr || p.out == nullptr || p.intermediate <= 0 || p.intermediate % 8 != 0 ||
      p.num_tokens < 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t total = p.num_tokens * (p.intermediate / 8);
  if (total == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65536);
  cudaError_t err = cudaSuccess;
  const dim3 grid(static_cast<unsigned>(blocks));
  CONVOY_DISPATCH_HALF(p.dtype,
                       err = p.activation == GateActivation::kSilu
                                 ? LaunchKernel(SiluMulKernel<T, GateActivation::kSilu>, grid,
                                                dim3(threads), 0, stream, p)
                                 : LaunchKernel(SiluMulKernel<T, GateActivation::kGeluTanh>, grid,
                                                dim3(threads), 0, stream, p));
  return err;
}

}  // namespace convoy::kernels
