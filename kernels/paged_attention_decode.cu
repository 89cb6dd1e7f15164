#include <algorithm>

#include "kernels/device_utils.cuh"
#include "kernels/paged_attention_decode.cuh"

namespace convoy::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 64;  // keys per online-softmax step

// Merges the splits of one (work item, query head): weights exp(lse_s - max lse). The splits were
// written by other blocks of this launch: read past the L1.
template <typename T>
__device__ void CombineSplits(const PagedAttentionDecodeParams& p, int64_t item, int64_t query,
                              int head, int head_dim) {
  const int64_t first = (item * p.num_q_heads + head) * p.num_splits;
  const float* lse = p.partial_lse + first;
  float max_lse = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) max_lse = fmaxf(max_lse, __ldcg(lse + s));
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float split_lse = __ldcg(lse + s);
      if (split_lse == -INFINITY) continue;
      const float w = __expf(split_lse - max_lse);
      num += w * __ldcg(p.partial_out + (first + s) * head_dim + d);
      den += w;
    }
    static_cast<T*>(p.out)[(query * p.num_q_heads + head) * head_dim + d] =
        FromFloat<T>(den > 0.0f ? num / den : 0.0f);
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) DecodeKernel(PagedAttentionDecodeParams p) {
  GridDependencyWait();
  // Each of a key's threads reads 8 of its dimensions; a key's threads are a power of two (for the
  // shuffle sums), the ones past kSubs idle (head_dim 96: 12 of 16).
  constexpr int kSubs = kHeadDim / 8;
  constexpr int kThreadsPerKey = kSubs <= 8 ? 8 : kSubs <= 16 ? 16 : 32;
  static_assert(kHeadDim % 8 == 0 && kSubs <= 32, "8 dimensions a thread, 32 threads a key");
  constexpr int kKeyGroups = kThreads / kThreadsPerKey;
  __shared__ float q_s[kMaxGqaGroup][kHeadDim];
  __shared__ float score_s[kMaxGqaGroup][kTile];
  __shared__ float max_s[kMaxGqaGroup], sum_s[kMaxGqaGroup], alpha_s[kMaxGqaGroup];
  __shared__ float reduce_s[kKeyGroups][kHeadDim];

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int64_t item = blockIdx.z;  // which of the kernel's queries: indexes the split buffers
  const int64_t query = p.query_list != nullptr ? p.query_list[item] : item;
  const int group = p.num_q_heads / p.cache.num_kv_heads;
  const int tid = threadIdx.x;
  const int32_t context = p.positions[query] + 1;
  const int32_t first_key = p.window > 0 ? max(0, context - p.window) : 0;
  const int32_t* blocks = p.block_ids + p.row_block_offset[p.token_row[query]];
  int32_t chunk = (context - first_key + p.num_splits - 1) / p.num_splits;
  chunk = (chunk + kTile - 1) / kTile * kTile;
  const int32_t begin = first_key + split * chunk;
  const int32_t end = min(context, begin + chunk);

  const T* q = static_cast<const T*>(p.q) + query * p.q_row_stride +
               static_cast<int64_t>(kv_head) * group * kHeadDim;
  for (int i = tid; i < group * kHeadDim; i += kThreads) {
    q_s[i / kHeadDim][i % kHeadDim] = ToFloat(q[i]) * p.scale;
  }
  if (tid < kMaxGqaGroup) {
    max_s[tid] = -INFINITY;
    sum_s[tid] = 0.0f;
  }
  __syncthreads();

  const int sub = tid % kThreadsPerKey;  // which 8 dims of a key this thread reads
  const bool reads = sub < kSubs;
  const int key_group = tid / kThreadsPerKey;
  float acc[kMaxGqaGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGqaGroup; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
  }
  const T* cache = static_cast<const T*>(p.cache.base);

  for (int32_t tile = begin; tile < end; tile += kTile) {
    // Scores of this tile's keys.
    for (int k = key_group; k < kTile; k += kKeyGroups) {
      const int32_t pos = tile + k;
      float dots[kMaxGqaGroup];
#pragma unroll
      for (int g = 0; g < kMaxGqaGroup; ++g) dots[g] = 0.0f;
      if (pos < end && reads) {
        const int32_t block = blocks[pos / p.cache.block_size];
        const Pack8<T> kv = reinterpret_cast<const Pack8<T>*>(
            cache + KvOffset(p.cache, block, kv_head, pos % p.cache.block_size, false))[sub];
        float kf[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) kf[j] = ToFloat(kv.v[j]);
#pragma unroll
        for (int g = 0; g < kMaxGqaGroup; ++g) {
          if (g < group) {
#pragma unroll
            for (int j = 0; j < 8; ++j) dots[g] += kf[j] * q_s[g][sub * 8 + j];
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGqaGroup; ++g) {
#pragma unroll
        for (int offset = kThreadsPerKey / 2; offset > 0; offset >>= 1) {
          dots[g] += __shfl_xor_sync(0xffffffffu, dots[g], offset);
        }
      }
      if (sub == 0) {
#pragma unroll
        for (int g = 0; g < kMaxGqaGroup; ++g) {
          if (g < group) score_s[g][k] = pos < end ? dots[g] : -INFINITY;
        }
      }
    }
    __syncthreads();
    // Online softmax: one warp per head.
    const int warp = tid / 32, lane = tid % 32;
    for (int g = warp; g < group; g += kThreads / 32) {
      const float a = score_s[g][lane], b = score_s[g][lane + 32];
      const float old_max = max_s[g];
      const float new_max = fmaxf(old_max, WarpMax(fmaxf(a, b)));
      const float pa = __expf(a - new_max), pb = __expf(b - new_max);
      score_s[g][lane] = pa;
      score_s[g][lane + 32] = pb;
      const float tile_sum = WarpSum(pa + pb);
      __syncwarp();  // every lane has read max_s[g] and sum_s[g] before lane 0 rewrites them
      if (lane == 0) {
        const float alpha = __expf(old_max - new_max);
        alpha_s[g] = alpha;
        sum_s[g] = sum_s[g] * alpha + tile_sum;
        max_s[g] = new_max;
      }
    }
    __syncthreads();
    // Accumulate probabilities times V.
#pragma unroll
    for (int g = 0; g < kMaxGqaGroup; ++g) {
      if (g < group) {
        const float alpha = alpha_s[g];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] *= alpha;
      }
    }
    for (int k = key_group; reads && k < kTile && tile + k < end; k += kKeyGroups) {
      const int32_t pos = tile + k;
      const int32_t block = blocks[pos / p.cache.block_size];
      const Pack8<T> vv = reinterpret_cast<const Pack8<T>*>(
          cache + KvOffset(p.cache, block, kv_head, pos % p.cache.block_size, true))[sub];
      float vf[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) vf[j] = ToFloat(vv.v[j]);
#pragma unroll
      for (int g = 0; g < kMaxGqaGroup; ++g) {
        if (g < group) {
          const float prob = score_s[g][k];
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[g][j] += prob * vf[j];
        }
      }
    }
    __syncthreads();
  }

  // Sum the key groups' accumulators, one head at a time, and write.
#pragma unroll
  for (int g = 0; g < kMaxGqaGroup; ++g) {
    if (g >= group) break;
    if (reads) {
#pragma unroll
      for (int j = 0; j < 8; ++j) reduce_s[key_group][sub * 8 + j] = acc[g][j];
    }
    __syncthreads();
    const int q_head = kv_head * group + g;
    const float total = sum_s[g];
    for (int d = tid; d < kHeadDim; d += kThreads) {
      float v = 0.0f;
      for (int kg = 0; kg < kKeyGroups; ++kg) v += reduce_s[kg][d];
      v = total > 0.0f ? v / total : 0.0f;
      if (p.num_splits == 1) {
        static_cast<T*>(p.out)[(query * p.num_q_heads + q_head) * kHeadDim + d] = FromFloat<T>(v);
      } else {
        const int64_t entry = (item * p.num_q_heads + q_head) * p.num_splits + split;
        p.partial_out[entry * kHeadDim + d] = v;
        if (d == 0) p.partial_lse[entry] = total > 0.0f ? max_s[g] + __logf(total) : -INFINITY;
      }
    }
    __syncthreads();
  }
  if (p.num_splits == 1) return;

  // The item's last split to finish merges them all (no second launch). Each thread's writes are
  // made visible device-wide before the block takes its ticket; the last block resets the counter
  // for the next launch (every other split has taken its ticket by then).
  __shared__ bool last_s;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    uint32_t* counter = p.split_counters + item * p.cache.num_kv_heads + kv_head;
    last_s = atomicAdd(counter, 1u) == static_cast<uint32_t>(p.num_splits - 1);
    if (last_s) *counter = 0;
  }
  __syncthreads();
  if (!last_s) return;
  __threadfence();
  for (int g = 0; g < group; ++g) CombineSplits<T>(p, item, query, kv_head * group + g, kHeadDim);
}

template <typename T, int kHeadDim>
cudaError_t Launch(const PagedAttentionDecodeParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_splits, p.cache.num_kv_heads, static_cast<unsigned>(p.num_queries));
  return LaunchKernel(DecodeKernel<T, kHeadDim>, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace

int ChooseAttentionSplits(int64_t num_queries, int num_kv_heads, int num_sms) {
  const int64_t items = std::max<int64_t>(1, num_queries * num_kv_heads);
  const int64_t splits = (2 * int64_t{num_sms} + items - 1) / items;
  return static_cast<int>(std::clamp<int64_t>(splits, 1, kMaxAttentionSplits));
}

cudaError_t LaunchPagedAttentionDecode(const PagedAttentionDecodeParams& params,
                                       cudaStream_t stream) {
  const PagedAttentionDecodeParams& p = params;
  const int hd = p.cache.head_dim;
  if (p.q == nullptr || p.out == nullptr || p.positions == nullptr || p.token_row == nullptr ||
      p.row_block_offset == nullptr || p.block_ids == nullptr || p.cache.base == nullptr ||
      (hd != 64 && hd != 96 && hd != 128 && hd != 256) || p.cache.num_kv_heads <= 0 ||
      p.cache.block_size <= 0 || p.num_q_heads % p.cache.num_kv_heads != 0 ||
      p.num_q_heads / p.cache.num_kv_heads > kMaxGqaGroup || p.num_q_heads <= 0 ||
      p.q_row_stride < int64_t{p.num_q_heads} * hd || p.window < 0 || p.num_splits < 1 ||
      p.num_splits > kMaxAttentionSplits || p.num_queries < 0 || p.num_queries > 65535) {
    return cudaErrorInvalidValue;
  }
  if (p.num_splits > 1 &&
      (p.partial_out == nullptr || p.partial_lse == nullptr || p.split_counters == nullptr ||
       p.partial_capacity < p.num_queries * p.num_q_heads * p.num_splits)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_queries == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, err = hd == 64    ? Launch<T, 64>(p, stream)
                                      : hd == 96  ? Launch<T, 96>(p, stream)
                                      : hd == 128 ? Launch<T, 128>(p, stream)
                                                  : Launch<T, 256>(p, stream));
  return err;
}

}  // namespace convoy::kernels
