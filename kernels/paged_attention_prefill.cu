#include "kernels/device_utils.cuh"
#include "kernels/paged_attention_prefill.cuh"

namespace convoy::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kQ = kPrefillTile;  // queries per tile
constexpr int kK = 64;            // keys per step
// Thread t owns score rows rg + 16 * i (i < 4) and columns cg + 8 * j (j < 8), rg = t / 8,
// cg = t % 8; for the output it owns the same rows and columns 4 * cg + 32 * jj + e (e < 4).
constexpr int kRowsPerThread = 4;
constexpr int kColsPerThread = 8;
static_assert(kThreads == 128 && kQ == 64 && kK == 64, "the thread layout covers 64 x 64");

template <int kHeadDim>
struct Smem {
  static constexpr int kRowStride = kHeadDim + 4;  // floats: 16-byte rows, conflict-free columns
  static constexpr int kPStride = kK + 1;
  // Q [kQ][kRowStride]; K [kK][kRowStride], reused for P [kQ][kPStride] once the scores are
  // computed; V [kK][kHeadDim].
  static constexpr size_t kFloats =
      size_t{kQ} * kRowStride + size_t{kK} * kRowStride + size_t{kK} * kHeadDim;
  static constexpr size_t kBytes = kFloats * sizeof(float);
  static_assert(kQ * kPStride <= kK * kRowStride, "P fits where K was");
};

__device__ __forceinline__ void Store8(float* dst, const float (&v)[8]) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) PrefillKernel(PagedAttentionPrefillParams p) {
  GridDependencyWait();
  using S = Smem<kHeadDim>;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks of one head
  constexpr int kColGroups = kHeadDim / 32;
  extern __shared__ float4 smem4[];
  float* q_s = reinterpret_cast<float*>(smem4);
  float* k_s = q_s + kQ * S::kRowStride;
  float* p_s = k_s;  // P overwrites K after the scores
  float* v_s = k_s + kK * S::kRowStride;

  const int tid = threadIdx.x;
  const int q_head = blockIdx.y;
  const int32_t first = p.tiles[2 * blockIdx.x];
  const int32_t n = p.tiles[2 * blockIdx.x + 1];
  const int32_t pos0 = p.positions[first];
  const int32_t context = pos0 + n;  // keys [first_key, context)
  // The first query's window starts the keys any query of the tile sees.
  const int32_t first_key = p.window > 0 ? max(0, pos0 + 1 - p.window) : 0;
  const int32_t* blocks = p.block_ids + p.row_block_offset[p.token_row[first]];
  const int kv_head = q_head / (p.num_q_heads / p.cache.num_kv_heads);
  const T* cache = static_cast<const T*>(p.cache.base);

  const T* q = static_cast<const T*>(p.q);
  for (int idx = tid; idx < kQ * kChunks; idx += kThreads) {
    const int r = idx / kChunks, ch = idx % kChunks;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (r < n) {
      const Pack8<T> pk =
          reinterpret_cast<const Pack8<T>*>(q + static_cast<int64_t>(first + r) * p.q_row_stride +
                                            static_cast<int64_t>(q_head) * kHeadDim)[ch];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = ToFloat(pk.v[j]) * p.scale;
    }
    Store8(q_s + r * S::kRowStride + ch * 8, v);
  }

  const int rg = tid / 8, cg = tid % 8;
  float m[kRowsPerThread], l[kRowsPerThread];
  float o[kRowsPerThread][kColGroups][4];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kColGroups; ++jj) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][jj][e] = 0.0f;
    }
  }

  for (int32_t kbase = first_key / kK * kK; kbase < context; kbase += kK) {
    __syncthreads();  // the previous step's P and V (and, first time, nothing) are read
    for (int idx = tid; idx < kK * kChunks; idx += kThreads) {
      const int c = idx / kChunks, ch = idx % kChunks;
      const int32_t pos = kbase + c;
      float kf[8] = {0, 0, 0, 0, 0, 0, 0, 0}, vf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (pos >= first_key && pos < context) {
        const int32_t block = blocks[pos / p.cache.block_size];
        const int32_t slot = pos % p.cache.block_size;
        const Pack8<T> kp = reinterpret_cast<const Pack8<T>*>(
            cache + KvOffset(p.cache, block, kv_head, slot, false))[ch];
        const Pack8<T> vp = reinterpret_cast<const Pack8<T>*>(
            cache + KvOffset(p.cache, block, kv_head, slot, true))[ch];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          kf[j] = ToFloat(kp.v[j]);
          vf[j] = ToFloat(vp.v[j]);
        }
      }
      Store8(k_s + c * S::kRowStride + ch * 8, kf);
      Store8(v_s + c * kHeadDim + ch * 8, vf);
    }
    __syncthreads();

    float s[kRowsPerThread][kColsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) s[i][j] = 0.0f;
    }
#pragma unroll 2
    for (int d = 0; d < kHeadDim; d += 4) {
      float4 qv[kRowsPerThread], kv[kColsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        qv[i] = *reinterpret_cast<const float4*>(q_s + (rg + 16 * i) * S::kRowStride + d);
      }
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) {
        kv[j] = *reinterpret_cast<const float4*>(k_s + (cg + 8 * j) * S::kRowStride + d);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kColsPerThread; ++j) {
          s[i][j] += qv[i].x * kv[j].x + qv[i].y * kv[j].y + qv[i].z * kv[j].z + qv[i].w * kv[j].w;
        }
      }
    }
    __syncthreads();  // K is read; P goes where it was

    // Causal (and window) mask, online softmax per row. A row whose keys are all masked so far
    // has a running max of -inf: its exponentials are taken from 0 instead, giving exp(-inf) = 0
    // where -inf - -inf would be NaN.
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int row = rg + 16 * i;
      const int32_t qpos = pos0 + row;
      float row_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) {
        const int32_t kpos = kbase + cg + 8 * j;
        if (kpos > qpos || kpos >= context || (p.window > 0 && kpos <= qpos - p.window)) {
          s[i][j] = -INFINITY;
        }
        row_max = fmaxf(row_max, s[i][j]);
      }
      // The 8 threads of a row are consecutive lanes.
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 4));
      const float new_max = fmaxf(m[i], row_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      const float alpha = __expf(m[i] - base);
      float row_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) {
        const float e = __expf(s[i][j] - base);
        row_sum += e;
        p_s[row * S::kPStride + cg + 8 * j] = e;
      }
      row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
      row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
      row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 4);
      l[i] = l[i] * alpha + row_sum;
      m[i] = new_max;
#pragma unroll
      for (int jj = 0; jj < kColGroups; ++jj) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][jj][e] *= alpha;
      }
    }
    __syncthreads();

#pragma unroll 4
    for (int c = 0; c < kK; ++c) {
      float pr[kRowsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) pr[i] = p_s[(rg + 16 * i) * S::kPStride + c];
#pragma unroll
      for (int jj = 0; jj < kColGroups; ++jj) {
        const float4 v = *reinterpret_cast<const float4*>(v_s + c * kHeadDim + 4 * cg + 32 * jj);
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          o[i][jj][0] += pr[i] * v.x;
          o[i][jj][1] += pr[i] * v.y;
          o[i][jj][2] += pr[i] * v.z;
          o[i][jj][3] += pr[i] * v.w;
        }
      }
    }
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = rg + 16 * i;
    if (row >= n) continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    T* dst = out + (static_cast<int64_t>(first + row) * p.num_q_heads + q_head) * kHeadDim;
#pragma unroll
    for (int jj = 0; jj < kColGroups; ++jj) {
#pragma unroll
      for (int e = 0; e < 4; ++e) dst[4 * cg + 32 * jj + e] = FromFloat<T>(o[i][jj][e] * inv);
    }
  }
}

template <typename T, int kHeadDim>
cudaError_t Launch(const PagedAttentionPrefillParams& p, cudaStream_t stream) {
  constexpr size_t kBytes = Smem<kHeadDim>::kBytes;
  // Above 48 KB a kernel must ask for its shared memory; once per instantiation is enough.
  static const cudaError_t raised =
      cudaFuncSetAttribute(PrefillKernel<T, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kBytes));
  if (raised != cudaSuccess) return raised;
  const dim3 grid(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_q_heads));
  return LaunchKernel(PrefillKernel<T, kHeadDim>, grid, dim3(kThreads), kBytes, stream, p);
}

}  // namespace

cudaError_t LaunchPagedAttentionPrefill(const PagedAttentionPrefillParams& params,
                                        cudaStream_t stream) {
  const PagedAttentionPrefillParams& p = params;
  const int hd = p.cache.head_dim;
  if (p.q == nullptr || p.out == nullptr || p.positions == nullptr || p.token_row == nullptr ||
      p.row_block_offset == nullptr || p.block_ids == nullptr || p.tiles == nullptr ||
      p.cache.base == nullptr || PagedAttentionPrefillSharedBytes(hd, true) == 0 ||
      p.cache.num_kv_heads <= 0 || p.cache.block_size <= 0 || p.num_q_heads <= 0 ||
      p.num_q_heads % p.cache.num_kv_heads != 0 || p.q_row_stride < int64_t{p.num_q_heads} * hd ||
      p.q_row_stride % 8 != 0 || p.num_tiles < 0 || p.num_tiles > INT32_MAX ||
      p.num_q_heads > 65535 || p.window < 0) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tiles == 0) return cudaSuccess;
  if (p.tensor_cores) return LaunchPagedAttentionPrefillMma(p, stream);
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(p.dtype, err = hd == 64    ? Launch<T, 64>(p, stream)
                                      : hd == 96  ? Launch<T, 96>(p, stream)
                                      : hd == 128 ? Launch<T, 128>(p, stream)
                                                  : Launch<T, 256>(p, stream));
  return err;
}

int64_t PagedAttentionPrefillSharedBytes(int head_dim, bool tensor_cores) {
  if (tensor_cores) return PagedAttentionPrefillMmaSharedBytes(head_dim);
  return PrefillSharedBytesAt<Smem>(head_dim);
}

}  // namespace convoy::kernels
