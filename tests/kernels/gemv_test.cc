// The GEMV kernel against a double-precision CPU reference on random inputs at odd sizes, outputs
// poisoned; its fused norm prologue and gated epilogue against the same reference and bit for bit
// against the kernels they replace (LaunchRmsNorm, LaunchSiluMul); and Gemm::Linear with the kernel
// against Gemm::Linear through cuBLAS.
#include "kernels/gemv.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"
#include "executor/cuda/gemm.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "kernels/rms_norm.cuh"
#include "kernels/silu_mul.cuh"

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

// The fused GEMV's inputs: fp32 residual rows (more than m, so row_index can gather), the norm's
// weight, w, and the fused product's options.
struct FusedCase {
  HalfType dtype = HalfType::kBF16;
  int64_t m = 1, n = 8, k = 8;
  bool norm = false;           // x is the RMS norm of residual rows
  bool gather = false;         // ... of the rows row_index names
  float weight_offset = 0.0f;  // Gemma-style 1 + w when 1
  bool gate = false;
  kernels::GateActivation activation = kernels::GateActivation::kSilu;
  bool y_f32 = false;
  std::string Name() const {
    return std::string(convoy::Name(dtype)) + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) + (norm ? " norm" : "") +
           (gather ? " gathered" : "") + (weight_offset != 0 ? " offset" : "") +
           (gate ? (activation == kernels::GateActivation::kSilu ? " silu" : " gelu") : "") +
           (y_f32 ? " f32" : "");
  }
};

constexpr int64_t kResidualRows = 6;
const int32_t kGather[4] = {5, 0, 3, 3};  // a repeat too

double Activate(kernels::GateActivation a, double g) {
  if (a == kernels::GateActivation::kSilu) return g / (1.0 + std::exp(-g));
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

// Runs the case fused and unfused (the norm kernel into a buffer, the plain GEMV, the gating
// kernel); expects the same bits from both, and both within `tolerance` of a double-precision
// reference. Returns the fused output's error against the reference.
double CheckFused(const FusedCase& f, uint64_t seed, double tolerance) {
  const int64_t m = f.m, n = f.n, k = f.k, n_out = f.gate ? n / 2 : n;
  const float eps = 1e-5f;
  const std::vector<float> residual = Random(kResidualRows * k, ++seed, 3.0f);
  const std::vector<uint16_t> x = ToHalf(Random(m * k, ++seed), f.dtype);
  const std::vector<uint16_t> norm_w = ToHalf(Random(k, ++seed), f.dtype);
  const std::vector<uint16_t> w = ToHalf(Random(n * k, ++seed, 0.5f), f.dtype);
  const std::vector<float> xf = FromHalf(x, f.dtype), norm_wf = FromHalf(norm_w, f.dtype),
                           wf = FromHalf(w, f.dtype);

  // The reference: x (or the norm of the residual rows, not rounded), the product, the gate.
  std::vector<double> x_ref(m * k);
  for (int64_t i = 0; i < m; ++i) {
    if (!f.norm) {
      for (int64_t l = 0; l < k; ++l) x_ref[i * k + l] = xf[i * k + l];
      continue;
    }
    const float* row = residual.data() + (f.gather ? kGather[i] : i) * k;
    double sum_sq = 0.0;
    for (int64_t l = 0; l < k; ++l) sum_sq += double{row[l]} * row[l];
    const double inv = 1.0 / std::sqrt(sum_sq / k + eps);
    for (int64_t l = 0; l < k; ++l) {
      x_ref[i * k + l] = row[l] * inv * (double{f.weight_offset} + norm_wf[l]);
    }
  }
  std::vector<float> want(m * n_out);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n_out; ++j) {
      double sum[2] = {0.0, 0.0};
      for (int part = 0; part < (f.gate ? 2 : 1); ++part) {
        const float* w_row = wf.data() + (j + part * n_out) * k;
        for (int64_t l = 0; l < k; ++l) sum[part] += x_ref[i * k + l] * w_row[l];
      }
      want[i * n_out + j] =
          static_cast<float>(f.gate ? Activate(f.activation, sum[0]) * sum[1] : sum[0]);
    }
  }

  DeviceArray<float> d_residual(residual);
  DeviceArray<uint16_t> d_x(x), d_norm_w(norm_w), d_w(w);
  DeviceArray<int32_t> d_gather(std::vector<int32_t>(kGather, kGather + 4));
  const size_t y_bytes = f.y_f32 ? 4 : 2;
  DeviceArray<float> d_y_fused(m * n_out), d_y_plain(m * n_out);  // poisoned; f32 or 16-bit
  DeviceArray<uint16_t> d_normed(m * k), d_gate_up(m * n);

  kernels::GemvParams p;
  p.w = d_w.get();
  p.m = m;
  p.n = n;
  p.k = k;
  p.dtype = f.dtype;
  p.y_f32 = f.y_f32;
  kernels::GemvParams fused = p;
  fused.y = d_y_fused.get();
  fused.gate = f.gate;
  fused.activation = f.activation;
  if (f.norm) {
    fused.norm.residual = d_residual.get();
    fused.norm.row_index = f.gather ? d_gather.get() : nullptr;
    fused.norm.weight = d_norm_w.get();
    fused.norm.eps = eps;
    fused.norm.weight_offset = f.weight_offset;
  } else {
    fused.x = d_x.get();
  }
  EXPECT_EQ(kernels::LaunchGemv(fused, nullptr), cudaSuccess) << f.Name();

  kernels::GemvParams plain = p;
  plain.x = d_x.get();
  if (f.norm) {
    kernels::RmsNormParams rms;
    rms.residual = d_residual.get();
    rms.weight = d_norm_w.get();
    rms.out = d_normed.get();
    rms.row_index = f.gather ? d_gather.get() : nullptr;
    rms.num_rows = m;
    rms.hidden = k;
    rms.eps = eps;
    rms.weight_offset = f.weight_offset;
    rms.dtype = f.dtype;
    EXPECT_EQ(kernels::LaunchRmsNorm(rms, nullptr), cudaSuccess);
    plain.x = d_normed.get();
  }
  plain.y = f.gate ? static_cast<void*>(d_gate_up.get()) : static_cast<void*>(d_y_plain.get());
  if (f.gate) plain.y_f32 = false;
  EXPECT_EQ(kernels::LaunchGemv(plain, nullptr), cudaSuccess);
  if (f.gate) {
    kernels::SiluMulParams gate;
    gate.gate_up = d_gate_up.get();
    gate.out = d_y_plain.get();
    gate.num_tokens = m;
    gate.intermediate = n_out;
    gate.activation = f.activation;
    gate.dtype = f.dtype;
    EXPECT_EQ(kernels::LaunchSiluMul(gate, nullptr), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> fused_raw = d_y_fused.Download(), plain_raw = d_y_plain.Download();
  EXPECT_EQ(std::memcmp(fused_raw.data(), plain_raw.data(), m * n_out * y_bytes), 0)
      << "fused and unfused differ: " << f.Name();
  std::vector<float> got(m * n_out);
  if (f.y_f32) {
    got = fused_raw;
  } else {
    std::vector<uint16_t> half(m * n_out);
    std::memcpy(half.data(), fused_raw.data(), half.size() * 2);
    got = FromHalf(half, f.dtype);
  }
  const double err = RelativeError(got, want);
  EXPECT_LT(err, tolerance) << f.Name();
  return err;
}

TEST(GemvFusion, NormPrologueIsTheNormKernelThenTheProductBitForBit) {
  CONVOY_SKIP_WITHOUT_GPU();
  double worst = 0.0;
  uint64_t seed = 5000;
  for (HalfType dtype : {HalfType::kBF16, HalfType::kF16}) {
    for (int64_t m = 1; m <= kernels::kGemvFusedMaxRows; ++m) {
      // k up to the 40 KiB of normalized rows at m = 4; n small (k split across warps) to large.
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{37, 64}, {4099, 2048}, {513, 5120}}) {
        for (bool y_f32 : {true, false}) {
          FusedCase f;
          f.dtype = dtype;
          f.m = m;
          f.n = n;
          f.k = k;
          f.norm = true;
          f.gather = m % 2 == 1;
          f.weight_offset = y_f32 ? 0.0f : 1.0f;
          f.y_f32 = y_f32;
          worst = std::max(worst, CheckFused(f, seed += 10, y_f32 ? 1e-2 : 2e-2));
        }
      }
    }
  }
  ReportError("gemv_norm_prologue", worst);
}

TEST(GemvFusion, GatedEpilogueIsTheProductThenTheGateBitForBit) {
  CONVOY_SKIP_WITHOUT_GPU();
  double worst = 0.0;
  uint64_t seed = 6000;
  for (HalfType dtype : {HalfType::kBF16, HalfType::kF16}) {
    for (auto activation : {kernels::GateActivation::kSilu, kernels::GateActivation::kGeluTanh}) {
      for (int64_t m = 1; m <= kernels::kGemvFusedMaxRows; ++m) {
        // n / 2 a multiple of 8 (the gating kernel's terms), from a few rows to many.
        for (const auto& [half_n, k] :
             {std::pair<int64_t, int64_t>{8, 64}, {40, 2056}, {2056, 1024}}) {
          for (bool norm : {false, true}) {
            FusedCase f;
            f.dtype = dtype;
            f.m = m;
            f.n = 2 * half_n;
            f.k = k;
            f.norm = norm;
            f.gather = norm && m > 1;
            f.gate = true;
            f.activation = activation;
            worst = std::max(worst, CheckFused(f, seed += 10, 2e-2));
          }
        }
      }
    }
  }
  ReportError("gemv_gated_epilogue", worst);
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

  // The fusions' terms.
  kernels::GemvParams norm = good;
  norm.x = nullptr;
  norm.norm.residual = static_cast<const float*>(fake);
  norm.norm.weight = fake;
  p = norm;
  p.x = fake;  // x and the norm both
  EXPECT_TRUE(refused(p));
  p = norm;
  p.norm.weight = nullptr;
  EXPECT_TRUE(refused(p));
  p = norm;
  p.norm.residual = reinterpret_cast<const float*>(static_cast<char*>(fake) + 4);
  EXPECT_TRUE(refused(p));
  for (const auto& [m, k] : {std::pair<int64_t, int64_t>{5, 64}, {4, 8192}, {3, 8192}}) {
    p = norm;
    p.m = m;
    p.k = k;
    EXPECT_TRUE(refused(p)) << "norm m=" << m << " k=" << k;
  }
  kernels::GemvParams gate = good;
  gate.gate = true;
  p = gate;
  p.n = 15;
  EXPECT_TRUE(refused(p));
  p = gate;
  p.y_f32 = true;
  EXPECT_TRUE(refused(p));
  p = gate;
  p.accumulate = true;
  EXPECT_TRUE(refused(p));
  p = gate;
  p.m = 5;
  EXPECT_TRUE(refused(p));
}

// The norm prologue's shared memory: 40 KiB of normalized rows.
TEST(GemvKernel, NormFitsUpTo40KiBOfRows) {
  EXPECT_TRUE(kernels::GemvNormFits(4, 4096));  // Llama-3.1-8B
  EXPECT_TRUE(kernels::GemvNormFits(4, 5120));
  EXPECT_TRUE(kernels::GemvNormFits(2, 8192));  // Llama-3.1-70B
  EXPECT_FALSE(kernels::GemvNormFits(3, 8192));
  EXPECT_FALSE(kernels::GemvNormFits(5, 64));
  EXPECT_FALSE(kernels::GemvNormFits(0, 64));
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
