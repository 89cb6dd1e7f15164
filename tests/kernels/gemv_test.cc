// The GEMV kernel against a double-precision CPU reference on random inputs at odd sizes, outputs
// poisoned; and Gemm::Linear with the kernel against Gemm::Linear through cuBLAS.
#include "kernels/gemv.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"
#include "executor/cuda/gemm.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"

namespace convoy {
namespace {

using kernels::HalfType;
using testing::DeviceArray;
using testing::RelativeError;
using testing::ReportError;

// Uniform in [-scale, scale), from a hash of (seed, i): cheap enough for matrices of 16M values.
std::vector<float> Random(size_t count, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t z = (seed << 40) + i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v[i] = scale * (static_cast<float>(z >> 40) * 0x1p-23f - 1.0f);
  }
  return v;
}

std::vector<uint16_t> ToHalf(const std::vector<float>& v, HalfType t) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = t == HalfType::kBF16 ? FloatToBF16(v[i]) : FloatToFP16(v[i]);
  }
  return out;
}

std::vector<float> FromHalf(const std::vector<uint16_t>& v, HalfType t) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = t == HalfType::kBF16 ? BF16ToFloat(v[i]) : FP16ToFloat(v[i]);
  }
  return out;
}

const char* Name(HalfType t) { return t == HalfType::kBF16 ? "bf16" : "f16"; }

// Every m, n, k below, accumulate off and on; the worst error is reported once.
void CheckGemv(HalfType dtype, bool y_f32) {
  const double tolerance = y_f32 ? 2e-3 : 8e-3;
  double worst = 0.0;
  uint64_t seed = y_f32 ? 1000 : 2000;
  for (int64_t m : {1, 3, 8}) {
    for (int64_t n : {1, 37, 513, 4099}) {
      for (int64_t k : {8, 1032, 4104}) {
        const std::vector<uint16_t> x = ToHalf(Random(m * k, ++seed), dtype);
        const std::vector<uint16_t> w = ToHalf(Random(n * k, ++seed), dtype);
        const std::vector<float> xf = FromHalf(x, dtype), wf = FromHalf(w, dtype);
        std::vector<double> product(m * n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0.0;
            for (int64_t l = 0; l < k; ++l) sum += double{xf[i * k + l]} * wf[j * k + l];
            product[i * n + j] = sum;
          }
        }
        // The existing y (accumulate), as the device holds it.
        std::vector<float> y0 = Random(m * n, ++seed, 8.0f);
        if (!y_f32) y0 = FromHalf(ToHalf(y0, dtype), dtype);

        DeviceArray<uint16_t> d_x(x), d_w(w);
        DeviceArray<float> d_y32(y_f32 ? m * n : 0);
        DeviceArray<uint16_t> d_y16(y_f32 ? 0 : m * n);
        for (bool accumulate : {false, true}) {
          if (y_f32) {
            if (accumulate)
              d_y32.Upload(y0);
            else
              CUDA_ASSERT_OK(cudaMemset(d_y32.get(), 0xff, m * n * sizeof(float)));
          } else {
            if (accumulate)
              d_y16.Upload(ToHalf(y0, dtype));
            else
              CUDA_ASSERT_OK(cudaMemset(d_y16.get(), 0xff, m * n * sizeof(uint16_t)));
          }
          kernels::GemvParams p;
          p.x = d_x.get();
          p.w = d_w.get();
          p.y = y_f32 ? static_cast<void*>(d_y32.get()) : static_cast<void*>(d_y16.get());
          p.m = m;
          p.n = n;
          p.k = k;
          p.dtype = dtype;
          p.y_f32 = y_f32;
          p.accumulate = accumulate;
          CUDA_ASSERT_OK(kernels::LaunchGemv(p, nullptr));
          CUDA_ASSERT_OK(cudaDeviceSynchronize());
          std::vector<float> want(m * n);
          for (int64_t i = 0; i < m * n; ++i) {
            want[i] = static_cast<float>(product[i] + (accumulate ? double{y0[i]} : 0.0));
          }
          const std::vector<float> got =
              y_f32 ? d_y32.Download() : FromHalf(d_y16.Download(), dtype);
          const double err = RelativeError(got, want);
          EXPECT_LT(err, tolerance) << Name(dtype) << (y_f32 ? " -> f32" : " -> half") << " m=" << m
                                    << " n=" << n << " k=" << k << " accumulate=" << accumulate;
          worst = std::max(worst, err);
        }
      }
    }
  }
  ReportError(std::string("gemv_") + Name(dtype) + (y_f32 ? "_to_f32" : "_to_half"), worst);
}

TEST(GemvKernel, Bf16ToF32) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckGemv(HalfType::kBF16, true);
}
TEST(GemvKernel, Bf16ToBf16) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckGemv(HalfType::kBF16, false);
}
TEST(GemvKernel, F16ToF32) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckGemv(HalfType::kF16, true);
}
TEST(GemvKernel, F16ToF16) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckGemv(HalfType::kF16, false);
}

// Refused before any device work, so this runs without a GPU too.
TEST(GemvKernel, RejectsBadParams) {
  // Aligned addresses that are never dereferenced.
  void* const fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  kernels::GemvParams good;
  good.x = fake;
  good.w = fake;
  good.y = fake;
  good.m = 1;
  good.n = 16;
  good.k = 64;
  auto refused = [](kernels::GemvParams p) {
    return kernels::LaunchGemv(p, nullptr) == cudaErrorInvalidValue;
  };
  kernels::GemvParams p = good;
  p.x = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.w = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.y = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.x = static_cast<char*>(fake) + 2;  // not 16-byte aligned
  EXPECT_TRUE(refused(p));
  p = good;
  p.w = static_cast<char*>(fake) + 8;
  EXPECT_TRUE(refused(p));
  for (int64_t m : {-1, 0, 9}) {
    p = good;
    p.m = m;
    EXPECT_TRUE(refused(p)) << "m=" << m;
  }
  for (int64_t n : {-1, 0}) {
    p = good;
    p.n = n;
    EXPECT_TRUE(refused(p)) << "n=" << n;
  }
  for (int64_t k : {-8, 0, 4, 12, 1030}) {
    p = good;
    p.k = k;
    EXPECT_TRUE(refused(p)) << "k=" << k;
  }
}

TEST(GemmGemv, RejectsBadMaxRows) {
  EXPECT_EQ(cuda::Gemm::Create(nullptr, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::Gemm::Create(nullptr, 9).status().code(), absl::StatusCode::kInvalidArgument);
}

// Gemm::Linear with gemv_max_rows 8 against 0 (cuBLAS) on the same inputs: close where the kernel
// runs (m <= 8, k % 8 == 0), identical where the call falls back to cuBLAS.
TEST(GemmGemv, MatchesCublas) {
  CONVOY_SKIP_WITHOUT_GPU();
  auto gemv = cuda::Gemm::Create(nullptr, 8);
  auto cublas = cuda::Gemm::Create(nullptr, 0);
  ASSERT_TRUE(gemv.ok()) << gemv.status();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  double worst = 0.0;
  uint64_t seed = 3000;
  for (HalfType dtype : {HalfType::kBF16, HalfType::kF16}) {
    for (int64_t m : {1, 5, 8, 9}) {
      for (int64_t k : {2048, 1030}) {
        const int64_t n = 1531;
        const std::vector<uint16_t> x = ToHalf(Random(m * k, ++seed), dtype);
        const std::vector<uint16_t> w = ToHalf(Random(n * k, ++seed), dtype);
        const std::vector<float> y0 = Random(m * n, ++seed, 8.0f);
        DeviceArray<uint16_t> d_x(x), d_w(w);
        for (bool y_f32 : {false, true}) {
          for (bool accumulate : {false, true}) {
            std::vector<float> got[2];
            for (int which = 0; which < 2; ++which) {
              cuda::Gemm& gemm = which == 0 ? **gemv : **cublas;
              DeviceArray<float> d_y32(m * n);
              DeviceArray<uint16_t> d_y16(m * n);
              if (accumulate) {
                d_y32.Upload(y0);
                d_y16.Upload(ToHalf(y0, dtype));
              }
              void* y = y_f32 ? static_cast<void*>(d_y32.get()) : static_cast<void*>(d_y16.get());
              const absl::Status status =
                  gemm.Linear(d_x.get(), d_w.get(), y, m, n, k, dtype, y_f32, accumulate);
              ASSERT_TRUE(status.ok()) << status;
              CUDA_ASSERT_OK(cudaDeviceSynchronize());
              got[which] = y_f32 ? d_y32.Download() : FromHalf(d_y16.Download(), dtype);
            }
            const double err = RelativeError(got[0], got[1]);
            const std::string where =
                std::string(Name(dtype)) + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                " y_f32=" + std::to_string(y_f32) + " accumulate=" + std::to_string(accumulate);
            if (m > 8 || k % 8 != 0) {
              EXPECT_EQ(err, 0.0) << "should fall back to cuBLAS: " << where;
            } else {
              EXPECT_LT(err, y_f32 ? 1e-4 : 8e-3) << where;
              worst = std::max(worst, err);
            }
          }
        }
      }
    }
  }
  ReportError("gemv_vs_cublas", worst);
}

}  // namespace
}  // namespace convoy
