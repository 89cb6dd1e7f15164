// The multiply-add rate this machine's cores reach with every OpenMP thread: the limit a prefill's
// matrix products are measured against, as streaming-read bandwidth is decode's.
#ifndef CONVOY_BENCH_CPU_COMPUTE_PEAK_H_
#define CONVOY_BENCH_CPU_COMPUTE_PEAK_H_

namespace convoy::bench {

struct ComputePeak {
  double flops = 0.0;  // floating-point operations per second, a multiply-add counted as 2
  const char* instruction = "";  // what was measured, e.g. "vdpbf16ps"
};

// Each OpenMP thread runs independent chains of the widest bf16 dot-product instruction the build
// targets (AVX-512 BF16's vdpbf16ps, which oneDNN's and our bf16 products use; without it fp32
// AVX-512 or AVX2 multiply-adds, or scalar ones) on values held in registers, nothing read from
// memory; `repeats` passes after one warm-up, the best returned.
ComputePeak MeasureComputePeak(int repeats);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_CPU_COMPUTE_PEAK_H_
