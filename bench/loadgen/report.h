// convoy-bench's outputs: the per-class terminal table, the sweep frontier, JSON and CSV.
#ifndef CONVOY_BENCH_LOADGEN_REPORT_H_
#define CONVOY_BENCH_LOADGEN_REPORT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/loadgen/server_metrics.h"
#include "bench/loadgen/stats.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {

// One measured run: a workload against one server at one offered load.
struct RunResult {
  std::string config;      // the server config's label ("base", "mode=STATIC max_batch_size=8")
  std::string protocol;    // the client's protocol: "native", "openai", "kserve"
  std::string arrival;     // DescribeArrival of what was sent
  double offered_rps = 0;  // open loop; 0 for closed loop
  int concurrency = 0;     // closed loop; 0 for open loop
  double elapsed_s = 0;
  SloTargets slo;
  std::vector<ClassStats> classes;  // per class, "all" last
  std::string error;                // non-empty when the run (or the daemon) failed
  // From spawning the server to its first answered request (seconds); -1 when this run did not
  // follow the server's start.
  double cold_start_s = -1;
  // The server's memory through the run, from its /metrics (samples == 0: not read).
  ServerMemory memory;
  // The machine's price per hour (--price-per-hour); 0: none given.
  double price_per_hour = 0;
  const ClassStats* all() const { return classes.empty() ? nullptr : &classes.back(); }
};

// The share of a class's requests that failed (errors, refusals, cancellations); 0 when none was
// sent.
double ErrorRate(const ClassStats& c);

// Seconds from a server's spawn to its first answered request; -1 when nothing was answered
// (`first_answer` is absl::InfiniteFuture()).
double ColdStartSeconds(absl::Time started, absl::Time first_answer);

// What 1,000 completed requests cost at the run's price per hour: the run's machine time over its
// completed requests. NaN without a price or a completed request.
double CostPer1000Requests(const RunResult& run);

// The per-class table: requests, TTFT / ITL / end-to-end p50 p95 p99 (ms), req/s, output tok/s,
// goodput, error rate; then a line of what was measured of the server: cold start, peak resident
// memory and KV use, cost per 1,000 requests.
std::string FormatClassTable(const RunResult& run);

// The index of the run with the highest overall goodput (ties: higher output tokens/s); -1 when
// none succeeded.
int BestGoodput(const std::vector<RunResult>& runs);

// One row per run: config, offered load, req/s, output tok/s, goodput, TTFT and ITL p50/p99,
// end-to-end p99; the best goodput marked with '*'.
std::string FormatFrontierTable(const std::vector<RunResult>& runs);
// The same as a Markdown table.
std::string FormatFrontierMarkdown(const std::vector<RunResult>& runs);

nlohmann::json RunToJson(const RunResult& run);
// {"runs": [...], "best": index or null}.
nlohmann::json SweepToJson(const std::vector<RunResult>& runs);

// One header line, then one line per (run, class).
std::string FormatCsv(const std::vector<RunResult>& runs);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_REPORT_H_
