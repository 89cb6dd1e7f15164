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

// Output rows per warp: rows share each load (and conversion) of x, which matters as m grows.
constexpr int RowsPerWarp(int m) { return m <= 2 ? 1 : (m <= 4 ? 2 : 4); }

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

// Block b, row group g (warps g * k_slices .. + k_slices - 1) owns rows
// (b * groups + g) * R .. + R - 1, where groups = kWarps / k_slices.
template <typename T, int M>
__global__ void __launch_bounds__(kThreads) GemvKernel(GemvParams p, int k_slices) {
  GridDependencyWait();
  constexpr int R = RowsPerWarp(M);
  constexpr int U = kLoadsPerLane / R;  // chunks of each row per iteration
  __shared__ float partial[kWarps][R][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int groups = kWarps / k_slices;
  const int group = warp / k_slices, slice = warp % k_slices;
  const int64_t block_row = static_cast<int64_t>(blockIdx.x) * groups * R;
  const int chunks = static_cast<int>(p.k / 8);  // 16-byte chunks per row

  // Rows past n read the last row (their sums are never stored) so the loop has no row branch.
  const uint4* w_row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(block_row + group * R + r, p.n - 1);
    w_row[r] = static_cast<const uint4*>(p.w) + row * chunks;
  }
  const uint4* x = static_cast<const uint4*>(p.x);

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
        Unpack8<T>(__ldg(x + m * chunks + c), xf);
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

  // One thread per output of the block (groups * R * M <= kThreads), consecutive threads on
  // consecutive rows; the k slices are summed in order.
  const int rows_in_block = groups * R;
  if (threadIdx.x >= rows_in_block * M) return;
  const int m = threadIdx.x / rows_in_block, row_in_block = threadIdx.x % rows_in_block;
  const int g = row_in_block / R, r = row_in_block % R;
  const int64_t row = block_row + row_in_block;
  if (row >= p.n) return;
  float sum = 0.0f;
  for (int s = 0; s < k_slices; ++s) sum += partial[g * k_slices + s][r][m];
  StoreProduct<T>(p.y, m * p.n + row, sum, p.y_f32, p.accumulate);
}

template <typename T, int M>
cudaError_t Launch(const GemvParams& p, cudaStream_t stream) {
  constexpr int R = RowsPerWarp(M);
  constexpr int U = kLoadsPerLane / R;
  const int64_t chunks = p.k / 8;
  const int64_t row_groups = (p.n + R - 1) / R;
  // Double k_slices while the grid is short of warps and each lane keeps a full iteration.
  int k_slices = 1;
  while (k_slices < kWarps && row_groups * k_slices < kTargetWarps &&
         chunks >= int64_t{32} * U * (2 * k_slices)) {
    k_slices *= 2;
  }
  const int64_t rows_per_block = int64_t{kWarps / k_slices} * R;
  const int64_t blocks = (p.n + rows_per_block - 1) / rows_per_block;
  return LaunchKernel(GemvKernel<T, M>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                      stream, p, k_slices);
}

template <typename T>
cudaError_t LaunchFor(const GemvParams& p, cudaStream_t stream) {
  switch (p.m) {
    case 1:
      return Launch<T, 1>(p, stream);
    case 2:
      return Launch<T, 2>(p, stream);
    case 3:
      return Launch<T, 3>(p, stream);
    case 4:
      return Launch<T, 4>(p, stream);
    case 5:
      return Launch<T, 5>(p, stream);
    case 6:
      return Launch<T, 6>(p, stream);
    case 7:
      return Launch<T, 7>(p, stream);
    case 8:
      return Launch<T, 8>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t LaunchGemv(const GemvParams& params, cudaStream_t stream) {
  static_assert(kGemvMaxRows == 8, "LaunchFor instantiates m = 1 .. 8");
  if (params.x == nullptr || params.w == nullptr || params.y == nullptr || !Aligned16(params.x) ||
      !Aligned16(params.w) || params.m < 1 || params.m > kGemvMaxRows || params.n < 1 ||
      params.n > INT32_MAX || params.k < 8 || params.k % 8 != 0 || params.k > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = cudaSuccess;
  CONVOY_DISPATCH_HALF(params.dtype, err = LaunchFor<T>(params, stream));
  return err;
}

}  // namespace convoy::kernels
