// SwiGLU's gating: out[t, i] = silu(gate_up[t, i]) * gate_up[t, intermediate + i], where the fused
// gate/up projection puts the gate half first.
#ifndef CONVOY_KERNELS_SILU_MUL_CUH_
#define CONVOY_KERNELS_SILU_MUL_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/half_type.cuh"

namespace convoy::kernels {

// The gate's activation: SiLU (Llama's SwiGLU) or GELU with the tanh approximation (Gemma's GeGLU:
// 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))).
enum class GateActivation { kSilu, kGeluTanh };

struct SiluMulParams {
  const void* gate_up = nullptr;  // [num_tokens, 2 * intermediate], dtype
  void* out = nullptr;            // [num_tokens, intermediate], dtype
  int64_t num_tokens = 0;
  int64_t intermediate = 0;  // a multiple of 8
  GateActivation activation = GateActivation::kSilu;
  HalfType dtype = HalfType::kBF16;
};

cudaError_t LaunchSiluMul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_SILU_MUL_CUH_
