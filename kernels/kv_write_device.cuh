// The body of the KV write, for the kernels that write a token's K and V into the paged cache: the
// KV write kernel and the rotary kernel's fused write (included from .cu files only).
#ifndef CONVOY_KERNELS_KV_WRITE_DEVICE_CUH_
#define CONVOY_KERNELS_KV_WRITE_DEVICE_CUH_

#include "kernels/device_utils.cuh"
#include "kernels/kv_write.cuh"

namespace convoy::kernels {

// Copies token `token`'s K and V from its QKV row into its cache slot, with the block's threads.
template <typename T>
__device__ __forceinline__ void WriteTokenKv(const KvWriteParams& p, int64_t token) {
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

}  // namespace convoy::kernels

#endif  // CONVOY_KERNELS_KV_WRITE_DEVICE_CUH_
