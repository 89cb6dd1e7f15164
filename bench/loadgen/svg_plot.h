// A hand-written SVG of latency percentiles against throughput, one series per server config.
#ifndef CONVOY_BENCH_LOADGEN_SVG_PLOT_H_
#define CONVOY_BENCH_LOADGEN_SVG_PLOT_H_

#include <string>
#include <vector>

#include "bench/loadgen/report.h"

namespace convoy::bench {

// Two panels: TTFT and inter-token latency (ms, log scale) against output tokens/s. Each config is
// one colour; p50 is a filled marker on a solid line, p99 a hollow marker on a dashed line; runs of
// the same config (several offered loads) are joined in order of throughput. Failed runs are
// left out.
std::string LatencyThroughputSvg(const std::vector<RunResult>& runs, const std::string& title);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_SVG_PLOT_H_
