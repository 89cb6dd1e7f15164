// Replaying convoyd's request trace (convoyd --request-trace, metrics/request_trace.h): each line
// one request's arrival time, prompt and output lengths and priority. convoy-bench sends the
// requests at their recorded times (or scaled: --rate-scale 2 sends them twice as fast), each
// with a prompt of random token ids of the recorded length and max_tokens of the recorded output.
#ifndef CONVOY_BENCH_LOADGEN_TRACE_H_
#define CONVOY_BENCH_LOADGEN_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/loadgen/arrival.h"
#include "bench/loadgen/request_source.h"
#include "bench/loadgen/workload.pb.h"

namespace convoy::bench {

struct TraceEntry {
  double arrival_s = 0;  // from the trace's first arrival
  int32_t prompt_tokens = 1;
  int32_t output_tokens = 1;
  int32_t priority = 0;  // 0: the server's default level
  int class_index = 0;   // into the trace's workload (one class per priority)
};

struct Trace {
  std::string source;               // the file, for messages and reports
  std::vector<TraceEntry> entries;  // in arrival order, the first at 0
  std::vector<int32_t> priorities;  // of the classes, ascending
  double span_s() const { return entries.empty() ? 0 : entries.back().arrival_s; }
};

// Parses a trace: one JSON object per line (blank lines skipped) with arrival_s (>= 0),
// prompt_tokens (>= 1), output_tokens (>= 0; 0 is sent as 1) and priority (>= 0); other fields
// are ignored. INVALID_ARGUMENT naming `source`, the line and the field for anything else, and
// for a trace without a request.
absl::StatusOr<Trace> ParseTrace(absl::string_view text, absl::string_view source);
absl::StatusOr<Trace> LoadTrace(const std::string& path);

// A workload standing for the trace in reports and warm-up: one class per priority ("priority N",
// "default priority" for 0) weighted by its requests, prompt and output lengths uniform over the
// class's range, open loop at the trace's mean rate times `rate_scale`.
v1::Workload TraceWorkload(const Trace& trace, double rate_scale);

// The trace's requests at their (scaled) times. REQUIRES: rate_scale > 0, vocab_size >= 1,
// max_context >= 2.
class TraceReplay {
 public:
  TraceReplay(const Trace& trace, double rate_scale, int64_t vocab_size, int64_t max_context,
              uint64_t seed);

  bool done() const { return next_ >= trace_.entries.size(); }
  // Seconds from the start at which the next request is due. REQUIRES: !done().
  double next_arrival_s() const { return trace_.entries[next_].arrival_s / rate_scale_; }
  // The next request; its prompt and output cut to fit max_context. REQUIRES: !done().
  PlannedRequest Next();

 private:
  const Trace& trace_;
  const double rate_scale_;
  const int64_t vocab_size_;
  const int64_t max_context_;
  Rng rng_;
  size_t next_ = 0;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_TRACE_H_
