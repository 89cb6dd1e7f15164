// The prefill attention tile on tensor cores (sm_80 and later), flash-attention style: four warps,
// each owning 16 of the tile's 64 queries, compute S = Q K^T and O += P V with bf16/f16 mma.sync
// m16n8k16 (fp32 accumulation), the online softmax staying in the score registers. K and V tiles
// of 64 keys are copied into shared memory asynchronously (cp.async), two stages deep, so the
// next tile's copy runs under this tile's products; keys past the tile's last query (and, with a
// sliding window, before its first query's window) are never loaded, and a warp skips a key tile
// that lies wholly after its own queries (or wholly before their windows).
//
// Register fragments follow the PTX ISA's layouts for m16n8k16: with g = lane / 4 and
// t = lane % 4, a thread's accumulators c0, c1 are row g, columns 2t and 2t + 1 of an 8-column
// tile, and c2, c3 the same columns of row g + 8. Two adjacent score tiles are exactly one A
// fragment of P for the second product, so P never goes through shared memory.
#include "kernels/device_utils.cuh"
#include "kernels/paged_attention_prefill.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the tensor-core prefill attention needs sm_80 or later (bf16 mma.sync)"
#endif

namespace convoy::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kQ = kPrefillTile;  // queries per tile, 16 per warp
constexpr int kK = 64;            // keys per step
static_assert(kQ == 16 * kWarps, "each warp owns 16 queries");

template <int kHeadDim>
struct MmaSmem {
  // 16-bit elements; rows padded by 16 bytes so that the eight row addresses of an ldmatrix
  // land in different banks.
  static constexpr int kStride = kHeadDim + 8;
  static constexpr int kTileElems = kK * kStride;
  // Q, then K stage 0, K stage 1, V stage 0, V stage 1.
  static constexpr size_t kBytes = size_t{kQ * kStride + 4 * kTileElems} * 2;
};

__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory without passing through registers; `bytes` 0 fills the
// destination with zeros (the source address is then not read but must still be valid).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddress(dst)), "l"(src),
               "r"(bytes));
}
__device__ __forceinline__ void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(row_address)));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(row_address)));
}

// d += a (16x16, row major) * b (16x8, column major), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1);
template <>
__device__ __forceinline__ void Mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void Mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of two 16-bit values, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) PrefillMmaKernel(PagedAttentionPrefillParams p) {
  GridDependencyWait();
  using S = MmaSmem<kHeadDim>;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks of one head
  constexpr int kDimSteps = kHeadDim / 16;
  constexpr int kDimTiles = kHeadDim / 8;
  constexpr int kKeyTiles = kK / 8;
  // The tile's Q fragments stay in registers up to 128 dimensions (32 registers a thread at 128);
  // at 256 they would take 64 beside the 128 of the output's accumulators, so they are read
  // from shared memory, where Q stays, at each use instead.
  constexpr bool kQInRegisters = kHeadDim <= 128;
  constexpr int kQFragments = kQInRegisters ? kDimSteps : 1;
  extern __shared__ float4 smem4[];
  T* q_s = reinterpret_cast<T*>(smem4);
  T* k_s = q_s + kQ * S::kStride;  // two stages
  T* v_s = k_s + 2 * S::kTileElems;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // The tiles that see the most keys first: they take longest.
  const int64_t tile = p.num_tiles - 1 - blockIdx.x;
  const int q_head = blockIdx.y;
  const int32_t first = p.tiles[2 * tile];
  const int32_t n = p.tiles[2 * tile + 1];
  const int32_t pos0 = p.positions[first];
  const int32_t context = pos0 + n;  // keys [first_key, context)
  // The first query's window starts the keys any query of the tile sees.
  const int32_t first_key = p.window > 0 ? max(0, pos0 + 1 - p.window) : 0;
  const int32_t* blocks = p.block_ids + p.row_block_offset[p.token_row[first]];
  const int kv_head = q_head / (p.num_q_heads / p.cache.num_kv_heads);
  const T* cache = static_cast<const T*>(p.cache.base);
  const T* q = static_cast<const T*>(p.q);

  // Queries past the tile's end are zeros; their outputs are not written.
  for (int idx = tid; idx < kQ * kChunks; idx += kThreads) {
    const int r = idx / kChunks, ch = idx % kChunks;
    const T* src = r < n ? q + static_cast<int64_t>(first + r) * p.q_row_stride +
                               static_cast<int64_t>(q_head) * kHeadDim + ch * 8
                         : q;
    CopyAsync16(q_s + r * S::kStride + ch * 8, src, r < n ? 16 : 0);
  }
  // Keys at or past `context` (or before `first_key`) are zeros in K and V: a masked score's
  // weight is exactly 0, and 0 times a zero V adds nothing, where stale cache bytes could hold a
  // NaN (and a block given back under the window, kNoBlock, is no block at all).
  auto load_kv = [&](int32_t kbase, int stage) {
    T* kd = k_s + stage * S::kTileElems;
    T* vd = v_s + stage * S::kTileElems;
    for (int idx = tid; idx < kK * kChunks; idx += kThreads) {
      const int c = idx / kChunks, ch = idx % kChunks;
      const int32_t pos = kbase + c;
      const T* ksrc = cache;
      const T* vsrc = cache;
      const bool valid = pos >= first_key && pos < context;
      if (valid) {
        const int32_t block = blocks[pos / p.cache.block_size];
        const int32_t slot = pos % p.cache.block_size;
        ksrc = cache + KvOffset(p.cache, block, kv_head, slot, false) + ch * 8;
        vsrc = cache + KvOffset(p.cache, block, kv_head, slot, true) + ch * 8;
      }
      CopyAsync16(kd + c * S::kStride + ch * 8, ksrc, valid ? 16 : 0);
      CopyAsync16(vd + c * S::kStride + ch * 8, vsrc, valid ? 16 : 0);
    }
  };
  const int first_step = first_key / kK;
  load_kv(first_step * kK, 0);
  CopyAsyncCommit();  // group: Q and the first K/V tile

  // Scores scaled into base 2: exp(s * scale) = exp2(s * scale * log2(e)).
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const int32_t row_pos[2] = {pos0 + 16 * warp + g, pos0 + 16 * warp + g + 8};
  const int32_t warp_first_pos = pos0 + 16 * warp, warp_last_pos = warp_first_pos + 15;
  float m[2] = {-INFINITY, -INFINITY};  // running max, base 2 and scaled, of rows g and g + 8
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sums
  float o[kDimTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDimTiles; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] = 0.0f;
  }
  uint32_t qf[kQFragments][4];
  const T* q_row = q_s + (16 * warp + (lane & 15)) * S::kStride + (lane >> 4) * 8;

  // Step i reads key tile first_step + i from stage i & 1.
  const int num_steps = (context + kK - 1) / kK - first_step;
  for (int step = 0; step < num_steps; ++step) {
    const int32_t kbase = (first_step + step) * kK;
    if (step + 1 < num_steps) load_kv(kbase + kK, (step + 1) & 1);
    CopyAsyncCommit();   // possibly empty: keeps the wait below uniform
    CopyAsyncWait<1>();  // everything but the newest group: this step's tile (and Q) is in
    __syncthreads();
    if (kQInRegisters && step == 0) {
#pragma unroll
      for (int ks = 0; ks < kQFragments; ++ks) LdMatrixX4(qf[ks], q_row + ks * 16);
    }
    const T* kt = k_s + (step & 1) * S::kTileElems;
    const T* vt = v_s + (step & 1) * S::kTileElems;
    // A step wholly after the warp's queries, or wholly before their windows, is skipped.
    if (kbase <= warp_last_pos && (p.window <= 0 || kbase + kK - 1 > warp_first_pos - p.window)) {
      float s[kKeyTiles][4];
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
      }
#pragma unroll
      for (int ks = 0; ks < kDimSteps; ++ks) {
        const int qi = kQInRegisters ? ks : 0;
        if (!kQInRegisters) LdMatrixX4(qf[qi], q_row + ks * 16);
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; nt += 2) {
          // Keys 8nt..8nt+15, dims 16ks..16ks+15: b0, b1 of key tile nt, then of nt + 1.
          uint32_t b[4];
          LdMatrixX4(b, kt + (8 * nt + (lane >> 4) * 8 + (lane & 7)) * S::kStride + ks * 16 +
                            ((lane >> 3) & 1) * 8);
          Mma<T>(s[nt], qf[qi], b[0], b[1]);
          Mma<T>(s[nt + 1], qf[qi], b[2], b[3]);
        }
      }
      // Causal mask where the tile reaches past the tile's first query (or past the context);
      // under a window, the window's start too.
      const bool needs_mask = kbase + kK - 1 > pos0 || p.window > 0;
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e >> 1;
          float v = s[nt][e] * scale_log2;
          if (needs_mask) {
            const int32_t kpos = kbase + 8 * nt + 2 * t + (e & 1);
            if (kpos > row_pos[half] || kpos >= context ||
                (p.window > 0 && kpos <= row_pos[half] - p.window)) {
              v = -INFINITY;
            }
          }
          s[nt][e] = v;
          tile_max[half] = fmaxf(tile_max[half], v);
        }
      }
      // A row whose keys are all masked so far has a running max of -inf: its exponentials are
      // taken from 0 instead, giving exp2(-inf) = 0 where -inf - -inf would be NaN.
      float alpha[2], base[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        // The four threads of a row are lanes 4g .. 4g + 3.
        float mx = tile_max[half];
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float new_max = fmaxf(m[half], mx);
        base[half] = new_max == -INFINITY ? 0.0f : new_max;
        alpha[half] = exp2f(m[half] - base[half]);
        m[half] = new_max;
        l[half] *= alpha[half];
      }
#pragma unroll
      for (int dt = 0; dt < kDimTiles; ++dt) {
        o[dt][0] *= alpha[0];
        o[dt][1] *= alpha[0];
        o[dt][2] *= alpha[1];
        o[dt][3] *= alpha[1];
      }
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float w = exp2f(s[nt][e] - base[e >> 1]);
          s[nt][e] = w;
          l[e >> 1] += w;
        }
      }
      // O += P V, 16 keys at a time: score tiles 2kk and 2kk + 1 form P's A fragment.
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk) {
        const uint32_t pa[4] = {PackPair<T>(s[2 * kk][0], s[2 * kk][1]),
                                PackPair<T>(s[2 * kk][2], s[2 * kk][3]),
                                PackPair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                PackPair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dt = 0; dt < kDimTiles; dt += 2) {
          // Keys 16kk..16kk+15 (rows of V), dims 8dt..8dt+15, transposed into B fragments.
          uint32_t b[4];
          LdMatrixX4Trans(b, vt + (16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride +
                                 (dt + (lane >> 4)) * 8);
          Mma<T>(o[dt], pa, b[0], b[1]);
          Mma<T>(o[dt + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage is read before the next step's copy overwrites it
  }
  CopyAsyncWait<0>();

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = 16 * warp + g + 8 * half;
    if (row >= n) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    T* dst = out + (static_cast<int64_t>(first + row) * p.num_q_heads + q_head) * kHeadDim;
#pragma unroll
    for (int dt = 0; dt < kDimTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(dst + 8 * dt + 2 * t) =
          PackPair<T>(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
    }
  }
}

template <typename T, int kHeadDim>
cudaError_t LaunchMma(const PagedAttentionPrefillParams& p, cudaStream_t stream) {
  constexpr size_t kBytes = MmaSmem<kHeadDim>::kBytes;
  static const cudaError_t raised =
      cudaFuncSetAttribute(PrefillMmaKernel<T, kHeadDim>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes));
  if (raised != cudaSuccess) return raised;
  const dim3 grid(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_q_heads));
  return LaunchKernel(PrefillMmaKernel<T, kHeadDim>, grid, dim3(kThreads), kBytes, stream, p);
}

}  // namespace

cudaError_t LaunchPagedAttentionPrefillMma(const PagedAttentionPrefillParams& p,
                                           cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int hd = p.cache.head_dim;
  CONVOY_DISPATCH_HALF(p.dtype, err = hd == 64    ? LaunchMma<T, 64>(p, stream)
                                      : hd == 96  ? LaunchMma<T, 96>(p, stream)
                                      : hd == 128 ? LaunchMma<T, 128>(p, stream)
                                                  : LaunchMma<T, 256>(p, stream));
  return err;
}

int64_t PagedAttentionPrefillMmaSharedBytes(int head_dim) {
  return PrefillSharedBytesAt<MmaSmem>(head_dim);
}

}  // namespace convoy::kernels
