#include "bench/loadgen/tune_command.h"

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "bench/loadgen/bench_flags.h"
#include "bench/loadgen/client.h"
#include "bench/loadgen/config_override.h"
#include "bench/loadgen/live_server.h"
#include "bench/loadgen/metrics_sampler.h"
#include "bench/loadgen/svg_plot.h"
#include "bench/loadgen/tuner.h"
#include "bench/loadgen/watch.h"
#include "tools/cli_flags.h"

namespace convoy::bench {
namespace {

// Set by the first SIGINT or SIGTERM (a second one ends the process at once).
volatile sig_atomic_t interrupted = 0;

void OnInterrupt(int /*signal_number*/) { interrupted = 1; }

// From here on, SIGINT and SIGTERM end the search after the run in progress.
void CatchInterrupts() {
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

convoy::cli::CommandLine TuneCommandLine() {
  convoy::cli::CommandLine spec = {
      "convoy-bench tune",
      "convoy-bench tune --addr HOST:PORT --config FILE [--pid PID] [--http-addr HOST:PORT]\n"
      "                  (--workload FILE [--rate R | --concurrency N] | --trace FILE\n"
      "                   [--rate-scale X]) --ttft-p99 MS --itl-p99 MS\n"
      "                  --set KEY=V1,V2,... [--set ...] [--budget-s 600] [--min-run-s 5]\n"
      "                  [--min-run-requests 30]\n"
      "                  [--out tuned.pbtxt] [--json F --svg F --markdown F]\n"
      "convoy-bench tune --watch --addr HOST:PORT --http-addr HOST:PORT --config FILE [--pid PID]\n"
      "                  --ttft-p99 MS --itl-p99 MS --set KEY=V1,V2,... [--watch-interval-s 60]\n\n"
      "Finds the config of a running convoyd that serves the most requests per second within\n"
      "the SLOs for the given traffic, through live reloads: it rewrites --config (the file\n"
      "convoyd was started with) for each point of the --set space (the batcher's live knobs:\n"
      "max_batch_size, max_queue_delay_microseconds, max_num_batched_tokens,\n"
      "preferred_batch_size, prefill_chunk_size, ...), checks that convoyd took it (convoy info's\n"
      "reload counters and effective config), and measures. Successive halving over short runs\n"
      "(at least --min-run-s, and long enough for --min-run-requests arrivals of open-loop\n"
      "traffic) within --budget-s; then the best points are measured again (--repeats) and\n"
      "the winner's goodput is reported with its spread. A refused reload is reported and the\n"
      "search goes on. The server is left on the best config (a tested one), written to --out\n"
      "too; the frontier goes to --json, --svg and --markdown.\n"
      "With --watch (and --http-addr) it searches nothing up front: it reads the server's own\n"
      "/metrics every --watch-interval-s, and when the traffic (rate, prompt lengths) or the\n"
      "SLO attainment calls for it, moves the knobs one step within the space, at most once\n"
      "per interval, logging each move and why.",
      CommonFlagNames(),
      {"set"}};
  for (const char* f :
       {"addr", "http_addr", "config", "pid", "ttft_p99", "itl_p99", "budget_s", "min_run_s",
        "min_run_requests", "repeats", "finalists", "eta", "reload_timeout_s", "out", "watch",
        "watch_interval_s", "watch_for_s", "watch_satisfied"}) {
    spec.flags.push_back(f);
  }
  return spec;
}

// What the command line says of the search; an error message for bad usage.
std::string SearchOptions(TuneOptions& options) {
  options.budget_s = absl::GetFlag(FLAGS_budget_s);
  options.min_run_s = absl::GetFlag(FLAGS_min_run_s);
  options.repeats = absl::GetFlag(FLAGS_repeats);
  options.finalists = absl::GetFlag(FLAGS_finalists);
  options.eta = absl::GetFlag(FLAGS_eta);
  if (absl::GetFlag(FLAGS_seed) != 0) options.seed = absl::GetFlag(FLAGS_seed);
  if (absl::Status s = ValidateTuneOptions(options); !s.ok()) {
    return absl::StrCat(
        "bad search options (--budget-s, --min-run-s, --eta, --finalists, "
        "--repeats): ",
        s.message());
  }
  return "";
}

// The mean arrival rate of open-loop traffic (--rate over the workload's own; a trace's, scaled);
// 0 for a closed loop.
double OpenLoopRate(const RunOptions& run, const v1::Workload& workload) {
  if (run.concurrency > 0) return 0;
  if (run.rate_rps > 0) return run.rate_rps;
  return workload.arrival().has_open_loop() ? workload.arrival().open_loop().rate_rps() : 0;
}

std::string Dashed(const std::string& flag) {
  return absl::StrCat("--", absl::StrReplaceAll(flag, {{"_", "-"}}));
}

void Log(const std::string& line) {
  std::printf("%s %s\n", absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone()).c_str(),
              line.c_str());
  std::fflush(stdout);
}

absl::StatusOr<WatchCounters> Scrape(const ServerTarget& target, const SloTargets& slo) {
  absl::StatusOr<std::string> text =
      HttpGetText(target.metrics_address, "/metrics", target.api_key, absl::Seconds(10));
  if (!text.ok()) return text.status();
  return ReadWatchCounters(*text, slo);
}

// --watch: until --watch-for-s runs out (or forever), reads a window of the server's /metrics
// every interval and lets the controller move the knobs.
int Watch(LiveServer& server, const ServerTarget& target, const SloTargets& slo,
          const std::vector<SweepAxis>& axes, const std::vector<std::vector<Override>>& space) {
  absl::StatusOr<int> start = server.PointInForce(space);
  if (!start.ok()) {
    std::fprintf(stderr, "convoy-bench: %s\n", start.status().ToString().c_str());
    return 1;
  }
  if (*start < 0) {
    Log(absl::StrCat("the config in force is no point of the space; starting from ",
                     OverrideLabel(space[0])));
    if (absl::Status s = server.Apply(space[0]); !s.ok()) {
      std::fprintf(stderr, "convoy-bench: %s\n", s.ToString().c_str());
      return 1;
    }
    start = 0;
  }
  std::vector<int> sizes;
  for (const SweepAxis& axis : axes) sizes.push_back(static_cast<int>(axis.values.size()));
  WatchOptions options;
  options.interval = absl::Seconds(absl::GetFlag(FLAGS_watch_interval_s));
  options.satisfied = absl::GetFlag(FLAGS_watch_satisfied);
  WatchController controller(sizes, *start, absl::Now(), options);
  Log(absl::StrCat("watching; in force: ", OverrideLabel(space[*start])));
  const absl::Time end = absl::GetFlag(FLAGS_watch_for_s) > 0
                             ? absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_watch_for_s))
                             : absl::InfiniteFuture();
  absl::StatusOr<WatchCounters> before = Scrape(target, slo);
  absl::Time since = absl::Now();
  while (absl::Now() < end && !interrupted) {
    absl::SleepFor(std::min(options.interval, end - absl::Now()));
    if (interrupted) break;
    absl::StatusOr<WatchCounters> after = Scrape(target, slo);
    const absl::Time now = absl::Now();
    if (!after.ok() || !before.ok()) {
      Log(absl::StrCat("cannot read /metrics: ", (after.ok() ? before : after).status().message()));
      before = after;
      since = now;
      continue;
    }
    const WatchWindow window = Difference(*before, *after, absl::ToDoubleSeconds(now - since));
    before = after;
    since = now;
    std::optional<WatchMove> move = controller.Observe(now, window);
    if (!move.has_value()) continue;
    Log(absl::StrCat("moving to ", OverrideLabel(space[move->point]), ": ", move->reason));
    if (absl::Status s = server.Apply(space[move->point]); s.ok()) {
      controller.Moved(move->point);
    } else {
      controller.Failed(move->point);
      Log(absl::StrCat("the move failed, staying on ", OverrideLabel(space[controller.current()]),
                       ": ", s.message()));
    }
    // The next window starts under the new knobs, once the requests the old ones queued have had
    // a moment to drain (its own length is the interval again).
    absl::SleepFor(std::min(options.settle_fraction * options.interval, end - absl::Now()));
    before = Scrape(target, slo);
    since = absl::Now();
  }
  return 0;
}

}  // namespace

int TuneCommand(int argc, char** argv) {
  const convoy::cli::CommandLine spec = TuneCommandLine();
  convoy::cli::ParsedFlags parsed;
  if (int code = convoy::cli::Parse(argc, argv, spec, &parsed); code >= 0) return code;
  LiveServerOptions live;
  RunOptions& run = live.run_options;
  const bool watch = absl::GetFlag(FLAGS_watch);
  if (watch) {
    if (absl::GetFlag(FLAGS_http_addr).empty()) {
      return convoy::cli::BadUsage(spec, "--watch reads the server's /metrics: give --http-addr");
    }
    if (!(absl::GetFlag(FLAGS_watch_interval_s) > 0) || absl::GetFlag(FLAGS_watch_for_s) < 0) {
      return convoy::cli::BadUsage(
          spec, "--watch-interval-s must be above 0 and --watch-for-s not negative");
    }
    if (const double satisfied = absl::GetFlag(FLAGS_watch_satisfied);
        !(satisfied > 0 && satisfied <= 1)) {
      return convoy::cli::BadUsage(
          spec, absl::StrCat("--watch-satisfied must be in (0, 1], not ", satisfied));
    }
  } else if (std::string error = CommonOptions(run, live.target.protocol); !error.empty()) {
    return convoy::cli::BadUsage(spec, error);
  }
  for (const char* required : {"addr", "config"}) {
    if (!parsed.specified.count(required)) {
      return convoy::cli::BadUsage(spec, absl::StrCat(Dashed(required), " is required"));
    }
  }
  if (parsed.specified.count("duration_s") || parsed.specified.count("requests")) {
    return convoy::cli::BadUsage(
        spec,
        "tune sets each run's length itself: give --budget-s and --min-run-s, not "
        "--duration-s or --requests");
  }
  if (parsed.specified.count("ttft_ms") || parsed.specified.count("itl_ms")) {
    return convoy::cli::BadUsage(spec, "tune takes its SLOs as --ttft-p99 and --itl-p99");
  }
  run.slo.ttft_s = absl::GetFlag(FLAGS_ttft_p99) * 1e-3;
  run.slo.itl_s = absl::GetFlag(FLAGS_itl_p99) * 1e-3;
  if (watch && !absl::GetFlag(FLAGS_class_slo).empty()) {
    return convoy::cli::BadUsage(
        spec,
        "--watch reads the server's own latency histograms, which are not kept per class: give "
        "--ttft-p99 and --itl-p99, not --class-slo");
  }
  if (!run.slo.Any()) {
    return convoy::cli::BadUsage(
        spec,
        "give an SLO: --ttft-p99 MS and/or --itl-p99 MS above 0, or per class with --class-slo");
  }
  if (run.slo.ttft_s < 0 || run.slo.itl_s < 0) {
    return convoy::cli::BadUsage(spec, "--ttft-p99 and --itl-p99 must not be negative");
  }
  std::vector<double> rates;
  if (!ParseRates(absl::GetFlag(FLAGS_rate), rates) || rates.size() > 1) {
    return convoy::cli::BadUsage(spec, "--rate must be one number above 0");
  }
  if (!rates.empty()) run.rate_rps = rates[0];
  if (run.rate_rps > 0 && run.concurrency > 0) {
    return convoy::cli::BadUsage(spec, "give --rate or --concurrency, not both");
  }
  if (absl::GetFlag(FLAGS_pid) < 0)
    return convoy::cli::BadUsage(spec, "--pid must not be negative");
  if (!(absl::GetFlag(FLAGS_reload_timeout_s) > 0)) {
    return convoy::cli::BadUsage(spec, "--reload-timeout-s must be above 0");
  }
  TuneOptions search;
  if (std::string error = SearchOptions(search); !error.empty()) {
    return convoy::cli::BadUsage(spec, error);
  }
  std::vector<SweepAxis> axes;
  for (const std::string& text : parsed.values["set"]) {
    absl::StatusOr<SweepAxis> axis = ParseSweepAxis(text);
    if (!axis.ok()) return convoy::cli::BadUsage(spec, std::string(axis.status().message()));
    axes.push_back(*std::move(axis));
  }
  if (axes.empty()) {
    return convoy::cli::BadUsage(spec,
                                 "give the space to search: --set KEY=V1,V2,... (one or more)");
  }
  const int min_run_requests = absl::GetFlag(FLAGS_min_run_requests);
  if (min_run_requests < 0) {
    return convoy::cli::BadUsage(spec, "--min-run-requests must not be negative");
  }
  std::optional<Trace> trace;
  std::string shortest_run = absl::StrCat(search.min_run_s, " s");
  if (!watch) {
    absl::StatusOr<v1::Workload> workload = WorkloadFromFlags(trace, run);
    if (!workload.ok()) {
      return convoy::cli::BadUsage(spec, std::string(workload.status().message()));
    }
    live.workload = *std::move(workload);
    // A run of a few requests ranks configs by chance: at a low rate the shortest run grows.
    const double rate = OpenLoopRate(run, live.workload);
    if (rate > 0 && min_run_requests / rate > search.min_run_s) {
      search.min_run_s = std::ceil(min_run_requests / rate * 1000) / 1000;
      shortest_run = absl::StrCat(search.min_run_s, " s (", min_run_requests, " requests at ", rate,
                                  " req/s)");
    }
  }
  live.config_path = absl::GetFlag(FLAGS_config);
  live.pid = absl::GetFlag(FLAGS_pid);
  live.reload_timeout = absl::Seconds(absl::GetFlag(FLAGS_reload_timeout_s));
  live.interrupted = [] { return interrupted != 0; };
  live.target.http_address = absl::GetFlag(FLAGS_http_addr);
  live.target.metrics_address = live.target.http_address;
  live.target.api_key = absl::GetFlag(FLAGS_api_key);
  if (live.target.protocol == Protocol::kOpenAi && live.target.http_address.empty()) {
    return convoy::cli::BadUsage(spec, "--protocol openai needs --http-addr HOST:PORT");
  }
  live.target.channel = MakeChannel(absl::GetFlag(FLAGS_addr));

  // Every point must make a config before any is tried.
  const std::vector<std::vector<Override>> space = CartesianProduct(axes);
  absl::StatusOr<std::unique_ptr<LiveServer>> server = LiveServer::Create(live);
  if (!server.ok()) return convoy::cli::BadUsage(spec, std::string(server.status().message()));
  for (const std::vector<Override>& point : space) {
    if (absl::StatusOr<std::string> text = (*server)->ConfigText(point); !text.ok()) {
      return convoy::cli::BadUsage(spec, std::string(text.status().message()));
    }
  }
  if (absl::Status serving = WaitUntilServing(live.target.channel.get(), absl::Seconds(30),
                                              live.target.api_key, nullptr);
      !serving.ok()) {
    std::fprintf(stderr, "convoy-bench: %s: %s\n", absl::GetFlag(FLAGS_addr).c_str(),
                 serving.ToString().c_str());
    return 1;
  }
  CatchInterrupts();
  if (watch) return Watch(**server, live.target, run.slo, axes, space);
  std::printf(
      "tune: %zu point(s), budget %g s, shortest run %s, SLO: TTFT <= %g ms, mean ITL <= %g ms, "
      "traffic %s\n",
      space.size(), search.budget_s, shortest_run.c_str(), run.slo.ttft_s * 1e3,
      run.slo.itl_s * 1e3, live.workload.name().c_str());
  std::fflush(stdout);

  const TuneResult result = Tune(space, **server, search, [] { return absl::Now(); });
  if (interrupted) {
    std::fprintf(stderr, "convoy-bench: interrupted; putting %s back as it was\n",
                 live.config_path.c_str());
    if (absl::Status s = (*server)->Restore(); !s.ok()) {
      std::fprintf(stderr, "convoy-bench: %s\n", s.ToString().c_str());
    }
    return 130;
  }
  std::printf("\n%s", FormatTuneTable(result).c_str());
  if (!result.final_apply_error.empty()) {
    std::fprintf(stderr, "convoy-bench: the best config could not be put back in force: %s\n",
                 result.final_apply_error.c_str());
  }
  const std::string title = absl::StrCat("convoy-bench tune: ", live.workload.name());
  const std::vector<RunResult> frontier = FrontierRuns(result);
  absl::Status written = absl::OkStatus();
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    written.Update(WriteFile(path, TuneToJson(result).dump(2) + "\n"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_svg); !path.empty() && !frontier.empty()) {
    written.Update(WriteFile(path, LatencyThroughputSvg(frontier, title)));
  }
  if (const std::string path = absl::GetFlag(FLAGS_markdown); !path.empty()) {
    written.Update(WriteFile(path, FormatFrontierMarkdown(frontier)));
  }
  const PointSummary* best = result.best_point();
  if (best != nullptr) {
    absl::StatusOr<std::string> text = (*server)->ConfigText(space[best->point]);
    if (text.ok()) {
      written.Update(WriteFile(absl::GetFlag(FLAGS_out), *text));
      std::printf("best config written to %s\n", absl::GetFlag(FLAGS_out).c_str());
    } else {
      written.Update(text.status());
    }
  }
  if (!written.ok()) {
    std::fprintf(stderr, "convoy-bench: %s\n", written.ToString().c_str());
    return 1;
  }
  return best != nullptr ? 0 : 1;
}

}  // namespace convoy::bench
