// QuantMatmul's speed: the packed weight bytes it reads per second, as a fraction of the
// streaming-read bandwidth measured in the same run with the same threads. "cached" rereads one
// 2048 x 2048 matrix (a few MB: it stays in the caches); "memory" runs a ring of such matrices
// larger than any cache, one per iteration, as a model's layers are read in a decode step.
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/half.h"
#include "executor/cpu/quant_matmul.h"
#include "memory_bandwidth.h"

namespace convoy {
namespace {

struct TypeCase {
  GgmlType type;
  int block_elements, block_bytes;
  int d_at, dmin_at;  // fp16 fields; -1 for none
};

const TypeCase kTypes[] = {
    {GgmlType::kQ4_0, 32, 18, 0, -1},     {GgmlType::kQ4_1, 32, 20, 0, 2},
    {GgmlType::kQ8_0, 32, 34, 0, -1},     {GgmlType::kQ4_K, 256, 144, 0, 2},
    {GgmlType::kQ5_K, 256, 176, 0, 2},    {GgmlType::kQ6_K, 256, 210, 208, -1},
    {GgmlType::kQ3_K, 256, 110, 108, -1}, {GgmlType::kQ2_K, 256, 84, 80, 82},
};

constexpr int64_t kN = 2048, kK = 2048;
constexpr int64_t kRingBytes = int64_t{512} << 20;

// Random blocks with small finite scales.
std::vector<std::byte> RandomMatrix(const TypeCase& t) {
  std::vector<std::byte> w(kN * kK / t.block_elements * t.block_bytes);
  uint64_t s = 88172645463325252ull;
  for (std::byte& b : w) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    b = static_cast<std::byte>(s >> 56);
  }
  for (size_t at = 0; at < w.size(); at += t.block_bytes) {
    for (int field : {t.d_at, t.dmin_at}) {
      if (field < 0) continue;
      const uint16_t bits = FloatToFP16(0.01f + static_cast<float>(at % 97) * 1e-4f);
      std::memcpy(&w[at + field], &bits, 2);
    }
  }
  return w;
}

double StreamingBandwidth(int threads) {
  static std::map<int, double> measured;
  auto [it, added] = measured.emplace(threads, 0.0);
  if (added) {
    omp_set_num_threads(threads);
    it->second = bench::MeasureStreamingReadBandwidth(int64_t{1} << 30, 3);
  }
  return it->second;
}

// Args: type index, m, threads, ring (0: cached, 1: memory).
void BM_QuantMatmul(benchmark::State& state) {
  const TypeCase& t = kTypes[state.range(0)];
  const int64_t m = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool ring = state.range(3) != 0;
  const double bandwidth = StreamingBandwidth(threads);
  omp_set_num_threads(threads);

  const std::vector<std::byte> one = RandomMatrix(t);
  const int64_t matrix_bytes = static_cast<int64_t>(one.size());
  const int64_t copies = ring ? kRingBytes / matrix_bytes + 1 : 1;
  std::vector<QuantWeights> weights;
  for (int64_t c = 0; c < copies; ++c) weights.emplace_back(t.type, one.data(), kN, kK);

  std::vector<float> x(m * kK);
  for (int64_t i = 0; i < m * kK; ++i)
    x[i] = static_cast<float>((i * 7919) % 2001) / 1000.0f - 1.0f;
  QuantizedRows rows;
  std::vector<float> y(m * kN);
  int64_t next = 0;
  for (auto _ : state) {
    rows.Quantize(x.data(), m, kK);
    QuantMatmul(weights[next], rows, y.data(), kN);
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % copies;
  }
  const double bytes = static_cast<double>(matrix_bytes);
  state.counters["weights_GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["stream_fraction"] =
      benchmark::Counter(bytes / bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["stream_GB/s"] = bandwidth / 1e9;
  state.counters["GOP/s"] =
      benchmark::Counter(2.0 * m * kN * kK / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t type = 0; type < static_cast<int64_t>(std::size(kTypes)); ++type) {
    for (int64_t threads : {1, 2}) {
      for (int64_t ring : {0, 1}) b->Args({type, 1, threads, ring});
      for (int64_t m : {4, 16, 64}) b->Args({type, m, threads, 0});
    }
  }
  b->ArgNames({"type", "m", "threads", "memory"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_QuantMatmul)->Apply(Args);

}  // namespace
}  // namespace convoy

BENCHMARK_MAIN();
