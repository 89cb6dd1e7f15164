// convoy-bench: a load generator for convoy's APIs.
//   convoy-bench run --addr HOST:PORT (--workload FILE | --trace FILE [--rate-scale X])
//                    [--duration-s S | --requests N]
//                    [--rate R | --concurrency N] [--ttft-ms X --itl-ms Y]
//                    [--protocol native|openai|kserve] [--http-addr HOST:PORT]
//                    [--api-key KEY] [--metrics-addr HOST:PORT] [--price-per-hour P]
//                    [--json F --csv F --svg F]
//   convoy-bench sweep --convoyd PATH --model DIR --base-config FILE --workload FILE
//                      --set KEY=V1,V2 [--set ...] [--rate R1,R2,...] [...as run]
//                      [--json F --csv F --svg F --markdown F]
//   convoy-bench tune --addr HOST:PORT --config FILE [--pid PID] (--workload FILE | --trace FILE)
//                     --ttft-p99 MS --itl-p99 MS --set KEY=V1,V2 [--set ...] [--budget-s S]
//                     [--watch] [--out F --json F --svg F --markdown F]   (tune_command.h)
// --api-key KEY goes with every call. `sweep` starts convoyd once per combination
// of the --set values (on free loopback ports), runs the workload against it at each rate, stops
// it, and prints the frontier: per config its goodput and latencies, the best goodput marked.
// --protocol picks the client: convoy's own InferStream (native, the default), KServe v2
// ModelStreamInfer on the same gRPC port (kserve), or streamed OpenAI /v1/completions on the HTTP
// port (openai). --trace replays convoyd's own request trace (convoyd --request-trace) at its
// recorded times, scaled by --rate-scale. Both report what was measured of the server: cold
// start (sweep, which starts it), peak resident memory and KV use (from /metrics), error rate,
// and with --price-per-hour the cost per 1,000 requests. Bad usage: a message and exit code 2.
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/bench_flags.h"
#include "bench/loadgen/client.h"
#include "bench/loadgen/config_override.h"
#include "bench/loadgen/daemon_process.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/svg_plot.h"
#include "bench/loadgen/trace.h"
#include "bench/loadgen/tune_command.h"
#include "bench/loadgen/workload.h"
#include "convoy/status_macros.h"
#include "google/protobuf/text_format.h"
#include "tools/cli_flags.h"

namespace {

namespace bench = convoy::bench;

convoy::cli::CommandLine RunCommandLine() {
  convoy::cli::CommandLine spec = {
      "convoy-bench run",
      "convoy-bench run --addr HOST:PORT (--workload FILE | --trace FILE [--rate-scale X])\n"
      "                 [--duration-s S | --requests N]\n"
      "                 [--rate R | --concurrency N] [--ttft-ms X --itl-ms Y]\n"
      "                 [--protocol native|openai|kserve] [--http-addr HOST:PORT]\n"
      "                 [--metrics-addr HOST:PORT] [--price-per-hour P]\n"
      "                 [--api-key KEY] [--json F --csv F --svg F]\n\n"
      "Sends a workload (or replays a request trace of convoyd --request-trace) to a running\n"
      "server and reports, per request class, TTFT, inter-token and end-to-end latency\n"
      "(p50/p95/p99), requests/s, output tokens/s, goodput and error rate; with the server's\n"
      "/metrics (--metrics-addr, else --http-addr) its peak memory and KV use; with\n"
      "--price-per-hour the cost per 1,000 requests. The model is read from --addr (gRPC)\n"
      "whatever the protocol; openai requests go to --http-addr.",
      bench::CommonFlagNames(),
      {}};
  spec.flags.push_back("addr");
  spec.flags.push_back("http_addr");
  spec.flags.push_back("metrics_addr");
  spec.flags.push_back("label");
  return spec;
}

convoy::cli::CommandLine SweepCommandLine() {
  convoy::cli::CommandLine spec = {
      "convoy-bench sweep",
      "convoy-bench sweep --convoyd PATH --model DIR --base-config FILE --workload FILE\n"
      "                   --set KEY=V1,V2 [--set ...] [--rate R1,R2,...] [--ttft-ms X --itl-ms Y]\n"
      "                   [--protocol native|openai|kserve] [--api-key KEY]\n"
      "                   [--json F --csv F --svg F --markdown F]\n\n"
      "Starts convoyd for every combination of the --set values (KEY: a server config field such\n"
      "as mode, max_batch_size, max_queue_delay_microseconds, max_num_batched_tokens,\n"
      "prefill_chunk_size, or scheduler.x / kv_cache.x), runs the workload against each, and\n"
      "prints the frontier: goodput and latencies per config, the best goodput marked. With\n"
      "--api-key, the base config must list that key (frontend.api_key).",
      bench::CommonFlagNames(),
      {"set"}};
  for (const char* f : {"convoyd", "model", "base_config", "startup_timeout_s", "work_dir"}) {
    spec.flags.push_back(f);
  }
  return spec;
}

absl::Status WriteOutputs(const std::vector<bench::RunResult>& runs, bool single,
                          const std::string& title) {
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    const nlohmann::json j = single ? bench::RunToJson(runs[0]) : bench::SweepToJson(runs);
    RETURN_IF_ERROR(bench::WriteFile(path, j.dump(2) + "\n"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    RETURN_IF_ERROR(bench::WriteFile(path, bench::FormatCsv(runs)));
  }
  if (const std::string path = absl::GetFlag(FLAGS_svg); !path.empty()) {
    RETURN_IF_ERROR(bench::WriteFile(path, bench::LatencyThroughputSvg(runs, title)));
  }
  if (const std::string path = absl::GetFlag(FLAGS_markdown); !path.empty()) {
    RETURN_IF_ERROR(bench::WriteFile(path, bench::FormatFrontierMarkdown(runs)));
  }
  return absl::OkStatus();
}

int RunCommand(int argc, char** argv) {
  const convoy::cli::CommandLine spec = RunCommandLine();
  convoy::cli::ParsedFlags parsed;
  if (int code = convoy::cli::Parse(argc, argv, spec, &parsed); code >= 0) return code;
  bench::RunOptions options;
  bench::ServerTarget target;
  if (std::string error = bench::CommonOptions(options, target.protocol); !error.empty()) {
    return convoy::cli::BadUsage(spec, error);
  }
  const std::string addr = absl::GetFlag(FLAGS_addr);
  if (addr.empty()) return convoy::cli::BadUsage(spec, "--addr HOST:PORT is required");
  target.http_address = absl::GetFlag(FLAGS_http_addr);
  target.api_key = absl::GetFlag(FLAGS_api_key);
  target.metrics_address = absl::GetFlag(FLAGS_metrics_addr).empty()
                               ? target.http_address
                               : absl::GetFlag(FLAGS_metrics_addr);
  if (target.protocol == bench::Protocol::kOpenAi && target.http_address.empty()) {
    return convoy::cli::BadUsage(spec, "--protocol openai needs --http-addr HOST:PORT");
  }
  std::vector<double> rates;
  if (!bench::ParseRates(absl::GetFlag(FLAGS_rate), rates) || rates.size() > 1) {
    return convoy::cli::BadUsage(spec, "--rate must be one number above 0");
  }
  if (!rates.empty()) options.rate_rps = rates[0];
  if (options.rate_rps > 0 && options.concurrency > 0) {
    return convoy::cli::BadUsage(spec, "give --rate or --concurrency, not both");
  }
  options.config_label = absl::GetFlag(FLAGS_label).empty() ? addr : absl::GetFlag(FLAGS_label);
  std::optional<bench::Trace> trace;
  absl::StatusOr<bench::v1::Workload> workload = bench::WorkloadFromFlags(trace, options);
  if (!workload.ok()) return convoy::cli::BadUsage(spec, std::string(workload.status().message()));

  target.channel = bench::MakeChannel(addr);
  if (absl::Status serving =
          bench::WaitUntilServing(target.channel.get(), absl::Seconds(30), target.api_key, nullptr);
      !serving.ok()) {
    std::fprintf(stderr, "convoy-bench: %s: %s\n", addr.c_str(), serving.ToString().c_str());
    return 1;
  }
  absl::StatusOr<bench::RunResult> result = bench::RunWorkload(target, *workload, options);
  if (!result.ok()) {
    std::fprintf(stderr, "convoy-bench: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const bench::ClassStats* all = result->all();
  std::printf("workload: %s (%s), protocol %s: %lld output tokens in %lld messages\n%s",
              workload->name().c_str(),
              (trace ? absl::GetFlag(FLAGS_trace) : absl::GetFlag(FLAGS_workload)).c_str(),
              result->protocol.c_str(), static_cast<long long>(all ? all->output_tokens : 0),
              static_cast<long long>(all ? all->output_messages : 0),
              bench::FormatClassTable(*result).c_str());
  if (absl::Status s = WriteOutputs({*result}, true, workload->name()); !s.ok()) {
    std::fprintf(stderr, "convoy-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

// Runs the workload against one config at each rate (or once); the results, failed ones included.
std::vector<bench::RunResult> RunOneConfig(const convoy::v1::ServerConfig& config,
                                           const std::string& label, int number,
                                           const std::string& work_dir,
                                           const bench::v1::Workload& workload,
                                           const bench::RunOptions& base_options,
                                           bench::Protocol protocol, const std::string& api_key,
                                           const std::vector<double>& rates) {
  std::vector<bench::RunResult> results;
  auto fail = [&](const absl::Status& status) {
    for (size_t i = 0; i < std::max<size_t>(rates.size(), 1); ++i) {
      bench::RunResult r;
      r.config = label;
      r.offered_rps = rates.empty() ? 0 : rates[i];
      r.error = std::string(status.message().substr(0, status.message().find('\n')));
      results.push_back(r);
    }
    std::fprintf(stderr, "convoy-bench: config '%s' failed: %s\n", label.c_str(),
                 status.ToString().c_str());
    return results;
  };
  const std::string dir = absl::StrCat(work_dir, "/config-", number);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return fail(absl::InternalError(absl::StrCat("cannot create ", dir)));
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  const std::string config_path = dir + "/config.pbtxt";
  if (absl::Status s = bench::WriteFile(config_path, absl::StrCat("# ", label, "\n", text));
      !s.ok()) {
    return fail(s);
  }
  bench::DaemonSpec daemon_spec;
  daemon_spec.convoyd = absl::GetFlag(FLAGS_convoyd);
  daemon_spec.config_path = config_path;
  daemon_spec.model_dir = absl::GetFlag(FLAGS_model);
  daemon_spec.work_dir = dir;
  absl::StatusOr<std::unique_ptr<bench::DaemonProcess>> daemon =
      bench::DaemonProcess::Start(daemon_spec);
  if (!daemon.ok()) return fail(daemon.status());
  const absl::Duration startup = absl::Seconds(absl::GetFlag(FLAGS_startup_timeout_s));
  absl::StatusOr<std::string> addr = (*daemon)->WaitForAddress(startup);
  if (!addr.ok()) return fail(addr.status());
  bench::ServerTarget target;
  target.protocol = protocol;
  target.channel = bench::MakeChannel(*addr);
  target.api_key = api_key;
  absl::StatusOr<std::string> http_addr = (*daemon)->WaitForHttpAddress(startup);
  if (!http_addr.ok()) return fail(http_addr.status());
  target.http_address = *http_addr;
  target.metrics_address = *http_addr;
  bench::DaemonProcess* process = daemon->get();
  if (absl::Status s = bench::WaitUntilServing(target.channel.get(), startup, target.api_key,
                                               [process] { return process->CheckAlive(); });
      !s.ok()) {
    return fail(s);
  }
  std::vector<double> loads = rates;
  if (loads.empty()) loads.push_back(0);
  for (double rate : loads) {
    bench::RunOptions options = base_options;
    options.rate_rps = rate;
    options.config_label = label;
    // Only the first run follows the daemon's start.
    if (results.empty()) options.server_started = (*daemon)->started_at();
    absl::StatusOr<bench::RunResult> result = bench::RunWorkload(target, workload, options);
    if (!result.ok()) {
      bench::RunResult r;
      r.config = label;
      r.offered_rps = rate;
      r.error = std::string(result.status().message());
      results.push_back(r);
      continue;
    }
    std::printf("%s\n", bench::FormatClassTable(*result).c_str());
    std::fflush(stdout);
    results.push_back(*std::move(result));
  }
  if (absl::Status s = (*daemon)->Stop(absl::Seconds(60)); !s.ok()) {
    const std::string message(s.message());
    std::fprintf(stderr, "convoy-bench: stopping convoyd for '%s': %s (log: %s)\n", label.c_str(),
                 message.substr(0, message.find(';')).c_str(), (*daemon)->log_path().c_str());
  }
  return results;
}

int SweepCommand(int argc, char** argv) {
  const convoy::cli::CommandLine spec = SweepCommandLine();
  convoy::cli::ParsedFlags parsed;
  if (int code = convoy::cli::Parse(argc, argv, spec, &parsed); code >= 0) return code;
  bench::RunOptions options;
  bench::Protocol protocol = bench::Protocol::kNative;
  if (std::string error = bench::CommonOptions(options, protocol); !error.empty()) {
    return convoy::cli::BadUsage(spec, error);
  }
  for (const char* required : {"convoyd", "model", "base_config"}) {
    if (!parsed.specified.count(required)) {
      return convoy::cli::BadUsage(
          spec, absl::StrCat("--", absl::StrReplaceAll(required, {{"_", "-"}}), " is required"));
    }
  }
  std::vector<double> rates;
  if (!bench::ParseRates(absl::GetFlag(FLAGS_rate), rates)) {
    return convoy::cli::BadUsage(spec, "--rate must be a comma-separated list of numbers above 0");
  }
  if (!rates.empty() && options.concurrency > 0) {
    return convoy::cli::BadUsage(spec, "give --rate or --concurrency, not both");
  }
  std::vector<bench::SweepAxis> axes;
  for (const std::string& text : parsed.values["set"]) {
    absl::StatusOr<bench::SweepAxis> axis = bench::ParseSweepAxis(text);
    if (!axis.ok()) return convoy::cli::BadUsage(spec, std::string(axis.status().message()));
    axes.push_back(*std::move(axis));
  }
  std::optional<bench::Trace> trace;
  absl::StatusOr<bench::v1::Workload> workload = bench::WorkloadFromFlags(trace, options);
  if (!workload.ok()) return convoy::cli::BadUsage(spec, std::string(workload.status().message()));
  const std::string base_path = absl::GetFlag(FLAGS_base_config);
  std::ifstream base_in(base_path);
  if (!base_in) return convoy::cli::BadUsage(spec, absl::StrCat("cannot read ", base_path));
  std::stringstream base_text;
  base_text << base_in.rdbuf();
  absl::StatusOr<convoy::v1::ServerConfig> base =
      bench::ParseServerConfigText(base_text.str(), base_path);
  if (!base.ok()) return convoy::cli::BadUsage(spec, std::string(base.status().message()));

  const std::vector<std::vector<bench::Override>> combos = bench::CartesianProduct(axes);
  std::vector<convoy::v1::ServerConfig> configs;
  for (const auto& combo : combos) {
    convoy::v1::ServerConfig config = *base;
    for (const bench::Override& o : combo) {
      if (absl::Status s = bench::ApplyOverride(o, &config); !s.ok()) {
        return convoy::cli::BadUsage(spec, std::string(s.message()));
      }
    }
    configs.push_back(std::move(config));
  }
  std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  if (work_dir.empty()) {
    char pattern[] = "/tmp/convoy-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      std::fprintf(stderr, "convoy-bench: cannot create a directory in /tmp\n");
      return 1;
    }
    work_dir = pattern;
  } else if (mkdir(work_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "convoy-bench: cannot create %s\n", work_dir.c_str());
    return 1;
  }
  std::printf("sweep: %zu config(s) x %zu load(s) of workload %s; configs and logs in %s\n\n",
              configs.size(), std::max<size_t>(rates.size(), 1), workload->name().c_str(),
              work_dir.c_str());
  std::fflush(stdout);

  std::vector<bench::RunResult> runs;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string label = bench::OverrideLabel(combos[i]);
    std::fprintf(stderr, "convoy-bench: config %zu/%zu: %s\n", i + 1, configs.size(),
                 label.c_str());
    for (bench::RunResult& r :
         RunOneConfig(configs[i], label, static_cast<int>(i), work_dir, *workload, options,
                      protocol, absl::GetFlag(FLAGS_api_key), rates)) {
      runs.push_back(std::move(r));
    }
  }
  std::printf("frontier (workload %s, SLO: TTFT <= %g ms, mean ITL <= %g ms):\n%s",
              workload->name().c_str(), options.slo.ttft_s * 1e3, options.slo.itl_s * 1e3,
              bench::FormatFrontierTable(runs).c_str());
  if (absl::Status s =
          WriteOutputs(runs, false, absl::StrCat("convoy-bench sweep: ", workload->name()));
      !s.ok()) {
    std::fprintf(stderr, "convoy-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return bench::BestGoodput(runs) >= 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: convoy-bench run --addr HOST:PORT --workload FILE [...]\n"
      "       convoy-bench sweep --convoyd PATH --model DIR --base-config FILE --workload FILE "
      "--set KEY=V1,V2 [...]\n"
      "       convoy-bench tune --addr HOST:PORT --config FILE --workload FILE --ttft-p99 MS "
      "--itl-p99 MS --set KEY=V1,V2 [...]\n"
      "'convoy-bench COMMAND --help' lists the flags of run, sweep and tune.\n";
  if (argc < 2) {
    std::fprintf(stderr, "%s", usage.c_str());
    return convoy::cli::kBadUsage;
  }
  const std::string command = argv[1];
  if (command == "run") return RunCommand(argc - 1, argv + 1);
  if (command == "sweep") return SweepCommand(argc - 1, argv + 1);
  if (command == "tune") return bench::TuneCommand(argc - 1, argv + 1);
  if (command == "--help" || command == "-h" || command == "help") {
    std::printf("%s", usage.c_str());
    return 0;
  }
  std::fprintf(stderr, "convoy-bench: unknown command '%s'\n%s", command.c_str(), usage.c_str());
  return convoy::cli::kBadUsage;
}
