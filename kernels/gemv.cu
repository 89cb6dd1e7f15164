#include "kernels/device_utils.cuh"
#include "kernels/gemv.cuh"

namespace convoy::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// 16-byte loads of w each lane has in flight per loop iteration.
constexpr int kLoadsPerLane = 4;
// k is split across warps until the grid has this many (about 2 waves of 16 warps on 132 SMs).
constexpr int64_t kTargetWarps = 4096;

// What the kernel does with each output's sums.
enum class Epilogue { kStore, kGateSilu, kGateGeluTanh };

// Weight rows per warp: rows share each load (and conversion) of x, which matters as m grows. The
// gated epilogue needs an even count (gate rows, then their up rows).
constexpr int RowsPerWarp(int m, Epilogue e) {
  const int rows = m <= 2 ? 1 : (m <= 4 ? 2 : 4);
  return e == Epilogue::kStore || rows >= 2 ? rows : 2;
}
// Outputs per warp: one per row, or one per gate/up pair of rows.
constexpr int OutputsPerWarp(int m, Epilogue e) {
  return e == Epilogue::kStore ? RowsPerWarp(m, e) : RowsPerWarp(m, e) / 2;
}

// Read-only, read-once data: no L1 allocation, so x keeps the L1.
__device__ __forceinline__ uint4 LoadStreaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Two 16-bit values (the lower address in the low half) as floats.
template <typename T>
__device__ __forceinline__ float2 Unpack2(uint32_t bits);
template <>
__device__ __forceinline__ float2 Unpack2<__nv_bfloat16>(uint32_t bits) {
  return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
}
template <>
__device__ __forceinline__ float2 Unpack2<__half>(uint32_t bits) {
  __half2_raw raw;
  raw.x = static_cast<unsigned short>(bits & 0xffffu);
  raw.y = static_cast<unsigned short>(bits >> 16);
  return __half22float2(__half2(raw));
}

template <typename T>
__device__ __forceinline__ void Unpack8(const uint4& v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = Unpack2<T>(words[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// The norm prologue: the block writes the M rows of x, normalized as kernels/rms_norm.cu does
// (the same thread mapping, reduction and roundings), into `out` ([M][k] values of T), then syncs.
template <typename T, int M>
__device__ __forceinline__ void NormalizeRows(const GemvParams& p, T* out) {
  static_assert(kThreads == kNormThreads, "the norm's reduction order needs its block size");
  __shared__ float scratch[32];
  const GemvNorm& norm = p.norm;
  const T* weight = static_cast<const T*>(norm.weight);
  const int num_vecs = static_cast<int>(p.k / 4);
#pragma unroll 1
  for (int m = 0; m < M; ++m) {
    const int64_t row = norm.row_index != nullptr ? norm.row_index[m] : m;
    const float4* src = reinterpret_cast<const float4*>(norm.residual + row * p.k);
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < num_vecs; i += kThreads) sum_sq = SumSquares4(sum_sq, src[i]);
    const float inv_rms = InvRms(BlockSum(sum_sq, scratch), p.k, norm.eps);
    for (int i = threadIdx.x; i < num_vecs; i += kThreads) {
      const float4 v = src[i];
      const float vals[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[m * p.k + 4 * i + j] = FromFloat<T>(
            NormedValue(vals[j], inv_rms, norm.weight_offset, ToFloat(weight[4 * i + j])));
      }
    }
  }
  __syncthreads();
}

// Block b, row group g (warps g * k_slices .. + k_slices - 1) owns outputs
// (b * groups + g) * O .. + O - 1, where groups = kWarps / k_slices and O = OutputsPerWarp: weight
// rows of those outputs, or with the gated epilogue their gate rows then their up rows.
template <typename T, int M, bool kNorm, Epilogue E>
__global__ void __launch_bounds__(kThreads) GemvKernel(GemvParams p, int k_slices) {
  GridDependencyWait();
  constexpr int R = RowsPerWarp(M, E);
  constexpr int O = OutputsPerWarp(M, E);
  constexpr int U = kLoadsPerLane / R;  // chunks of each row per iteration
  __shared__ float partial[kWarps][R][M];
  extern __shared__ uint4 normed[];  // the norm prologue's x: [M][chunks]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int groups = kWarps / k_slices;
  const int group = warp / k_slices, slice = warp % k_slices;
  const int64_t n_out = E == Epilogue::kStore ? p.n : p.n / 2;
  const int64_t block_out = static_cast<int64_t>(blockIdx.x) * groups * O;
  const int chunks = static_cast<int>(p.k / 8);  // 16-byte chunks per row

  // Outputs past n_out read the last one's rows (their sums are never stored) so the loop has no
  // row branch.
  const uint4* w_row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t out = min(block_out + group * O + r % O, n_out - 1);
    const int64_t row = r < O ? out : out + n_out;
    w_row[r] = static_cast<const uint4*>(p.w) + row * chunks;
  }
  const uint4* x = static_cast<const uint4*>(p.x);
  if constexpr (kNorm) NormalizeRows<T, M>(p, reinterpret_cast<T*>(normed));

  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  }

  const int stride = 32 * k_slices;
  for (int c0 = slice * 32 + lane; c0 < chunks; c0 += U * stride) {
    // Every load of the iteration is issued before the first multiply.
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * stride;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wv[u][r] = c < chunks ? LoadStreaming(w_row[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * stride;
      if (c >= chunks) continue;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) Unpack8<T>(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        // Shared memory for the prologue's x, else through the read-only cache.
        if constexpr (kNorm) {
          Unpack8<T>(normed[m * chunks + c], xf);
        } else {
          Unpack8<T>(__ldg(x + m * chunks + c), xf);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float sum = WarpSum(acc[r][m]);
      if (lane == 0) partial[warp][r][m] = sum;
    }
  }
  __syncthreads();

  // One thread per output of the block (groups * O * M <= kThreads), consecutive threads on
  // consecutive outputs; the k slices are summed in order.
  const int outputs_in_block = groups * O;
  if (threadIdx.x >= outputs_in_block * M) return;
  const int m = threadIdx.x / outputs_in_block, out_in_block = threadIdx.x % outputs_in_block;
  const int g = out_in_block / O, o = out_in_block % O;
  const int64_t out = block_out + out_in_block;
  if (out >= n_out) return;
  float sum = 0.0f;
  for (int s = 0; s < k_slices; ++s) sum += partial[g * k_slices + s][o][m];
  if constexpr (E == Epilogue::kStore) {
    StoreProduct<T>(p.y, m * p.n + out, sum, p.y_f32, p.accumulate);
  } else {
    float up = 0.0f;
    for (int s = 0; s < k_slices; ++s) up += partial[g * k_slices + s][o + O][m];
    constexpr GateActivation kActivation =
        E == Epilogue::kGateSilu ? GateActivation::kSilu : GateActivation::kGeluTanh;
    static_cast<T*>(p.y)[m * n_out + out] = GatedValue<T, kActivation>(sum, up);
  }
}

template <typename T, int M, bool kNorm, Epilogue E>
cudaError_t Launch(const GemvParams& p, cudaStream_t stream) {
  constexpr int O = OutputsPerWarp(M, E);
  // k_slices as the plain product of the same n rows chooses it: each lane then sums the same
  // chunks in the same order, and the gated epilogue's products equal the plain kernel's bits.
  constexpr int R = RowsPerWarp(M, Epilogue::kStore);
  constexpr int U = kLoadsPerLane / R;
  const int64_t chunks = p.k / 8;
  const int64_t n_out = E == Epilogue::kStore ? p.n : p.n / 2;
  const int64_t row_groups = (p.n + R - 1) / R;
  // Double k_slices while the grid is short of warps and each lane keeps a full iteration.
  int k_slices = 1;
  while (k_slices < kWarps && row_groups * k_slices < kTargetWarps &&
         chunks >= int64_t{32} * U * (2 * k_slices)) {
    k_slices *= 2;
  }
  const int64_t outputs_per_block = int64_t{kWarps / k_slices} * O;
  const int64_t blocks = (n_out + outputs_per_block - 1) / outputs_per_block;
  const size_t shared_bytes = kNorm ? static_cast<size_t>(M * p.k * 2) : 0;
  return LaunchKernel(GemvKernel<T, M, kNorm, E>, dim3(static_cast<unsigned>(blocks)),
                      dim3(kThreads), shared_bytes, stream, p, k_slices);
}

// m = 1 .. 8 without a fusion, 1 .. kGemvFusedMaxRows with one.
template <typename T, bool kNorm, Epilogue E>
cudaError_t ForRows(const GemvParams& p, cudaStream_t stream) {
  static_assert(kGemvMaxRows == 8 && kGemvFusedMaxRows == 4,
                "ForRows instantiates m = 1 .. 8, the fusions m = 1 .. 4");
  switch (p.m) {
    case 1:
      return Launch<T, 1, kNorm, E>(p, stream);
    case 2:
      return Launch<T, 2, kNorm, E>(p, stream);
    case 3:
      return Launch<T, 3, kNorm, E>(p, stream);
    case 4:
      return Launch<T, 4, kNorm, E>(p, stream);
    default:
      break;
  }
  if constexpr (!kNorm && E == Epilogue::kStore) {
    switch (p.m) {
      case 5:
        return Launch<T, 5, false, E>(p, stream);
      case 6:
        return Launch<T, 6, false, E>(p, stream);
      case 7:
        return Launch<T, 7, false, E>(p, stream);
      case 8:
        return Launch<T, 8, false, E>(p, stream);
      default:
        break;
    }
  }
  return cudaErrorInvalidValue;
}

template <typename T, bool kNorm>
cudaError_t ForEpilogue(const GemvParams& p, cudaStream_t stream) {
  if (!p.gate) return ForRows<T, kNorm, Epilogue::kStore>(p, stream);
  return p.activation == GateActivation::kSilu
             ? ForRows<T, kNorm, Epilogue::kGateSilu>(p, stream)
             : ForRows<T, kNorm, Epilogue::kGateGeluTanh>(p, stream);
}

template <typename T>
cudaError_t LaunchFor(const GemvParams& p, cudaStream_t stream) {
  return p.norm.residual != nullptr ? ForEpilogue<T, true>(p, stream)
                                    : ForEpilogue<T, false>(p, stream);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t LaunchGemv(const GemvParams& params, cudaStream_t stream) {
  const GemvParams& p = params;
  if (p.w == nullptr || p.y == nullptr || !Aligned16(p.w) || p.m < 1 || p.m > kGemvMaxRows ||
      p.n < 1 || p.n > INT32_MAX || p.k < 8 || p.k % 8 != 0 || p.k > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (p.norm.residual != nullptr) {
    if (p.x != nullptr || p.norm.weight == nullptr || !Aligned16(p.norm.residual) ||
        !GemvNormFits(p.m, p.k)) {
      return cudaErrorInvalidValue;
    }
  } else if (p.x == nullptr || !Aligned16(p.x)) {
    return cudaErrorInvalidValue;
  }
  if (p.gate && (p.m > kGemvFusedMaxRows || p.n % 2 != 0 || p.y_f32 || p.accumulate)) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(params.dtype, err = LaunchFor<T>(params, stream));
  return err;
}

}  // namespace convoy::kernels
