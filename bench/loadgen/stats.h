// What one request measured, and the per-class statistics convoy-bench reports: TTFT, inter-token
// and end-to-end latency percentiles, throughput and goodput.
#ifndef CONVOY_BENCH_LOADGEN_STATS_H_
#define CONVOY_BENCH_LOADGEN_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::bench {

// One request as the client saw it. Times are seconds since the run started.
struct RequestRecord {
  int class_index = 0;
  double send_s = 0;
  double first_token_s = -1;  // -1: no token arrived
  double end_s = 0;           // when the call ended
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // tokens received
  // Messages (stream responses, server-sent events) that carried output. Where a protocol does
  // not say how many tokens a message carries (OpenAI's events), each counts as one arrival and
  // output_tokens comes from the usage the server reports at the end.
  int64_t output_messages = 0;
  // Gaps between consecutive output tokens as they arrived; a message carrying k tokens spreads
  // its gap from the previous message evenly over the k.
  std::vector<double> token_gaps_s;
  // Ended with the whole output (finish reason LENGTH or STOP and an OK status).
  bool completed = false;
  std::string error;  // the gRPC status or finish reason when not completed
  // Not completed because this client cancelled it (the drain timeout ran out).
  bool cancelled_by_client = false;
  // The server's own timings from the last message (microseconds; 0 when absent).
  uint64_t server_queue_us = 0;
  uint64_t server_ttft_us = 0;
  uint64_t server_total_us = 0;

  double ttft_s() const { return first_token_s - send_s; }
  double e2e_s() const { return end_s - send_s; }
  // The mean gap between tokens (time per output token after the first); 0 with < 2 tokens or no
  // gaps.
  double mean_itl_s() const;
};

// The p-th percentile (p in [0, 100]) by linear interpolation between closest ranks (as numpy's
// default); NaN for no values.
double Percentile(std::vector<double> values, double p);

struct LatencySummary {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};
LatencySummary Summarize(const std::vector<double>& values);

// One class's service-level targets for goodput; 0 disables a target.
struct SloTarget {
  double ttft_s = 0;
  double itl_s = 0;
};

// The targets of every workload class: ttft_s and itl_s, or by_class's for a class named there
// (a priority class with its own SLO, e.g. interactive chat beside batch summarization).
struct SloTargets {
  SloTargets() = default;
  SloTargets(double ttft, double itl) : ttft_s(ttft), itl_s(itl) {}

  double ttft_s = 0;
  double itl_s = 0;
  std::map<std::string, SloTarget> by_class;

  SloTarget For(const std::string& class_name) const {
    const auto it = by_class.find(class_name);
    return it != by_class.end() ? it->second : SloTarget{ttft_s, itl_s};
  }
  // Whether any class has a target at all.
  bool Any() const {
    if (ttft_s > 0 || itl_s > 0) return true;
    for (const auto& [name, target] : by_class) {
      if (target.ttft_s > 0 || target.itl_s > 0) return true;
    }
    return false;
  }
};

// Per-class targets from "NAME=TTFT_MS/ITL_MS" entries (convoy-bench --class-slo), either number 0
// for none: {"chat=500/100", "batch=5000/0"}. INVALID_ARGUMENT naming the entry that does not
// parse, has a negative target or repeats a class.
absl::StatusOr<std::map<std::string, SloTarget>> ParseClassSlos(
    const std::vector<std::string>& entries);

// "" when every class `slo.by_class` names is in `class_names`; else a message naming the others
// and the classes there are.
std::string UnknownSloClasses(const SloTargets& slo, const std::vector<std::string>& class_names);

// Whether a request that did not complete was refused for load: RESOURCE_EXHAUSTED over gRPC
// (convoy's API, KServe) or 429 over HTTP.
bool RefusedForLoad(const RequestRecord& record);

// A completed request whose TTFT is within ttft_s and whose mean inter-token latency is within
// itl_s.
bool MeetsSlo(const RequestRecord& record, const SloTarget& slo);
// The same with the default targets (SloTargets::ttft_s and itl_s).
bool MeetsSlo(const RequestRecord& record, const SloTargets& slo);

struct ClassStats {
  std::string name;
  int64_t sent = 0;
  int64_t completed = 0;
  int64_t failed = 0;  // not completed: errors, cancellations, timeouts
  // Of the failed: refused at admission for load (gRPC RESOURCE_EXHAUSTED, HTTP 429), and how long
  // each refusal took from send to answer.
  int64_t refused = 0;
  LatencySummary refusal_s;
  // Of the failed: cancelled by the load generator itself when its drain timeout ran out.
  int64_t cancelled = 0;
  int64_t met_slo = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t output_messages = 0;
  LatencySummary ttft_s;  // completed requests with a first token
  LatencySummary itl_s;   // all token gaps of completed requests, pooled
  LatencySummary e2e_s;   // completed requests
  LatencySummary server_queue_s;
  LatencySummary server_ttft_s;
  double requests_per_s = 0;       // completed / elapsed
  double output_tokens_per_s = 0;  // every token received / elapsed
  double goodput_rps = 0;          // met_slo / elapsed
};

// One ClassStats per name in `class_names` (in that order), then one named "all" over every
// record. `elapsed_s` is the measured span the rates are divided by. Each request is held to its
// own class's targets (SloTargets::For), in its class's row and in "all".
std::vector<ClassStats> ComputeStats(const std::vector<RequestRecord>& records,
                                     const std::vector<std::string>& class_names, double elapsed_s,
                                     const SloTargets& slo);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_STATS_H_
