#include "kernels/device_utils.cuh"
#include "kernels/kv_write.cuh"
#include "kernels/kv_write_device.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void KvWriteKernel(KvWriteParams p) {
  GridDependencyWait();
  WriteTokenKv<T>(p, blockIdx.x);
}

}  // namespace

bool ValidKvWriteParams(const KvWriteParams& p) {
  return p.qkv != nullptr && p.positions != nullptr && p.token_row != nullptr &&
         p.row_block_offset != nullptr && p.block_ids != nullptr && p.cache.base != nullptr &&
         p.cache.head_dim > 0 && p.cache.head_dim % 8 == 0 && p.cache.block_size > 0 &&
         p.cache.num_kv_heads > 0 && p.k_column % 8 == 0 && p.row_stride % 8 == 0 &&
         p.row_stride >= p.k_column + int64_t{2} * p.cache.num_kv_heads * p.cache.head_dim &&
         p.num_tokens >= 0 && p.num_tokens <= INT32_MAX;
}

cudaError_t LaunchKvWrite(const KvWriteParams& params, cudaStream_t stream) {
  const KvWriteParams& p = params;
  if (!ValidKvWriteParams(p)) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(
      p.dtype, err = LaunchKernel(KvWriteKernel<T>, dim3(static_cast<unsigned>(p.num_tokens)),
                                  dim3(128), 0, stream, p));
  return err;
}

}  // namespace convoy::kernels
