#include "executor/cpu/quant_matmul.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "executor/cpu/quant_packed.h"

// The activations' quantization is compiled for AVX2 + FMA whatever the build's -march, and only
// called after Avx2Available() said the CPU has them.
#define CONVOY_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))

namespace convoy {
namespace {

// A group whose largest magnitude is below this quantizes to zeros: 127 / amax stays finite.
constexpr float kMinGroupMax = 0x1p-100f;
// Below this much work ((m + 4) * n * k) a product runs on the calling thread: waking the team
// costs more. The 4 stands for the unpacking, done once per weight tile.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

// F16C too: the kernels convert the blocks' fp16 scales with it (every CPU with AVX2 has it).
// Asked of CPUID leaf 1 directly: clang 14's __builtin_cpu_supports knows no "f16c".
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool Avx2Available() {
  static const bool available =
      HasF16c() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

// __builtin_cpu_supports reports the AVX-512 features only where the OS saves their state.
bool Avx512VnniAvailable() {
  static const bool available =
      Avx2Available() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return available;
}

// kBest resolved: the fastest path the CPU has, capped by CONVOY_QUANT_PATH.
QuantPath BestPath() {
  static const QuantPath best = [] {
    const char* cap = std::getenv("CONVOY_QUANT_PATH");
    if (cap != nullptr && std::strcmp(cap, "portable") == 0) return QuantPath::kPortable;
    if (cap != nullptr && std::strcmp(cap, "avx2") == 0) return QuantPath::kAvx2;
    if (cap != nullptr && *cap != '\0') {
      // No logger at this layer (the fuzzers link it alone): one line on stderr, once.
      std::fprintf(stderr, "CONVOY_QUANT_PATH=%s is neither avx2 nor portable: ignored\n", cap);
    }
    return QuantPath::kAvx512Vnni;
  }();
  return best;
}

// The path that runs: `path`, or the next one below it the CPU has.
QuantPath Resolve(QuantPath path) {
  if (path == QuantPath::kBest) path = BestPath();
  if (path == QuantPath::kAvx512Vnni && !Avx512VnniAvailable()) path = QuantPath::kAvx2;
  if (path == QuantPath::kAvx2 && !Avx2Available()) path = QuantPath::kPortable;
  return path;
}

// Round to nearest, ties to even, for |v| <= 2^22: adding 1.5 * 2^23 leaves no fraction bits.
float RoundHalfEven(float v) {
  constexpr float kShift = 0x1.8p23f;
  return (v + kShift) - kShift;
}

// `count` activations quantized as the header's contracts say (a group of 32 or a superblock of
// 256): xq, and the scale returned (0 for values that quantize to zeros).
float QuantizeValues(const float* x, int count, int8_t* xq) {
  float amax = 0.0f;
  bool nan = false;
  for (int i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
    nan = nan || a != a;
  }
  if (nan) amax = std::numeric_limits<float>::quiet_NaN();  // a NaN stays
  if (amax < kMinGroupMax) {
    std::memset(xq, 0, count);
    return 0.0f;
  }
  const float inverse = 127.0f / amax;
  for (int i = 0; i < count; ++i) {
    float v = x[i] * inverse;
    v = v > -127.0f ? v : -127.0f;  // NaN clamps to -127
    v = v < 127.0f ? v : 127.0f;
    xq[i] = static_cast<int8_t>(RoundHalfEven(v));
  }
  return amax / 127.0f;
}

int IntegerSum(const int8_t* xq, int count) {
  int sum = 0;
  for (int i = 0; i < count; ++i) sum += xq[i];
  return sum;
}

// One superblock of 256 activations, as the superblock contract says.
void QuantizeSuperblock(const float* x, int8_t* xq, float* dxs, int16_t* sums) {
  *dxs = QuantizeValues(x, 256, xq);
  for (int j = 0; j < 16; ++j) sums[j] = static_cast<int16_t>(IntegerSum(xq + 16 * j, 16));
}

// QuantizeValues' bits for a group of 32 with AVX2, for a group without NaN (false, and nothing
// written, for one with). The same operations lane by lane: max and min clamp as its comparisons do
// (a NaN product, inf * 0 where x holds an infinity, becomes -127), and the conversion rounds to
// nearest even as RoundHalfEven does for |v| <= 127; the amax is a maximum, whatever the order.
CONVOY_TARGET_AVX2_FMA bool QuantizeGroupAvx2(const float* x, int8_t* xq, float* dx) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 a = _mm256_and_ps(v[i], magnitude);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    amax = _mm256_max_ps(amax, a);
  }
  if (_mm256_movemask_ps(nan) != 0) return false;
  __m128 max4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
  const float group_max = _mm_cvtss_f32(_mm_max_ss(max4, _mm_movehdup_ps(max4)));
  if (group_max < kMinGroupMax) {
    std::memset(xq, 0, 32);
    *dx = 0.0f;
    return true;
  }
  const float scale = group_max / 127.0f;
  const __m256 inverse = _mm256_set1_ps(127.0f / group_max);
  const __m256 low = _mm256_set1_ps(-127.0f), high = _mm256_set1_ps(127.0f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], inverse), low), high);
    q[i] = _mm256_cvtps_epi32(clamped);
  }
  // The packs interleave 128-bit lanes: 32-bit words 0, 4, 1, 5, ... hold values 0-3, 4-7, ...
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  const __m256i ordered =
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq), ordered);
  *dx = scale;
  return true;
}

}  // namespace

bool QuantMatmulSupports(GgmlType type) { return quant::IsPackedType(type); }

bool QuantPathAvailable(QuantPath path) {
  switch (path) {
    case QuantPath::kAvx512Vnni:
      return Avx512VnniAvailable();
    case QuantPath::kAvx2:
      return Avx2Available();
    default:
      return true;
  }
}

bool QuantUsesSuperblocks(GgmlType type) { return quant::IsSuperblockType(type); }

void QuantizedRows::Quantize(const float* x, int64_t m, int64_t k, bool superblocks) {
  m_ = m;
  k_ = k;
  const bool avx2 = Resolve(QuantPath::kBest) != QuantPath::kPortable;
  const int64_t groups = k / kGroup;
  values_.resize(m * k);
  scales_.resize(m * groups);
  for (int64_t g = 0; g < m * groups; ++g) {
    const float* group = x + g * kGroup;
    int8_t* xq = values_.data() + g * kGroup;
    if (!avx2 || !QuantizeGroupAvx2(group, xq, &scales_[g])) {
      scales_[g] = QuantizeValues(group, kGroup, xq);
    }
  }
  group_sums_.resize(m * groups);
  for (int64_t i = 0; i < m * groups; ++i) {
    group_sums_[i] = IntegerSum(values_.data() + i * kGroup, kGroup);
  }
  has_superblocks_ = superblocks && k % kSuperblock == 0;
  if (!has_superblocks_) return;
  const int64_t blocks = k / kSuperblock;
  sb_values_.resize(m * k);
  sb_scales_.resize(m * blocks);
  sb_sums_.resize(m * (k / 16));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      QuantizeSuperblock(x + r * k + b * kSuperblock, sb_values_.data() + r * k + b * kSuperblock,
                         sb_scales_.data() + r * blocks + b,
                         sb_sums_.data() + r * (k / 16) + 16 * b);
    }
  }
}

void QuantWeights::Free::operator()(std::byte* p) const { std::free(p); }

QuantWeights::QuantWeights(GgmlType type, const std::byte* rows, int64_t n, int64_t k)
    : type_(type), n_(n), k_(k) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(type));
  row_bytes_ = k / info.block_elements * info.block_bytes;
  bytes_ = quant::PackedBytes(type, n, k);
  data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes_ + 63) / 64 * 64)));
  if (data_ == nullptr) throw std::bad_alloc();
  quant::PackRows(type, rows, n, k, data_.get());
}

void QuantWeights::CopyRow(int64_t j, std::byte* out) const {
  quant::CopyPackedRow(type_, data_.get(), k_, j, out);
}

void QuantMatmul(const QuantWeights& w, const QuantizedRows& x, float* y, int64_t ldy,
                 QuantPath path) {
  const int64_t m = x.m(), n = w.n(), k = w.k();
  if (m <= 0 || n <= 0) return;
  const QuantPath run = Resolve(path);
  const int64_t groups = (n + quant::kPackedRows - 1) / quant::kPackedRows;
#pragma omp parallel if ((m + 4) * n * k >= kMinParallelWork)
  {
    // Each thread takes a contiguous run of groups, as schedule(static) would.
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t first = groups * thread / threads, end = groups * (thread + 1) / threads;
    if (first < end) {
      quant::PackedMatmul(w.type(), w.data(), n, k, x, y, ldy, run, first, end);
    }
  }
}

void QuantMatmul(GgmlType type, const std::byte* w, int64_t n, int64_t k, const QuantizedRows& x,
                 float* y, int64_t ldy, QuantPath path) {
  if (x.m() <= 0 || n <= 0) return;
  QuantMatmul(QuantWeights(type, w, n, k), x, y, ldy, path);
}

}  // namespace convoy
