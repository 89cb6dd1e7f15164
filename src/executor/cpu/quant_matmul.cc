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
#include "executor/cpu/quant_unpack.h"
#include "executor/cpu/quant_vnni.h"

// The kernel is compiled for AVX2 + FMA whatever the build's -march, and only called after
// Avx2Available() said the CPU has them (and F16C, for quant_unpack.cc's one-row kernels).
#define CONVOY_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))

namespace convoy {
namespace {

using quant::TileFn;
using quant::UnpackedRow;

// A group whose largest magnitude is below this quantizes to zeros: 127 / amax stays finite.
constexpr float kMinGroupMax = 0x1p-100f;
// Weight rows unpacked together: each activation row runs against all of them while its group
// is in registers.
constexpr int kTileRows = 4;
// Below this much work ((m + 4) * n * k) a product runs on the calling thread: waking the team
// costs more. The 4 stands for the unpacking, done once per weight.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

bool Avx2Available() {
  // F16C too: the one-row kernels convert the blocks' fp16 scales with it (every CPU with AVX2
  // has it). Asked of CPUID leaf 1 directly: clang 14's __builtin_cpu_supports knows no "f16c".
  static const bool available = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
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
  if (path == QuantPath::kAvx512Vnni && !quant::Avx512VnniAvailable()) path = QuantPath::kAvx2;
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

// One group of 32 activations, as the group contract says.
void QuantizeGroup(const float* x, int8_t* xq, float* dx, float* half_sums) {
  const float scale = QuantizeValues(x, 32, xq);
  for (int h = 0; h < 2; ++h)
    half_sums[h] = scale * static_cast<float>(IntegerSum(xq + 16 * h, 16));
  *dx = scale;
}

// One superblock of 256 activations, as the superblock contract says.
void QuantizeSuperblock(const float* x, int8_t* xq, float* dxs, int16_t* sums) {
  *dxs = QuantizeValues(x, 256, xq);
  for (int j = 0; j < 16; ++j) sums[j] = static_cast<int16_t>(IntegerSum(xq + 16 * j, 16));
}

// QuantizeGroup's bits with AVX2, for a group without NaN (false, and nothing written, for one
// with). The same operations lane by lane: max and min clamp as its comparisons do (a NaN product,
// inf * 0 where x holds an infinity, becomes -127), and the conversion rounds to nearest even as
// RoundHalfEven does for |v| <= 127; the amax is a maximum, whatever the order.
CONVOY_TARGET_AVX2_FMA bool QuantizeGroupAvx2(const float* x, int8_t* xq, float* dx,
                                              float* half_sums) {
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
    half_sums[0] = half_sums[1] = 0.0f;
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
  for (int h = 0; h < 2; ++h) {
    const __m256i pair = _mm256_add_epi32(q[2 * h], q[2 * h + 1]);
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(pair), _mm256_extracti128_si256(pair, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4E));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xB1));
    half_sums[h] = scale * static_cast<float>(_mm_cvtsi128_si32(sum));
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

// Per-thread buffers for a tile of unpacked weight rows.
struct Scratch {
  std::vector<uint8_t> q;
  std::vector<float> scales;
  std::vector<float> offsets;
  UnpackedRow rows[kTileRows];

  void Reserve(int64_t k) {
    const int64_t stride = quant::OffsetStride(k);
    if (static_cast<int64_t>(q.size()) < kTileRows * k) {
      q.resize(kTileRows * k);
      scales.resize(kTileRows * k / 4);
    }
    if (static_cast<int64_t>(offsets.size()) < kTileRows * stride) {
      offsets.resize(kTileRows * stride);
    }
    for (int w = 0; w < kTileRows; ++w) {
      rows[w] = {q.data() + w * k, scales.data() + w * k / 4, offsets.data() + w * stride};
    }
  }
};

Scratch& ThreadScratch(int64_t k) {
  thread_local Scratch scratch;
  scratch.Reserve(k);
  return scratch;
}

// Outputs y[r * ldy + w] for every activation row r and the W unpacked rows.
template <int W>
CONVOY_TARGET_AVX2_FMA void TileAvx2(const UnpackedRow* rows, int64_t k, const QuantizedRows& x,
                                     float* y, int64_t ldy) {
  const int64_t groups = k / 32;
  const int64_t offset_vectors = quant::OffsetStride(k) / 8;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    __m256 acc[W];
    for (int w = 0; w < W; ++w) acc[w] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * g));
      const __m256 dxv = _mm256_broadcast_ss(dx + g);
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) {
        const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[w].q + 32 * g));
        // Pairs of products, exact in int16: 63 * 127 * 2 is below 32767.
        const __m256i pairs = _mm256_maddubs_epi16(qv, xv);
        const __m256 sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        const __m256 c = _mm256_mul_ps(_mm256_loadu_ps(rows[w].scales + 8 * g), dxv);
        acc[w] = _mm256_fmadd_ps(sums, c, acc[w]);
      }
    }
    const float* xsum = x.half_sums(r);
    __m256 off[W];
    for (int w = 0; w < W; ++w) off[w] = _mm256_setzero_ps();
    for (int64_t t = 0; t < offset_vectors; ++t) {
      const __m256 xs = _mm256_loadu_ps(xsum + 8 * t);
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) {
        off[w] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[w].offsets + 8 * t), xs, off[w]);
      }
    }
    for (int w = 0; w < W; ++w) acc[w] = _mm256_add_ps(acc[w], off[w]);
    for (int w = 0; w < W; ++w) y[r * ldy + w] = quant::HorizontalSumAvx2(acc[w]);
  }
}

// The same outputs as TileAvx2, one at a time.
void TilePortable(const UnpackedRow* rows, int count, int64_t k, const QuantizedRows& x, float* y,
                  int64_t ldy) {
  const int64_t groups = k / 32;
  const int64_t offsets = quant::OffsetStride(k);
  for (int64_t r = 0; r < x.m(); ++r) {
    const int8_t* xq = x.values(r);
    const float* dx = x.scales(r);
    const float* xsum = x.half_sums(r);
    for (int w = 0; w < count; ++w) {
      const UnpackedRow& row = rows[w];
      float v[8] = {};
      for (int64_t g = 0; g < groups; ++g) {
        for (int l = 0; l < 8; ++l) {
          int sum = 0;
          for (int64_t i = 32 * g + 4 * l; i < 32 * g + 4 * l + 4; ++i) sum += row.q[i] * xq[i];
          const float c = row.scales[8 * g + l] * dx[g];
          v[l] = std::fma(static_cast<float>(sum), c, v[l]);
        }
      }
      float off[8] = {};
      for (int64_t t = 0; t < offsets; t += 8) {
        for (int l = 0; l < 8; ++l) off[l] = std::fma(row.offsets[t + l], xsum[t + l], off[l]);
      }
      for (int l = 0; l < 8; ++l) v[l] = v[l] + off[l];
      y[r * ldy + w] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    }
  }
}

void TileAvx2Any(const UnpackedRow* rows, int count, int64_t k, const QuantizedRows& x, float* y,
                 int64_t ldy) {
  switch (count) {
    case 1:
      return TileAvx2<1>(rows, k, x, y, ldy);
    case 2:
      return TileAvx2<2>(rows, k, x, y, ldy);
    case 3:
      return TileAvx2<3>(rows, k, x, y, ldy);
    default:
      return TileAvx2<4>(rows, k, x, y, ldy);
  }
}

}  // namespace

bool QuantMatmulSupports(GgmlType type) {
  return quant::FindFormat(type) != nullptr || quant::IsPackedType(type);
}

bool QuantPathAvailable(QuantPath path) {
  switch (path) {
    case QuantPath::kAvx512Vnni:
      return quant::Avx512VnniAvailable();
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
  half_sum_stride_ = quant::OffsetStride(k);
  const bool avx2 = Resolve(QuantPath::kBest) != QuantPath::kPortable;
  const int64_t groups = k / kGroup;
  values_.resize(m * k);
  scales_.resize(m * groups);
  half_sums_.resize(m * half_sum_stride_);
  for (int64_t r = 0; r < m; ++r) {
    float* sums = half_sums_.data() + r * half_sum_stride_;
    for (int64_t g = 0; g < groups; ++g) {
      const float* group = x + r * k + g * kGroup;
      int8_t* xq = values_.data() + r * k + g * kGroup;
      float* dx = scales_.data() + r * groups + g;
      if (!avx2 || !QuantizeGroupAvx2(group, xq, dx, sums + 2 * g)) {
        QuantizeGroup(group, xq, dx, sums + 2 * g);
      }
    }
    std::fill(sums + 2 * groups, sums + half_sum_stride_, 0.0f);
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
    : type_(type), n_(n), k_(k), packed_(quant::IsPackedType(type)) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(type));
  row_bytes_ = k / info.block_elements * info.block_bytes;
  bytes_ = packed_ ? quant::PackedBytes(type, n, k) : n * row_bytes_;
  data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes_ + 63) / 64 * 64)));
  if (data_ == nullptr) throw std::bad_alloc();
  if (packed_) {
    quant::PackRows(type, rows, n, k, data_.get());
  } else {
    std::memcpy(data_.get(), rows, bytes_);
  }
}

void QuantWeights::CopyRow(int64_t j, std::byte* out) const {
  if (packed_) {
    quant::CopyPackedRow(type_, data_.get(), k_, j, out);
  } else {
    std::memcpy(out, data_.get() + j * row_bytes_, row_bytes_);
  }
}

namespace {

// The group contract's product on the file's rows.
void GroupMatmul(GgmlType type, const std::byte* w, int64_t n, int64_t k, const QuantizedRows& x,
                 float* y, int64_t ldy, QuantPath run) {
  const int64_t m = x.m();
  const quant::Format& format = *quant::FindFormat(type);
  const bool vnni = run == QuantPath::kAvx512Vnni;
  const bool avx2 = run != QuantPath::kPortable;  // the VNNI path unpacks with AVX2 too
  const quant::UnpackFn unpack = avx2 ? format.unpack_avx2 : format.unpack_portable;
  const TileFn tile = vnni ? quant::FindTileVnni() : (avx2 ? TileAvx2Any : TilePortable);
  const quant::DirectFn direct =
      vnni ? quant::FindDirectVnni(type) : (avx2 ? format.direct_avx2 : nullptr);
  const int64_t row_bytes = k / format.block_elements * format.block_bytes;
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  if (m == 1 && direct != nullptr) {
    // One activation row: each group of weights is used once, so it goes from the blocks to
    // registers without the unpacked copy.
#pragma omp parallel for schedule(static) if (n * k >= kMinParallelWork)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t first = t * kTileRows;
      const int count = static_cast<int>(std::min<int64_t>(kTileRows, n - first));
      direct(w + first * row_bytes, row_bytes, count, k, x, y + first, ldy);
    }
    return;
  }
#pragma omp parallel for schedule(static) if ((m + 4) * n * k >= kMinParallelWork)
  for (int64_t t = 0; t < tiles; ++t) {
    Scratch& scratch = ThreadScratch(k);
    const int64_t first = t * kTileRows;
    const int count = static_cast<int>(std::min<int64_t>(kTileRows, n - first));
    for (int i = 0; i < count; ++i) unpack(w + (first + i) * row_bytes, k, scratch.rows[i]);
    tile(scratch.rows, count, k, x, y + first, ldy);
  }
}

}  // namespace

void QuantMatmul(const QuantWeights& w, const QuantizedRows& x, float* y, int64_t ldy,
                 QuantPath path) {
  const int64_t m = x.m(), n = w.n(), k = w.k();
  if (m <= 0 || n <= 0) return;
  const QuantPath run = Resolve(path);
  if (!quant::IsPackedType(w.type())) {
    GroupMatmul(w.type(), w.data(), n, k, x, y, ldy, run);
    return;
  }
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
  if (quant::IsPackedType(type)) {
    QuantMatmul(QuantWeights(type, w, n, k), x, y, ldy, path);
    return;
  }
  GroupMatmul(type, w, n, k, x, y, ldy, Resolve(path));
}

}  // namespace convoy
