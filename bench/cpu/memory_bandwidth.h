// Streaming-read bandwidth of this machine's memory: the limit batch-1 decode is measured against.
#ifndef CONVOY_BENCH_CPU_MEMORY_BANDWIDTH_H_
#define CONVOY_BENCH_CPU_MEMORY_BANDWIDTH_H_

#include <cstdint>

namespace convoy::bench {

// Reads a `bytes` buffer of random (touched, non-zero) data with every OpenMP thread, `repeats`
// times after one warm-up pass, and returns the best pass in bytes per second.
double MeasureStreamingReadBandwidth(int64_t bytes, int repeats);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_CPU_MEMORY_BANDWIDTH_H_
