// The kernels of weights kept in GGUF blocks, every type, against the CPU reference: the blocks
// dequantized by model/gguf_dequantize.h, then the product in double precision. Random blocks
// include all-zero blocks and scales of 65504, 2^-24 and 0 (the decoder's infinite and NaN scales
// are held to the reference on the CPU, gguf_blocks_test); outputs poisoned, odd sizes.
//
// Bounds, as ||got - want|| / ||want||:
// - The quantized GEMV (m = 1..8) decodes each weight to the reference's fp32 value and sums in
//   fp32, so only the summation rounds: 2e-5 into fp32 (k <= 1056 terms; weights rounded to bf16
//   would show as 1e-3), and the output type's
//   rounding into 16 bits (4e-3 bf16, 1e-3 f16).
// - The prefill path (m > 8) rounds each weight to the 16-bit type (2^-9 relative in bf16) before
//   cuBLAS: 5e-3 into fp32, 8e-3 into bf16.
// - The dequantize kernel: the reference's value rounded to nearest even, bit for bit.
#include "kernels/quant_gemv.cuh"

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
#include "kernels/dequantize_gguf.cuh"
#include "kernels/gpu_test_util.h"
#include "kernels/random_gguf_blocks.h"
#include "model/gguf_dequantize.h"

namespace convoy {
namespace {

using kernels::GgufBlockType;
using kernels::HalfType;
using testing::DeviceArray;
using testing::kAllGgufBlockTypes;
using testing::RandomGgufBlocks;
using testing::RelativeError;
using testing::ReportError;
using testing::ScaleMode;

std::string Name(GgufBlockType type) {
  return GgmlTypeName(static_cast<GgmlType>(static_cast<int32_t>(type)));
}

uint16_t ToHalf(float v, HalfType t) {
  return t == HalfType::kBF16 ? FloatToBF16(v) : FloatToFP16(v);
}
float FromHalf(uint16_t v, HalfType t) {
  return t == HalfType::kBF16 ? BF16ToFloat(v) : FP16ToFloat(v);
}

// n rows of k values in `type`'s blocks, and the values as the reference dequantizes them.
struct QuantMatrix {
  std::vector<uint8_t> blocks;
  std::vector<float> values;  // [n, k]
};

QuantMatrix RandomMatrix(GgufBlockType type, int64_t n, int64_t k, uint32_t seed, ScaleMode mode) {
  QuantMatrix w;
  const int64_t blocks = n * k / kernels::GgufBlockElements(type);
  w.blocks = RandomGgufBlocks(type, blocks, seed, 1.0f / std::sqrt(static_cast<float>(k)), mode);
  w.values.resize(n * k);
  DequantizeValues(static_cast<GgmlType>(static_cast<int32_t>(type)),
                   reinterpret_cast<const std::byte*>(w.blocks.data()), n * k, w.values.data());
  return w;
}

// x [m, k] in the 16-bit type, and its values.
struct Activations {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};

Activations RandomActivations(int64_t m, int64_t k, HalfType dtype, uint32_t seed) {
  Activations x;
  for (float v : testing::RandomFloats(m * k, seed)) {
    x.bits.push_back(ToHalf(v, dtype));
    x.values.push_back(FromHalf(x.bits.back(), dtype));
  }
  return x;
}

// product[i * n + j] = sum over c of x[i, c] w[j, c], in double.
std::vector<double> Reference(const Activations& x, const QuantMatrix& w, int64_t m, int64_t n,
                              int64_t k) {
  std::vector<double> product(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t c = 0; c < k; ++c) sum += double{x.values[i * k + c]} * w.values[j * k + c];
      product[i * n + j] = sum;
    }
  }
  return product;
}

// Runs Gemm::LinearQuant writing columns [1, 1 + n) of a y of n + 3 columns, poisoned; returns
// the n columns, and checks the others kept their poison.
std::vector<float> RunLinearQuant(cuda::Gemm& gemm, const Activations& x, const QuantMatrix& w,
                                  GgufBlockType type, int64_t m, int64_t n, int64_t k,
                                  HalfType dtype, bool y_f32, const std::vector<float>* y0) {
  const int64_t ldy = n + 3;
  DeviceArray<uint16_t> d_x(x.bits);
  DeviceArray<uint8_t> d_w(w.blocks);
  DeviceArray<float> d_y32(y_f32 ? m * ldy : 0);
  DeviceArray<uint16_t> d_y16(y_f32 ? 0 : m * ldy);
  if (y0 != nullptr) {
    std::vector<float> wide32(m * ldy, NAN);
    std::vector<uint16_t> wide16(m * ldy, 0xffff);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        wide32[i * ldy + 1 + j] = (*y0)[i * n + j];
        wide16[i * ldy + 1 + j] = ToHalf((*y0)[i * n + j], dtype);
      }
    }
    if (y_f32)
      d_y32.Upload(wide32);
    else
      d_y16.Upload(wide16);
  }
  void* y = y_f32 ? static_cast<void*>(d_y32.get() + 1) : static_cast<void*>(d_y16.get() + 1);
  const absl::Status status =
      gemm.LinearQuant(d_x.get(), d_w.get(), type, y, m, n, k, ldy, dtype, y_f32, y0 != nullptr);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(m * n);
  const std::vector<float> y32 = y_f32 ? d_y32.Download() : std::vector<float>();
  const std::vector<uint16_t> y16 = y_f32 ? std::vector<uint16_t>() : d_y16.Download();
  int64_t overwritten = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldy; ++j) {
      const bool inside = j >= 1 && j < 1 + n;
      const float v = y_f32 ? y32[i * ldy + j] : FromHalf(y16[i * ldy + j], dtype);
      if (inside)
        got[i * n + j - 1] = v;
      else if (!std::isnan(v))
        ++overwritten;
    }
  }
  EXPECT_EQ(overwritten, 0) << "columns outside [1, 1 + n) were written";
  return got;
}

// The worst errors over the types of one test: GEMV and prefill, into 16 bits [0] and fp32 [1].
struct Worst {
  double gemv[2] = {0, 0}, prefill[2] = {0, 0};

  void Report(HalfType dtype) const {
    const std::string x = dtype == HalfType::kBF16 ? "bf16" : "f16";
    ReportError("quant_gemv_" + x + "_to_f32", gemv[1]);
    ReportError("quant_gemv_" + x + "_to_half", gemv[0]);
    ReportError("quant_prefill_" + x + "_to_f32", prefill[1]);
    ReportError("quant_prefill_" + x + "_to_half", prefill[0]);
  }
};

// Each type; m = 1 .. 8 through the GEMV, one prefill m through the panels; y fp32 and 16-bit,
// with and without accumulation.
void CheckType(GgufBlockType type, HalfType dtype, Worst* worst_of) {
  const int64_t block = kernels::GgufBlockElements(type);
  // An odd number of groups of 32 past the lanes' first pass, and a row count no block of 8 warps
  // divides. K types: 3 and 2 blocks.
  const int64_t ks[] = {block == 32 ? 1056 : 768, block == 32 ? 96 : 512};
  const int64_t n = 301;
  // The prefill path in panels of 64 rows: 5 panels, the last one short.
  auto gemm = cuda::Gemm::Create(nullptr, 0, 64 * 1056 * 2);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  uint32_t seed = 100 * static_cast<uint32_t>(type) + (dtype == HalfType::kBF16 ? 0 : 50);
  // fp16 outputs cannot hold what a scale of 65504 makes.
  const ScaleMode mode =
      dtype == HalfType::kBF16 ? ScaleMode::kFiniteExtremes : ScaleMode::kAmplitude;
  for (int64_t k : ks) {
    const QuantMatrix w = RandomMatrix(type, n, k, ++seed, mode);
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 37}) {
      const Activations x = RandomActivations(m, k, dtype, ++seed);
      const std::vector<double> product = Reference(x, w, m, n, k);
      const std::vector<float> y0 = testing::RandomFloats(m * n, ++seed, 0.5f);
      for (bool y_f32 : {true, false}) {
        for (bool accumulate : {false, true}) {
          std::vector<float> start = y0;
          if (!y_f32) {
            for (float& v : start) v = FromHalf(ToHalf(v, dtype), dtype);
          }
          const std::vector<float>* y_in = accumulate ? &start : nullptr;
          std::vector<float> want(m * n);
          for (int64_t i = 0; i < m * n; ++i) {
            want[i] = static_cast<float>(product[i] + (accumulate ? double{start[i]} : 0.0));
          }
          const std::vector<float> got =
              RunLinearQuant(**gemm, x, w, type, m, n, k, dtype, y_f32, y_in);
          const double err = RelativeError(got, want);
          const bool prefill = m > kernels::kQuantGemvMaxRows;
          const double bound = prefill ? (y_f32 ? 5e-3 : 8e-3)
                                       : (y_f32 ? 2e-5 : (dtype == HalfType::kBF16 ? 4e-3 : 1e-3));
          EXPECT_LT(err, bound) << Name(type) << " m=" << m << " k=" << k << " y_f32=" << y_f32
                                << " accumulate=" << accumulate;
          double& worst = prefill ? worst_of->prefill[y_f32] : worst_of->gemv[y_f32];
          worst = std::max(worst, err);
        }
      }
    }
  }
}

TEST(QuantGemvKernel, EveryTypeBf16AgainstTheDequantizedProduct) {
  CONVOY_SKIP_WITHOUT_GPU();
  Worst worst;
  for (GgufBlockType type : kAllGgufBlockTypes) {
    SCOPED_TRACE(Name(type));
    ASSERT_NO_FATAL_FAILURE(CheckType(type, HalfType::kBF16, &worst));
  }
  worst.Report(HalfType::kBF16);
}

TEST(QuantGemvKernel, F16Activations) {
  CONVOY_SKIP_WITHOUT_GPU();
  Worst worst;
  for (GgufBlockType type : {GgufBlockType::kQ4_K, GgufBlockType::kQ6_K, GgufBlockType::kQ8_0}) {
    SCOPED_TRACE(Name(type));
    ASSERT_NO_FATAL_FAILURE(CheckType(type, HalfType::kF16, &worst));
  }
  worst.Report(HalfType::kF16);
}

// The dequantize kernel gives the reference's values rounded to the 16-bit type, bit for bit, NaN
// for NaN, over blocks with every kind of scale (infinite and NaN ones too).
TEST(DequantizeGgufKernel, ReferenceValuesRoundedToNearestEven) {
  CONVOY_SKIP_WITHOUT_GPU();
  for (HalfType dtype : {HalfType::kBF16, HalfType::kF16}) {
    for (GgufBlockType type : kAllGgufBlockTypes) {
      SCOPED_TRACE(Name(type));
      const int64_t rows = 77, k = 3 * kernels::GgufBlockElements(type);
      const std::vector<uint8_t> blocks = RandomGgufBlocks(
          type, rows * 3, 7u + static_cast<uint32_t>(type), 3.0f, testing::ScaleMode::kAnyExtremes);
      std::vector<float> values(rows * k);
      DequantizeValues(static_cast<GgmlType>(static_cast<int32_t>(type)),
                       reinterpret_cast<const std::byte*>(blocks.data()), rows * k, values.data());
      DeviceArray<uint8_t> d_w(blocks);
      DeviceArray<uint16_t> d_out(rows * k);
      kernels::DequantizeGgufParams p;
      p.w = d_w.get();
      p.out = d_out.get();
      p.rows = rows;
      p.k = k;
      p.type = type;
      p.dtype = dtype;
      CUDA_ASSERT_OK(kernels::LaunchDequantizeGguf(p, nullptr));
      CUDA_ASSERT_OK(cudaDeviceSynchronize());
      const std::vector<uint16_t> got = d_out.Download();
      int64_t mismatches = 0;
      for (int64_t i = 0; i < rows * k; ++i) {
        const uint16_t want = ToHalf(values[i], dtype);
        const bool both_nan = std::isnan(values[i]) && std::isnan(FromHalf(got[i], dtype));
        if (got[i] != want && !both_nan && ++mismatches <= 3) {
          ADD_FAILURE() << "value " << i << ": got bits " << got[i] << ", want " << want;
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

// Refused before any device work, so these run without a GPU too.
TEST(QuantGemvKernel, RejectsBadParams) {
  void* const fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  kernels::QuantGemvParams good;
  good.x = fake;
  good.w = fake;
  good.y = fake;
  good.m = 1;
  good.n = 16;
  good.k = 256;
  good.ldy = 16;
  good.type = GgufBlockType::kQ4_K;
  auto refused = [](kernels::QuantGemvParams p) {
    return kernels::LaunchQuantGemv(p, nullptr) == cudaErrorInvalidValue;
  };
  kernels::QuantGemvParams p = good;
  p.x = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.w = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.y = nullptr;
  EXPECT_TRUE(refused(p));
  p = good;
  p.x = static_cast<char*>(fake) + 8;  // not 16-byte aligned
  EXPECT_TRUE(refused(p));
  for (int64_t m : {0, 9}) {
    p = good;
    p.m = m;
    EXPECT_TRUE(refused(p)) << "m=" << m;
  }
  p = good;
  p.n = 0;
  EXPECT_TRUE(refused(p));
  for (int64_t k : {0, 32, 128, 300}) {  // Q4_K's block is 256 values
    p = good;
    p.k = k;
    EXPECT_TRUE(refused(p)) << "k=" << k;
  }
  p = good;
  p.ldy = 15;
  EXPECT_TRUE(refused(p));
  p = good;
  p.type = static_cast<GgufBlockType>(9);  // Q8_1: not one the kernels run
  EXPECT_TRUE(refused(p));

  kernels::DequantizeGgufParams d;
  d.w = fake;
  d.out = static_cast<char*>(fake) + 2;
  d.rows = 1;
  d.k = 32;
  EXPECT_EQ(kernels::LaunchDequantizeGguf(d, nullptr), cudaErrorInvalidValue);
  d.out = fake;
  d.k = 48;
  EXPECT_EQ(kernels::LaunchDequantizeGguf(d, nullptr), cudaErrorInvalidValue);
}

TEST(GemmLinearQuant, RefusesManyRowsWithoutScratch) {
  CONVOY_SKIP_WITHOUT_GPU();
  auto gemm = cuda::Gemm::Create(nullptr, 0, 0);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  void* const fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  const absl::Status status = (*gemm)->LinearQuant(fake, fake, GgufBlockType::kQ8_0, fake, 9, 4, 64,
                                                   4, HalfType::kBF16, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(
      (*gemm)
          ->LinearQuant(fake, fake, GgufBlockType::kQ8_0, fake, 1, 4, 48, 4, HalfType::kBF16, true)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convoy
