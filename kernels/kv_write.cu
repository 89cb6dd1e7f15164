#include "kernels/device_utils.cuh"
#include "kernels/kv_write.cuh"

namespace convoy::kernels {
namespace {

template <typename T>
__global__ void KvWriteKernel(KvWriteParams p) {
  const int64_t token = blockIdx.x;
  const int32_t pos = p.positions[token];
  const int32_t row = p.token_row[token];
  const int32_t block = p.block_ids[p.row_block_offset[row] + pos / p.cache.block_size];
  const int32_t slot = pos % p.cache.block_size;
  if (block < 0 || block >= p.cache.num_blocks) return;  // the host validated; never write astray
  const int vecs_per_head = p.cache.head_dim / 8;
  const int vecs = p.cache.num_kv_heads * vecs_per_head;
  const T* src = static_cast<const T*>(p.qkv) + token * p.row_stride + p.k_column;
  T* base = static_cast<T*>(p.cache.base);
  for (int i = threadIdx.x; i < 2 * vecs; i += blockDim.x) {
    const bool is_v = i >= vecs;
    const int j = is_v ? i - vecs : i;
    const int head = j / vecs_per_head;
    const int part = j - head * vecs_per_head;
    const auto value = reinterpret_cast<const Pack8<T>*>(src + (is_v ? vecs * 8 : 0))[j];
    reinterpret_cast<Pack8<T>*>(base + KvOffset(p.cache, block, head, slot, is_v))[part] = value;
  }
}

}  // namespace

cudaError_t LaunchKvWrite(const KvWriteParams& params, cudaStream_t stream) {
  const KvWriteParams& p = params;
  if (p.qkv == nullptr || p.positions == nullptr || p.token_row == nullptr ||
      p.row_block_offset == nullptr || p.block_ids == nullptr || p.cache.base == nullptr ||
      p.cache.head_dim <= 0 || p.cache.head_dim % 8 != 0 || p.cache.block_size <= 0 ||
      p.cache.num_kv_heads <= 0 || p.k_column % 8 != 0 || p.row_stride % 8 != 0 ||
      p.row_stride < p.k_column + int64_t{2} * p.cache.num_kv_heads * p.cache.head_dim ||
      p.num_tokens < 0 || p.num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, KvWriteKernel<T><<<p.num_tokens, 128, 0, stream>>>(p));
  return cudaGetLastError();
}

}  // namespace convoy::kernels
