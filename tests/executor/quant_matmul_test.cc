// The product on GGUF blocks (quant_matmul.h): against a double-precision product of the
// dequantized weights and the unquantized activations (accuracy, within the bound 8-bit
// activations imply), and bit for bit across code paths, row counts, row positions and thread
// counts (the contract); corrupt scales; the activations' quantization.
#include "executor/cpu/quant_matmul.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "executor/cpu/quant_packed.h"
#include "gtest/gtest.h"
#include "model/gguf_dequantize.h"

namespace convoy {
namespace {

// What a test needs to know of a type: its block, where its fp16 fields are (every other bit
// pattern of a block is a valid one), and the largest |s * q| + |mn| of a value per unit of d
// (d_amplitude) and of dmin (dmin_amplitude), from quant_matmul.h's table.
struct TypeCase {
  GgmlType type;
  const char* name;
  int block_elements, block_bytes;
  int d_at, dmin_at;  // byte offsets; dmin_at -1 where there is none (Q4_1/Q5_1's m is dmin's)
  double d_amplitude, dmin_amplitude;
};

const TypeCase kTypes[] = {
    {GgmlType::kQ4_0, "Q4_0", 32, 18, 0, -1, 15 + 8, 0},
    {GgmlType::kQ4_1, "Q4_1", 32, 20, 0, 2, 15, 1},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, 0, -1, 31 + 16, 0},
    {GgmlType::kQ5_1, "Q5_1", 32, 24, 0, 2, 31, 1},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, 0, -1, 128, 0},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, 80, 82, 15 * 3, 15},
    {GgmlType::kQ3_K, "Q3_K", 256, 110, 108, -1, 32 * 7 + 4 * 32, 0},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, 0, 2, 63 * 15, 63},
    {GgmlType::kQ5_K, "Q5_K", 256, 176, 0, 2, 63 * 31, 63},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, 208, -1, 128 * 63 + 32 * 128, 0},
};

std::string TypeName(const ::testing::TestParamInfo<TypeCase>& info) { return info.param.name; }

uint16_t HalfBits(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return bits;
}

void SetHalf(std::byte* p, uint16_t bits) { std::memcpy(p, &bits, 2); }

// n rows of k values: random blocks, with per value the bound on |s * q| + |mn| its block allows.
struct Weights {
  std::vector<std::byte> storage;  // one byte more than the rows: they start at storage + 1
  std::vector<double> amplitude;   // n * k
  int64_t row_bytes = 0;

  const std::byte* data() const { return storage.data() + 1; }
  std::byte* data() { return storage.data() + 1; }
};

// Blocks of random bytes whose fp16 fields are: mostly random finite halves in a sane range
// (|d| up to about 0.06), and with `extremes` some largest finite (65504), smallest normal
// (2^-14) or subnormal ones, and some all-zero blocks.
Weights RandomWeights(const TypeCase& t, int64_t n, int64_t k, uint32_t seed, bool extremes) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sane(1.0f / 1024, 1.0f / 16);
  std::uniform_int_distribution<int> pick(0, 19);
  std::uniform_int_distribution<int> subnormal(1, 0x3FF);
  Weights weights;
  weights.row_bytes = k / t.block_elements * t.block_bytes;
  weights.storage.resize(n * weights.row_bytes + 1);
  weights.amplitude.resize(n * k);
  for (int64_t b = 0; b < n * k / t.block_elements; ++b) {
    std::byte* block = weights.data() + b * t.block_bytes;
    const int kind = extremes ? pick(rng) : 0;
    for (int i = 0; i < t.block_bytes; ++i) block[i] = static_cast<std::byte>(byte(rng));
    if (kind == 19) std::memset(block, 0, t.block_bytes);
    for (int at : {t.d_at, t.dmin_at}) {
      if (at < 0 || kind == 19) continue;
      uint16_t bits = FloatToFP16(sane(rng) * (byte(rng) < 128 ? -1.0f : 1.0f));
      if (kind == 16) bits = 0x7BFF;  // 65504
      if (kind == 17) bits = 0x0400;  // 2^-14
      if (kind == 18) bits = static_cast<uint16_t>(subnormal(rng));
      SetHalf(block + at, bits | static_cast<uint16_t>(byte(rng) < 128 ? 0x8000 : 0));
    }
    const double d = std::abs(FP16ToFloat(HalfBits(block + t.d_at)));
    const double dmin = t.dmin_at < 0 ? 0.0 : std::abs(FP16ToFloat(HalfBits(block + t.dmin_at)));
    std::fill_n(weights.amplitude.begin() + b * t.block_elements, t.block_elements,
                d * t.d_amplitude + dmin * t.dmin_amplitude);
  }
  return weights;
}

// Values in [-1, 1); with `specials`, row 1 has one huge value and row 2 is all zeros.
std::vector<float> RandomActivations(int64_t m, int64_t k, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(m * k);
  for (float& v : x) v = value(rng);
  if (specials && m > 2) {
    x[1 * k + k / 3] = 3.0e4f;
    std::fill_n(x.begin() + 2 * k, k, 0.0f);
  }
  return x;
}

std::vector<float> Product(const TypeCase& t, const Weights& w, int64_t n, int64_t k,
                           const std::vector<float>& x, int64_t m, QuantPath path) {
  QuantizedRows rows;
  rows.Quantize(x.data(), m, k);
  std::vector<float> y(m * n);
  QuantMatmul(t.type, w.data(), n, k, rows, y.data(), n, path);
  return y;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

class QuantMatmulTest : public ::testing::TestWithParam<TypeCase> {};

// The bound. x is rounded to x' = dx * xq with |x' - x| <= dx / 2 (dx its group's or its
// superblock's scale, as the type's contract quantizes it), plus
// 2^-16 dx for the rounding of x * (127 / amax) before it is rounded to an integer; the product
// then computes sum of (s q + mn) x' with fp32 arithmetic. Each output lane is a chain of k / 32
// (or k / 128) fused multiply-adds, then 4 additions; with each fp32 factor (d * dx, m * dx * S)
// rounded once, every term is off by at most (k / 32 + 8) units of 2^-24 of the sum of the terms'
// magnitudes, which the amplitude bounds: |s q| + |mn| <= amplitude, |x'| <= |x| + dx. The
// dequantizer's own rounding of s q + mn (two roundings) fits in the same budget, doubled:
//   |y - ref| <= sum |w_i| dx_i (1/2 + 2^-16) + 2 (k / 32 + 8) 2^-24 sum amplitude_i (|x_i| + dx_i)
// m = 1 runs the one-row kernels (every type, on the VNNI and the AVX2 paths), m = 7 the tile
// kernels.
void ExpectWithinTheBound(const TypeCase& t, QuantPath path) {
  const int64_t k = t.block_elements == 32 ? 32 * 37 : 256 * 5, n = 23;
  for (int64_t m : {1, 7}) {
    SCOPED_TRACE(testing::Message() << "m " << m);
    double worst = 0.0;
    for (bool extremes : {false, true}) {
      const Weights w = RandomWeights(t, n, k, 11 + extremes, extremes);
      const std::vector<float> x = RandomActivations(m, k, 7 + extremes, /*specials=*/true);
      QuantizedRows rows;
      rows.Quantize(x.data(), m, k);
      std::vector<float> y(m * n);
      QuantMatmul(t.type, w.data(), n, k, rows, y.data(), n, path);
      std::vector<float> dequantized(k);
      for (int64_t j = 0; j < n; ++j) {
        DequantizeValues(t.type, w.data() + j * w.row_bytes, k, dequantized.data());
        for (int64_t r = 0; r < m; ++r) {
          double ref = 0.0, rounding = 0.0, slack = 0.0;
          for (int64_t i = 0; i < k; ++i) {
            const double xi = x[r * k + i], wi = dequantized[i];
            const double dx = QuantUsesSuperblocks(t.type) ? rows.superblock_scales(r)[i / 256]
                                                           : rows.scales(r)[i / 32];
            ref += wi * xi;
            rounding += std::abs(wi) * dx * (0.5 + 0x1p-16);
            slack += w.amplitude[j * k + i] * (std::abs(xi) + dx);
          }
          const double bound = rounding + 2.0 * (k / 32 + 8) * 0x1p-24 * slack;
          const double error = std::abs(y[r * n + j] - ref);
          ASSERT_LE(error, bound) << "row " << r << " output " << j << ": " << y[r * n + j]
                                  << " against " << ref;
          if (bound > 0) worst = std::max(worst, error / bound);
        }
      }
    }
    std::cout << t.name << " m " << m << ": worst error / bound " << worst << "\n";
  }
}

TEST_P(QuantMatmulTest, MatchesTheDequantizedProductWithinTheBound) {
  ExpectWithinTheBound(GetParam(), QuantPath::kBest);
  if (QuantPathAvailable(QuantPath::kAvx512Vnni))
    ExpectWithinTheBound(GetParam(), QuantPath::kAvx2);
  ExpectWithinTheBound(GetParam(), QuantPath::kPortable);
}

// Odd numbers of blocks per row, and weight row counts that leave partial groups of 16.
int64_t OddK(const TypeCase& t) { return t.block_elements == 32 ? 32 * 11 : 256 * 3; }

TEST_P(QuantMatmulTest, BothPathsGiveTheSameBits) {
  const TypeCase& t = GetParam();
  const int64_t k = OddK(t);
  for (int64_t n : {1, 6, 13}) {
    const Weights w = RandomWeights(t, n, k, 3, /*extremes=*/true);
    for (int64_t m : {1, 3, 17}) {
      const std::vector<float> x = RandomActivations(m, k, 5, /*specials=*/true);
      const std::vector<float> best = Product(t, w, n, k, x, m, QuantPath::kBest);
      const std::vector<float> avx2 = Product(t, w, n, k, x, m, QuantPath::kAvx2);
      const std::vector<float> portable = Product(t, w, n, k, x, m, QuantPath::kPortable);
      EXPECT_TRUE(SameBits(best, portable)) << "n " << n << " m " << m;
      EXPECT_TRUE(SameBits(avx2, portable)) << "n " << n << " m " << m;
    }
  }
}

// The AVX-512 VNNI kernels against the AVX2 ones (and the portable one): the one-row kernels
// (m = 1: every type) and the others, with an odd and an even number of blocks per row, and 1 to
// 13 weight rows in the last group of 16.
TEST_P(QuantMatmulTest, TheVnniPathGivesTheAvx2PathsBits) {
  if (!QuantPathAvailable(QuantPath::kAvx2)) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  if (!QuantPathAvailable(QuantPath::kAvx512Vnni)) {
    GTEST_SKIP() << "this CPU lacks AVX-512 VNNI (or AVX-512 F, BW or VL): avx512vnni";
  }
  const TypeCase& t = GetParam();
  ExpectWithinTheBound(t, QuantPath::kAvx512Vnni);
  for (int64_t k : {OddK(t), OddK(t) + t.block_elements}) {
    for (int64_t n : {1, 3, 6, 13}) {
      const Weights w = RandomWeights(t, n, k, 3 + static_cast<uint32_t>(k), /*extremes=*/true);
      for (int64_t m : {1, 3, 17}) {
        const std::vector<float> x = RandomActivations(m, k, 5, /*specials=*/true);
        const std::vector<float> vnni = Product(t, w, n, k, x, m, QuantPath::kAvx512Vnni);
        const std::vector<float> avx2 = Product(t, w, n, k, x, m, QuantPath::kAvx2);
        const std::vector<float> portable = Product(t, w, n, k, x, m, QuantPath::kPortable);
        EXPECT_TRUE(SameBits(vnni, avx2)) << "k " << k << " n " << n << " m " << m;
        EXPECT_TRUE(SameBits(vnni, portable)) << "k " << k << " n " << n << " m " << m;
      }
    }
  }
}

TEST_P(QuantMatmulTest, ARowsOutputsDoNotDependOnTheOtherRowsNorOnTheThreads) {
  const TypeCase& t = GetParam();
  // Large enough to run on several threads: (m + 4) n k >= 2^18 for m = 1.
  const int64_t k = t.block_elements == 32 ? 32 * 33 : 256 * 4, n = 101, m = 9;
  const Weights w = RandomWeights(t, n, k, 9, /*extremes=*/true);
  const std::vector<float> x = RandomActivations(m, k, 13, /*specials=*/true);
  const int threads = omp_get_max_threads();
  std::vector<float> one_thread;
  for (int team : {1, 2}) {
    omp_set_num_threads(team);
    const std::vector<float> all = Product(t, w, n, k, x, m, QuantPath::kBest);
    for (int64_t r : {0, 1, 4, 8}) {
      const std::vector<float> one(x.begin() + r * k, x.begin() + (r + 1) * k);
      const std::vector<float> alone = Product(t, w, n, k, one, 1, QuantPath::kBest);
      const std::vector<float> row(all.begin() + r * n, all.begin() + (r + 1) * n);
      EXPECT_TRUE(SameBits(alone, row)) << "row " << r << ", " << team << " threads";
    }
    // Rows moved to other positions among other rows.
    std::vector<float> shuffled = RandomActivations(m, k, 17, false);
    std::copy_n(x.begin() + 4 * k, k, shuffled.begin() + 7 * k);
    const std::vector<float> other = Product(t, w, n, k, shuffled, m, QuantPath::kBest);
    EXPECT_TRUE(std::equal(other.begin() + 7 * n, other.begin() + 8 * n, all.begin() + 4 * n,
                           [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }));
    if (team == 1) one_thread = all;
    if (team == 2) {
      EXPECT_TRUE(SameBits(one_thread, all)) << "1 thread against 2";
    }
  }
  omp_set_num_threads(threads);
}

TEST_P(QuantMatmulTest, NonFiniteScalesSpoilOnlyTheOutputsThatReadThem) {
  const TypeCase& t = GetParam();
  const int64_t k = OddK(t), n = 9, m = 4;
  Weights w = RandomWeights(t, n, k, 21, /*extremes=*/false);
  const int64_t blocks_per_row = k / t.block_elements;
  // Row 2: an infinite d in its second block; row 5: a NaN d in its last; row 7: an infinite
  // dmin (or m), where the type has one.
  SetHalf(w.data() + 2 * w.row_bytes + 1 * t.block_bytes + t.d_at, 0xFC00);
  SetHalf(w.data() + 5 * w.row_bytes + (blocks_per_row - 1) * t.block_bytes + t.d_at, 0x7E00);
  std::vector<int64_t> spoiled = {2, 5};
  if (t.dmin_at >= 0) {
    SetHalf(w.data() + 7 * w.row_bytes + t.dmin_at, 0x7C00);
    spoiled.push_back(7);
  }
  const std::vector<float> x = RandomActivations(m, k, 23, /*specials=*/true);
  for (QuantPath path :
       {QuantPath::kAvx512Vnni, QuantPath::kAvx2, QuantPath::kBest, QuantPath::kPortable}) {
    const std::vector<float> y = Product(t, w, n, k, x, m, path);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        const bool bad = std::find(spoiled.begin(), spoiled.end(), j) != spoiled.end();
        EXPECT_EQ(std::isfinite(y[r * n + j]), !bad) << "row " << r << " output " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantMatmulTest, ::testing::ValuesIn(kTypes), TypeName);

TEST(QuantMatmulTest, SupportsTheQuantizedTypesOnly) {
  for (const TypeCase& t : kTypes) EXPECT_TRUE(QuantMatmulSupports(t.type)) << t.name;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType(15)}) {
    EXPECT_FALSE(QuantMatmulSupports(type)) << static_cast<int>(type);
  }
}

TEST(QuantMatmulTest, WritesOnlyItsOutputsWithALeadingDimension) {
  const TypeCase& t = kTypes[7];  // Q4_K
  const int64_t k = 512, n = 6, m = 3, ldy = 10;
  const Weights w = RandomWeights(t, n, k, 1, false);
  const std::vector<float> x = RandomActivations(m, k, 2, false);
  QuantizedRows rows;
  rows.Quantize(x.data(), m, k);
  std::vector<float> y(m * ldy, -7.0f);
  QuantMatmul(t.type, w.data(), n, k, rows, y.data(), ldy);
  const std::vector<float> dense = Product(t, w, n, k, x, m, QuantPath::kBest);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < ldy; ++j) {
      if (j < n) {
        EXPECT_EQ(y[r * ldy + j], dense[r * n + j]);
      } else {
        EXPECT_EQ(y[r * ldy + j], -7.0f);
      }
    }
  }
}

// The contract's quantization of one group, written out as the header says it, in doubles where
// that is exact (127 / amax and x * (127 / amax) are rounded to float, as the contract's fp32).
void ReferenceGroup(const float* x, int8_t* xq, float* dx, int* sum) {
  float amax = 0.0f;
  bool nan = false;
  for (int i = 0; i < 32; ++i) {
    nan = nan || std::isnan(x[i]);
    amax = std::max(amax, std::abs(x[i]));
  }
  if (nan) {  // the scale is NaN, the rest unspecified
    *dx = std::nanf("");
    return;
  }
  if (amax < 0x1p-100f) {
    std::fill_n(xq, 32, 0);
    *dx = 0.0f;
    *sum = 0;
    return;
  }
  const float inverse = 127.0f / amax;
  *dx = amax / 127.0f;
  *sum = 0;
  for (int i = 0; i < 32; ++i) {
    const float v = x[i] * inverse;
    xq[i] =
        std::isnan(v) ? -127 : static_cast<int8_t>(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
    *sum += xq[i];
  }
}

// Every group against the reference, bit for bit (NaN groups: the scale is NaN, as the header
// says).
TEST(QuantizedRowsTest, GivesTheContractsBits) {
  const int64_t k = 32 * 64;
  std::vector<float> x = RandomActivations(3, k, 31, false);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> half_integer(-254, 254);
  for (int64_t g = 0; g < 3 * k / 32; ++g) {
    float* group = x.data() + 32 * g;
    switch (g % 8) {
      case 1:  // amax 127: every x * (127 / amax) is x, half-integers are ties
        for (int i = 0; i < 32; ++i) group[i] = static_cast<float>(half_integer(rng)) / 2.0f;
        group[7] = -127.0f;
        break;
      case 2:
        group[g % 32] = std::numeric_limits<float>::infinity();
        break;
      case 3:
        group[(g * 7) % 32] = std::nanf("");
        break;
      case 4:  // below the smallest scaled group
        for (int i = 0; i < 32; ++i) group[i] *= 0x1p-101f;
        break;
      case 5:  // scaled to the largest floats
        for (int i = 0; i < 32; ++i) group[i] *= 0x1p127f;
        break;
      default:
        break;
    }
  }
  QuantizedRows rows;
  rows.Quantize(x.data(), 3, k);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t g = 0; g < k / 32; ++g) {
      int8_t xq[32];
      float dx;
      int sum;
      ReferenceGroup(x.data() + r * k + 32 * g, xq, &dx, &sum);
      if (std::isnan(dx)) {
        EXPECT_TRUE(std::isnan(rows.scales(r)[g])) << "row " << r << " group " << g;
        continue;
      }
      EXPECT_EQ(std::memcmp(xq, rows.values(r) + 32 * g, 32), 0) << "row " << r << " group " << g;
      EXPECT_EQ(std::memcmp(&dx, rows.scales(r) + g, 4), 0) << "row " << r << " group " << g;
      EXPECT_EQ(rows.group_sums(r)[g], sum) << "row " << r << " group " << g;
    }
  }
}

TEST(QuantizedRowsTest, QuantizesEachGroupToItsLargestMagnitude) {
  const int64_t k = 96;
  std::vector<float> x = RandomActivations(2, k, 4, false);
  std::fill_n(x.begin() + 32, 32, 0.0f);    // row 0, group 1: zeros
  std::fill_n(x.begin() + 64, 32, 1e-35f);  // row 0, group 2: too small to scale
  x[k + 5] = -2.5f;                         // row 1, group 0: amax 2.5, at -127
  QuantizedRows rows;
  rows.Quantize(x.data(), 2, k);
  ASSERT_EQ(rows.m(), 2);
  ASSERT_EQ(rows.k(), k);
  for (int64_t g : {1, 2}) {
    EXPECT_EQ(rows.scales(0)[g], 0.0f);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(rows.values(0)[32 * g + i], 0);
    EXPECT_EQ(rows.group_sums(0)[g], 0);
  }
  EXPECT_EQ(rows.scales(1)[0], 2.5f / 127.0f);
  EXPECT_EQ(rows.values(1)[5], -127);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t g = 0; g < k / 32; ++g) {
      const float dx = rows.scales(r)[g];
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int64_t at = 32 * g + i;
        const int xq = rows.values(r)[at];
        EXPECT_LE(std::abs(xq), 127);
        if (dx > 0) {
          EXPECT_LE(std::abs(xq * dx - x[r * k + at]), dx * 0.5001f);
        }
        sum += xq;
      }
      EXPECT_EQ(rows.group_sums(r)[g], sum);
    }
  }
  // A NaN spoils its group's scale (and so every output that reads it), not its neighbours'.
  x[k + 40] = std::nanf("");
  rows.Quantize(x.data(), 2, k);
  EXPECT_TRUE(std::isnan(rows.scales(1)[1]));
  EXPECT_FALSE(std::isnan(rows.scales(1)[0]));
  EXPECT_FALSE(std::isnan(rows.scales(1)[2]));
  // Buffers are reused: a smaller quantization after a larger one keeps the data valid.
  rows.Quantize(x.data() + k, 1, k);
  EXPECT_EQ(rows.m(), 1);
  EXPECT_EQ(rows.values(0)[5], -127);
}

// ---- The superblock contract (Q2_K, Q3_K, Q4_K, Q5_K and Q6_K), written out from the header's
// words on the file's blocks: q, sc, mn, d and dm decoded here as model/gguf_dequantize.cc's
// comments lay the blocks out, the integer sums in int64, the fp32 steps in the header's order.
// Every path gives its bits.

struct SuperblockTerms {
  int q[256];
  int sc[16], mn[16];
  float d, dm;
};

SuperblockTerms DecodeSuperblock(GgmlType type, const std::byte* b) {
  const auto u8 = [b](int i) { return static_cast<int>(static_cast<uint8_t>(b[i])); };
  SuperblockTerms t;
  if (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K) {
    const bool fifth = type == GgmlType::kQ5_K;  // 32 bytes of fifth bits before the nibbles
    const int quants_at = fifth ? 48 : 16;
    t.d = FP16ToFloat(HalfBits(b));
    t.dm = -FP16ToFloat(HalfBits(b + 2));
    for (int s = 0; s < 8; ++s) {
      const int scale = s < 4 ? u8(4 + s) & 63 : (u8(4 + s + 4) & 15) | ((u8(4 + s - 4) >> 6) << 4);
      const int min = s < 4 ? u8(4 + s + 4) & 63 : (u8(4 + s + 4) >> 4) | ((u8(4 + s) >> 6) << 4);
      t.sc[2 * s] = t.sc[2 * s + 1] = scale;
      t.mn[2 * s] = t.mn[2 * s + 1] = min;
      for (int l = 0; l < 32; ++l) {
        const int byte = u8(quants_at + 32 * (s / 2) + l);
        t.q[32 * s + l] = s % 2 == 0 ? byte & 15 : byte >> 4;
        if (fifth) t.q[32 * s + l] |= ((u8(16 + l) >> s) & 1) << 4;
      }
    }
  } else if (type == GgmlType::kQ2_K || type == GgmlType::kQ3_K) {
    // Value 128h + 32j + l: bits 2j, 2j + 1 of quant byte 32h + l (at 16 in Q2_K, 32 in Q3_K).
    const bool third = type == GgmlType::kQ3_K;
    for (int v = 0; v < 256; ++v) {
      const int h = v / 128, j = (v % 128) / 32, l = v % 32;
      t.q[v] = (u8((third ? 32 : 16) + 32 * h + l) >> (2 * j)) & 3;
      if (third) t.q[v] |= ((u8(l) >> (4 * h + j)) & 1) << 2;  // the third bit: +4
    }
    if (third) {  // w = d (sc - 32) (q - 4): sc and mn are sc - 32, dm = -4 d
      t.d = FP16ToFloat(HalfBits(b + 108));
      t.dm = -4.0f * t.d;
      for (int s = 0; s < 16; ++s) {
        const int low = s < 8 ? u8(96 + s) & 15 : u8(96 + s - 8) >> 4;
        const int high = (u8(96 + 8 + s % 4) >> (2 * (s / 4))) & 3;
        t.sc[s] = t.mn[s] = (low | (high << 4)) - 32;
      }
    } else {  // w = d sc q - dmin mi
      t.d = FP16ToFloat(HalfBits(b + 80));
      t.dm = -FP16ToFloat(HalfBits(b + 82));
      for (int s = 0; s < 16; ++s) {
        t.sc[s] = u8(s) & 15;
        t.mn[s] = u8(s) >> 4;
      }
    }
  } else {  // Q6_K
    t.d = FP16ToFloat(HalfBits(b + 208));
    t.dm = -32.0f * t.d;
    for (int j = 0; j < 16; ++j) t.sc[j] = t.mn[j] = static_cast<int8_t>(b[192 + j]);
    for (int v = 0; v < 256; ++v) {
      const int h = v / 128, j = (v % 128) / 32, l = v % 32;
      const int low_byte = u8(64 * h + 32 * (j % 2) + l);
      const int low = j < 2 ? low_byte & 15 : low_byte >> 4;
      t.q[v] = low | (((u8(128 + 32 * h + l) >> (2 * j)) & 3) << 4);
    }
  }
  return t;
}

float SuperblockReference(GgmlType type, const std::byte* row, int64_t k, const QuantizedRows& x,
                          int64_t r) {
  const int64_t block_bytes = FindGgmlType(static_cast<uint32_t>(type))->block_bytes;
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const SuperblockTerms t = DecodeSuperblock(type, row + b * block_bytes);
    const int8_t* xq = x.superblock_values(r) + 256 * b;
    const int16_t* sums = x.superblock_sums(r) + 16 * b;
    int64_t total = 0, m = 0;
    for (int j = 0; j < 16; ++j) {
      int64_t p = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) p += t.q[i] * xq[i];
      total += t.sc[j] * p;
      m += t.mn[j] * sums[j];
    }
    EXPECT_LT(std::abs(total), int64_t{1} << 31);
    const float dxs = x.superblock_scales(r)[b];
    acc = std::fma(static_cast<float>(total), t.d * dxs, acc);
    acc = std::fma(static_cast<float>(m), t.dm * dxs, acc);
  }
  return acc;
}

// The interleaved group contract (the 32-value types), written out the same way: q with its bias
// (Q4_0's 8, Q5_0's 16), m where the type has one.
float InterleavedGroupReference(const TypeCase& t, const std::byte* row, int64_t k,
                                const QuantizedRows& x, int64_t r) {
  const bool has_m = t.type == GgmlType::kQ4_1 || t.type == GgmlType::kQ5_1;
  const bool fifth = t.type == GgmlType::kQ5_0 || t.type == GgmlType::kQ5_1;
  const int bias = t.type == GgmlType::kQ4_0 ? 8 : t.type == GgmlType::kQ5_0 ? 16 : 0;
  float acc = 0.0f;
  for (int64_t g = 0; g < k / 32; ++g) {
    const std::byte* block = row + g * t.block_bytes;
    const auto u8 = [block](int i) { return static_cast<int>(static_cast<uint8_t>(block[i])); };
    const int quants_at = 2 + (has_m ? 2 : 0) + (fifth ? 4 : 0);
    uint32_t high = 0;
    if (fifth) std::memcpy(&high, block + quants_at - 4, 4);
    int64_t p = 0, s = 0;
    for (int v = 0; v < 32; ++v) {
      int q;
      if (t.type == GgmlType::kQ8_0) {
        q = static_cast<int8_t>(block[2 + v]);
      } else {
        q = v < 16 ? u8(quants_at + v) & 15 : u8(quants_at + v - 16) >> 4;
        if (fifth) q |= static_cast<int>((high >> v) & 1) << 4;
        q -= bias;
      }
      p += q * x.values(r)[32 * g + v];
      s += x.values(r)[32 * g + v];
    }
    const float dx = x.scales(r)[g];
    acc = std::fma(static_cast<float>(p), FP16ToFloat(HalfBits(block)) * dx, acc);
    if (has_m) acc = std::fma(FP16ToFloat(HalfBits(block + 2)), dx * static_cast<float>(s), acc);
  }
  return acc;
}

TEST(PackedContractTest, EveryPathGivesTheContractWrittenOut) {
  for (const TypeCase& t : kTypes) {
    const int64_t k = 256 * 3;
    for (int64_t n : {1, 16, 21}) {
      const Weights w = RandomWeights(t, n, k, 41 + n, /*extremes=*/true);
      for (int64_t m : {1, 6}) {  // the one-row kernels and the tile ones
        const std::vector<float> x = RandomActivations(m, k, 43 + m, /*specials=*/true);
        QuantizedRows rows;
        rows.Quantize(x.data(), m, k);
        std::vector<float> expected(m * n);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            const std::byte* row = w.data() + j * w.row_bytes;
            expected[r * n + j] = QuantUsesSuperblocks(t.type)
                                      ? SuperblockReference(t.type, row, k, rows, r)
                                      : InterleavedGroupReference(t, row, k, rows, r);
          }
        }
        for (QuantPath path : {QuantPath::kAvx512Vnni, QuantPath::kAvx2, QuantPath::kPortable}) {
          if (!QuantPathAvailable(path)) continue;
          EXPECT_TRUE(SameBits(Product(t, w, n, k, x, m, path), expected))
              << t.name << " n " << n << " m " << m << " path " << static_cast<int>(path);
        }
      }
    }
  }
}

// Every superblock of 256 against the group reference's rule over 256 values.
TEST(QuantizedRowsTest, GivesTheSuperblockFormsBits) {
  const int64_t k = 256 * 6;
  std::vector<float> x = RandomActivations(2, k, 51, false);
  for (int i = 0; i < 256; ++i) x[256 + i] = static_cast<float>(i % 255 - 127) / 2.0f;  // ties
  x[2 * 256 + 17] = std::numeric_limits<float>::infinity();
  x[3 * 256 + 200] = std::nanf("");
  for (int i = 0; i < 256; ++i) x[4 * 256 + i] *= 0x1p-101f;  // below the smallest scale
  QuantizedRows rows;
  rows.Quantize(x.data(), 2, k);
  ASSERT_TRUE(rows.has_superblocks());
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t b = 0; b < k / 256; ++b) {
      const float* values = x.data() + r * k + 256 * b;
      float amax = 0.0f;
      bool nan = false;
      for (int i = 0; i < 256; ++i) {
        nan = nan || std::isnan(values[i]);
        amax = std::max(amax, std::abs(values[i]));
      }
      const float dxs = rows.superblock_scales(r)[b];
      if (nan) {
        EXPECT_TRUE(std::isnan(dxs)) << "row " << r << " superblock " << b;
        continue;
      }
      const bool zero = amax < 0x1p-100f;
      EXPECT_EQ(dxs, zero ? 0.0f : amax / 127.0f) << "row " << r << " superblock " << b;
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) {
          const float v = zero ? 0.0f : values[i] * (127.0f / amax);
          const int expected =
              std::isnan(v) ? -127
                            : static_cast<int>(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
          EXPECT_EQ(rows.superblock_values(r)[256 * b + i], expected) << "value " << i;
          sum += expected;
        }
        EXPECT_EQ(rows.superblock_sums(r)[16 * b + j], sum) << "sub-block " << j;
      }
    }
  }
  rows.Quantize(x.data(), 2, k, /*superblocks=*/false);
  EXPECT_FALSE(rows.has_superblocks());
  rows.Quantize(x.data(), 1, 32 * 9);  // not a multiple of 256
  EXPECT_FALSE(rows.has_superblocks());
}

// The held matrix gives back the file's rows, whatever n is against the 16 rows of a packed group.
TEST(QuantWeightsTest, GivesBackEveryRowAsTheFileStoresIt) {
  for (const TypeCase& t : kTypes) {
    const int64_t k = t.block_elements == 32 ? 32 * 5 : 256 * 2;
    for (int64_t n : {1, 15, 16, 17, 40}) {
      const Weights w = RandomWeights(t, n, k, 61, /*extremes=*/true);
      const QuantWeights held(t.type, w.data(), n, k);
      EXPECT_EQ(held.row_bytes(), w.row_bytes);
      // Groups of 16 rows, the last one filled with zero blocks.
      const int64_t expected = (n + 15) / 16 * 16 * w.row_bytes;
      EXPECT_EQ(held.bytes(), expected) << t.name << " n " << n;
      std::vector<std::byte> row(w.row_bytes);
      for (int64_t j = 0; j < n; ++j) {
        held.CopyRow(j, row.data());
        EXPECT_EQ(std::memcmp(row.data(), w.data() + j * w.row_bytes, w.row_bytes), 0)
            << t.name << " n " << n << " row " << j;
      }
    }
  }
}

}  // namespace
}  // namespace convoy
