#include "bench/loadgen/bench_flags.h"

#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/watch.h"
#include "bench/loadgen/workload.h"

ABSL_FLAG(std::string, addr, "", "run: the server's gRPC port, HOST:PORT");
ABSL_FLAG(std::string, http_addr, "", "run: the server's HTTP port, HOST:PORT (--protocol openai)");
ABSL_FLAG(std::string, protocol, "native",
          "The API to send requests over: native (convoy.v1 InferStream), kserve (KServe v2 "
          "ModelStreamInfer) or openai (streamed POST /v1/completions)");
ABSL_FLAG(std::string, api_key, "",
          "Send every call with this API key (gRPC `authorization: Bearer KEY` metadata, HTTP "
          "`Authorization: Bearer KEY`), for a server with keys configured");
ABSL_FLAG(std::string, workload, "",
          "Workload file (bench/workloads/*.pbtxt); required unless --trace is given");
ABSL_FLAG(std::string, trace, "",
          "Replay this request trace (convoyd --request-trace) instead of a workload file");
ABSL_FLAG(double, rate_scale, 1,
          "--trace: send the trace's requests this many times faster than recorded");
ABSL_FLAG(double, duration_s, 0, "Seconds to send for (default: the workload's duration_s)");
ABSL_FLAG(int64_t, requests, 0, "Send this many requests instead of for a duration");
ABSL_FLAG(std::string, rate, "",
          "Open loop at this many requests/s (sweep: a comma-separated list of rates, each run "
          "per config)");
ABSL_FLAG(int32_t, concurrency, 0, "Closed loop with this many requests in flight");
ABSL_FLAG(double, ttft_ms, 0, "Goodput target: time to first token at most this (0: none)");
ABSL_FLAG(double, itl_ms, 0,
          "Goodput target: a request's mean inter-token latency at most this (0: none)");
ABSL_FLAG(std::vector<std::string>, class_slo, {},
          "Goodput targets per workload class, NAME=TTFT_MS/ITL_MS (0: none), comma-separated, "
          "e.g. chat=500/100,batch=5000/0; a class not named keeps the run's own targets");
ABSL_FLAG(double, drain_s, 60,
          "After sending stops, seconds the requests in flight may take before they are "
          "cancelled");
ABSL_FLAG(int32_t, warmup, 2, "Unmeasured requests sent one at a time first");
ABSL_FLAG(uint64_t, seed, 0,
          "The workload's seed instead of the file's (0: the file's): other prompts, lengths and "
          "arrival gaps of the same distributions, e.g. for runs that must not hit one another's "
          "prefix cache");
ABSL_FLAG(std::string, json, "", "Write the results as JSON here");
ABSL_FLAG(std::string, csv, "", "Write the results as CSV here (one line per run and class)");
ABSL_FLAG(std::string, svg, "", "Write a plot of latency percentiles against throughput here");
ABSL_FLAG(std::string, markdown, "", "Write the frontier as a Markdown table here");
ABSL_FLAG(std::string, metrics_addr, "",
          "run: HOST:PORT serving the server's /metrics, read for its peak memory and KV use "
          "(default: --http-addr, where convoyd serves it too; none: not read)");
ABSL_FLAG(double, price_per_hour, 0,
          "The machine's price per hour (any currency): reports the cost per 1,000 completed "
          "requests");
ABSL_FLAG(std::string, label, "", "run: the server config's name in the reports");
ABSL_FLAG(bool, progress, true, "Show a progress line on stderr");
ABSL_FLAG(std::string, convoyd, "", "sweep: the convoyd executable");
ABSL_FLAG(std::string, model, "", "sweep: the model directory given to convoyd");
ABSL_FLAG(std::string, base_config, "", "sweep: the server config the --set values override");
ABSL_FLAG(double, startup_timeout_s, 300, "sweep: seconds convoyd may take to be SERVING");
ABSL_FLAG(std::string, work_dir, "",
          "sweep: where config files and daemon logs go (default: a new /tmp/convoy-bench-*)");

ABSL_FLAG(std::string, config, "",
          "tune: the config file the running convoyd was started with (--config); rewritten for "
          "every point, and left holding the best");
ABSL_FLAG(int32_t, pid, 0,
          "tune: convoyd's process id, sent SIGHUP after each rewrite (0: wait for convoyd to "
          "notice the changed file, within 2 s)");
ABSL_FLAG(double, ttft_p99, 0,
          "tune: the TTFT SLO in ms: a request counts toward goodput when its TTFT is within it");
ABSL_FLAG(double, itl_p99, 0,
          "tune: the inter-token SLO in ms: a request counts toward goodput when its mean "
          "inter-token latency is within it");
ABSL_FLAG(double, budget_s, 600, "tune: seconds for the whole search, repeats included");
ABSL_FLAG(double, min_run_s, 5, "tune: the shortest measured run, in seconds");
ABSL_FLAG(int32_t, min_run_requests, 30,
          "tune: the shortest measured run holds at least this many arrivals of open-loop "
          "traffic (at its rate; 0: --min-run-s alone), enough to rank configs");
ABSL_FLAG(int32_t, repeats, 3, "tune: how many times the best points are measured at the end");
ABSL_FLAG(int32_t, finalists, 3, "tune: how many of the best points are repeated at the end");
ABSL_FLAG(int32_t, eta, 2, "tune: each rung keeps the best 1/eta of its points");
ABSL_FLAG(double, reload_timeout_s, 20, "tune: seconds a reload may take to show");
ABSL_FLAG(bool, watch, false,
          "tune: instead of searching once, keep the live server's knobs suited to its traffic, "
          "read from its /metrics (--http-addr), moving them at most once per --watch-interval-s");
ABSL_FLAG(double, watch_interval_s, 60, "tune --watch: seconds between two moves, at least");
ABSL_FLAG(double, watch_for_s, 0, "tune --watch: stop after this many seconds (0: never)");
ABSL_FLAG(double, watch_satisfied, convoy::bench::WatchOptions().satisfied,
          "tune --watch: a traffic whose best point keeps this share of its requests within the "
          "SLOs is left alone (no other point is tried for it); in (0, 1]");
ABSL_FLAG(std::string, out, "tuned.pbtxt",
          "tune: write the best config here (a whole server config convoyd loads as it is)");

namespace convoy::bench {

const std::vector<std::string>& CommonFlagNames() {
  static const auto* const names = new std::vector<std::string>{
      "workload", "duration_s", "requests", "rate",     "concurrency", "ttft_ms",
      "itl_ms",   "drain_s",    "warmup",   "seed",     "json",        "csv",
      "svg",      "markdown",   "progress", "protocol", "api_key",     "price_per_hour",
      "trace",    "rate_scale", "class_slo"};
  return *names;
}

absl::StatusOr<v1::Workload> WorkloadFromFlags(std::optional<Trace>& trace, RunOptions& options) {
  absl::StatusOr<v1::Workload> workload;
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty()) {
    absl::StatusOr<Trace> loaded = LoadTrace(path);
    if (!loaded.ok()) return loaded.status();
    trace = *std::move(loaded);
    options.trace = &*trace;
    options.rate_scale = absl::GetFlag(FLAGS_rate_scale);
    workload = TraceWorkload(*trace, options.rate_scale);
  } else {
    workload = LoadWorkload(absl::GetFlag(FLAGS_workload));
  }
  if (workload.ok() && absl::GetFlag(FLAGS_seed) != 0)
    workload->set_seed(absl::GetFlag(FLAGS_seed));
  if (workload.ok()) {
    std::vector<std::string> names;
    for (const v1::RequestClass& c : workload->request_class()) names.push_back(c.name());
    if (std::string unknown = UnknownSloClasses(options.slo, names); !unknown.empty()) {
      return absl::InvalidArgumentError(unknown);
    }
  }
  return workload;
}

std::string CommonOptions(RunOptions& options, Protocol& protocol) {
  absl::StatusOr<Protocol> parsed = ParseProtocol(absl::GetFlag(FLAGS_protocol));
  if (!parsed.ok()) return std::string(parsed.status().message());
  protocol = *parsed;
  options.duration_s = absl::GetFlag(FLAGS_duration_s);
  options.num_requests = absl::GetFlag(FLAGS_requests);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.drain_timeout_s = absl::GetFlag(FLAGS_drain_s);
  options.warmup_requests = absl::GetFlag(FLAGS_warmup);
  options.slo.ttft_s = absl::GetFlag(FLAGS_ttft_ms) * 1e-3;
  options.slo.itl_s = absl::GetFlag(FLAGS_itl_ms) * 1e-3;
  absl::StatusOr<std::map<std::string, SloTarget>> by_class =
      ParseClassSlos(absl::GetFlag(FLAGS_class_slo));
  if (!by_class.ok()) return absl::StrCat("--class-slo: ", by_class.status().message());
  options.slo.by_class = *std::move(by_class);
  options.progress = absl::GetFlag(FLAGS_progress);
  options.price_per_hour = absl::GetFlag(FLAGS_price_per_hour);
  if (!(options.price_per_hour >= 0)) return "--price-per-hour must not be negative";
  if (options.duration_s < 0) return "--duration-s must not be negative";
  if (options.num_requests < 0) return "--requests must not be negative";
  if (options.duration_s > 0 && options.num_requests > 0) {
    return "give --duration-s or --requests, not both";
  }
  if (options.concurrency < 0) return "--concurrency must not be negative";
  if (options.drain_timeout_s < 0) return "--drain-s must not be negative";
  if (options.slo.ttft_s < 0 || options.slo.itl_s < 0) return "SLO targets must not be negative";
  if (absl::GetFlag(FLAGS_workload).empty() == absl::GetFlag(FLAGS_trace).empty()) {
    return "give --workload FILE or --trace FILE (one of them)";
  }
  if (!(absl::GetFlag(FLAGS_rate_scale) > 0)) return "--rate-scale must be above 0";
  if (!absl::GetFlag(FLAGS_trace).empty() &&
      (!absl::GetFlag(FLAGS_rate).empty() || options.concurrency > 0)) {
    return "--trace sends at the trace's own times: scale them with --rate-scale, not --rate or "
           "--concurrency";
  }
  return "";
}

bool ParseRates(const std::string& text, std::vector<double>& rates) {
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double r = 0;
    if (!absl::SimpleAtod(part, &r) || !(r > 0)) return false;
    rates.push_back(r);
  }
  return true;
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace convoy::bench
