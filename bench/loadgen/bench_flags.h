// convoy-bench's flags (every subcommand's, defined once) and what run, sweep and tune do alike
// with them: the traffic to send (a workload file or a request trace), the run options, the output
// files.
#ifndef CONVOY_BENCH_LOADGEN_BENCH_FLAGS_H_
#define CONVOY_BENCH_LOADGEN_BENCH_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/loadgen/request_client.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/trace.h"
#include "bench/loadgen/workload.pb.h"

ABSL_DECLARE_FLAG(std::string, addr);
ABSL_DECLARE_FLAG(std::string, http_addr);
ABSL_DECLARE_FLAG(std::string, protocol);
ABSL_DECLARE_FLAG(std::string, api_key);
ABSL_DECLARE_FLAG(std::string, workload);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(double, rate_scale);
ABSL_DECLARE_FLAG(double, duration_s);
ABSL_DECLARE_FLAG(int64_t, requests);
ABSL_DECLARE_FLAG(std::string, rate);
ABSL_DECLARE_FLAG(int32_t, concurrency);
ABSL_DECLARE_FLAG(double, ttft_ms);
ABSL_DECLARE_FLAG(double, itl_ms);
ABSL_DECLARE_FLAG(std::vector<std::string>, class_slo);
ABSL_DECLARE_FLAG(double, drain_s);
ABSL_DECLARE_FLAG(int32_t, warmup);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(std::string, csv);
ABSL_DECLARE_FLAG(std::string, svg);
ABSL_DECLARE_FLAG(std::string, markdown);
ABSL_DECLARE_FLAG(std::string, metrics_addr);
ABSL_DECLARE_FLAG(double, price_per_hour);
ABSL_DECLARE_FLAG(std::string, label);
ABSL_DECLARE_FLAG(bool, progress);
ABSL_DECLARE_FLAG(std::string, convoyd);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, base_config);
ABSL_DECLARE_FLAG(double, startup_timeout_s);
ABSL_DECLARE_FLAG(std::string, work_dir);
ABSL_DECLARE_FLAG(std::string, config);
ABSL_DECLARE_FLAG(int32_t, pid);
ABSL_DECLARE_FLAG(double, ttft_p99);
ABSL_DECLARE_FLAG(double, itl_p99);
ABSL_DECLARE_FLAG(double, budget_s);
ABSL_DECLARE_FLAG(double, min_run_s);
ABSL_DECLARE_FLAG(int32_t, min_run_requests);
ABSL_DECLARE_FLAG(int32_t, repeats);
ABSL_DECLARE_FLAG(int32_t, finalists);
ABSL_DECLARE_FLAG(int32_t, eta);
ABSL_DECLARE_FLAG(double, reload_timeout_s);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, watch);
ABSL_DECLARE_FLAG(double, watch_interval_s);
ABSL_DECLARE_FLAG(double, watch_for_s);
ABSL_DECLARE_FLAG(double, watch_satisfied);

namespace convoy::bench {

// The flags every subcommand takes (absl's names).
const std::vector<std::string>& CommonFlagNames();

// --workload's file, with --seed applied; or with --trace, the trace (into `trace`, which
// `options` then points to) and the workload standing for it.
absl::StatusOr<v1::Workload> WorkloadFromFlags(std::optional<Trace>& trace, RunOptions& options);

// Fills the options shared by every subcommand; returns an error message for bad usage.
std::string CommonOptions(RunOptions& options, Protocol& protocol);

// Parses --rate: empty, or comma-separated positive numbers.
bool ParseRates(const std::string& text, std::vector<double>& rates);

absl::Status WriteFile(const std::string& path, const std::string& contents);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_BENCH_FLAGS_H_
