// convoy-bench against a real convoyd on a tiny random model: what a run reports of the server
// (memory, error rate, cost; cold start when sweep starts it), convoyd's request trace and its
// replay, and convoy-bench tune over a small space with a short budget: it goes on past a refused
// reload, leaves the server on the best point and writes that config, which convoyd loads.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/config_override.h"
#include "daemon/daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"
#include "test_models.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Short prompts and answers at a few requests per second: a run of a couple of seconds measures
// something on one core.
constexpr char kWorkload[] = R"(name: "tiny"
seed: 3
arrival { open_loop { rate_rps: 6 pattern: POISSON } }
request_class {
  name: "chat"
  priority: 1
  prompt_tokens { uniform { min: 8 max: 24 } }
  output_tokens { fixed: 6 }
}
duration_s: 2
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class BenchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ProcessDir("bench_e2e");
    workload_ = dir_ + "/tiny.pbtxt";
    std::ofstream(workload_) << kWorkload;
    model_dir_ = WriteTestModel("bench_e2e", TinyModelConfig());
  }

  std::string Config(const std::string& scheduler_fields) const {
    return DefaultTestConfig("", absl::StrCat("max_num_batched_tokens: 512 ", scheduler_fields));
  }

  std::string Bench(const std::string& args) const {
    return absl::StrCat(CONVOY_BENCH_PATH, " ", args, " --noprogress");
  }

  std::string dir_;
  std::string workload_;
  std::string model_dir_;
};

TEST_F(BenchE2eTest, ReportsMemoryErrorRateAndCostAndReplaysTheServersTrace) {
  const std::string trace = dir_ + "/trace.jsonl";
  auto daemon = DaemonProcess::Start(model_dir_, Config("max_batch_size: 8"), nullptr,
                                     {"--request-trace", trace});
  ASSERT_NE(daemon, nullptr);
  const std::string json = dir_ + "/run.json";
  const ProcessResult run = Execute(Bench(absl::StrCat(
      "run --addr ", daemon->address(), " --http-addr 127.0.0.1:", daemon->http_port(),
      " --workload ", workload_,
      " --requests 6 --price-per-hour 3.6 --ttft-ms 60000 --class-slo chat=0.001/0 --json ",
      json)));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // The chat class's own 1 µs TTFT target, not the run's minute, decides its goodput.
  EXPECT_THAT(run.out, HasSubstr("; chat: TTFT <= 0.001 ms, mean ITL <= -"));
  EXPECT_THAT(run.out, HasSubstr("peak RSS"));
  EXPECT_THAT(run.out, HasSubstr("per 1,000 requests at 3.6/hour"));
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_GT(report["server_memory"]["samples"].get<int>(), 0);
  EXPECT_GT(report["server_memory"]["peak_resident_bytes"].get<double>(), 1 << 20);
  EXPECT_GE(report["server_memory"]["peak_kv_usage"].get<double>(), 0);
  EXPECT_EQ(report["classes"].back()["error_rate"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(report["slo"]["by_class"]["chat"]["ttft_s"].get<double>(), 1e-6);
  EXPECT_EQ(report["classes"].back()["met_slo"].get<int>(), 0);
  // 3.6 per hour is 0.001 per second.
  EXPECT_NEAR(report["cost_per_1000_requests"].get<double>(),
              0.001 * report["elapsed_s"].get<double>() / 6 * 1000, 1e-9);
  EXPECT_TRUE(report["cold_start_s"].is_null()) << "run did not start the server";

  // The trace: the two warm-up requests and the six measured, lengths only. A line is written as
  // its request ends, which may come just after its client heard the end.
  std::vector<std::string> lines;
  for (const absl::Time until = absl::Now() + kLiveness; absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(10))) {
    lines = absl::StrSplit(ReadFile(trace), '\n', absl::SkipEmpty());
    if (lines.size() >= 8) break;
  }
  ASSERT_EQ(lines.size(), 8u);
  for (const std::string& line : lines) {
    const nlohmann::json entry = nlohmann::json::parse(line);
    EXPECT_GE(entry["prompt_tokens"].get<int>(), 8);
    EXPECT_EQ(entry["priority"], 1);
    EXPECT_EQ(entry["outcome"], "complete_length");
  }
  const std::string replayed = dir_ + "/replay.json";
  const ProcessResult replay = Execute(Bench(absl::StrCat(
      "run --addr ", daemon->address(), " --trace ", trace, " --rate-scale 4 --json ", replayed)));
  ASSERT_EQ(replay.exit_code, 0) << replay.out;
  const nlohmann::json replay_report = nlohmann::json::parse(ReadFile(replayed));
  EXPECT_EQ(replay_report["classes"].back()["completed"], 8);
  EXPECT_THAT(replay_report["arrival"].get<std::string>(), HasSubstr("x4"));

  // The trace is traffic tune can search for, too.
  const ProcessResult tune = Execute(Bench(absl::StrCat(
      "tune --addr ", daemon->address(), " --config ", daemon->config_path(), " --pid ",
      daemon->pid(), " --trace ", trace, " --rate-scale 4 --ttft-p99 5000",
      " --set max_batch_size=4,8 --budget-s 20 --min-run-s 1 --min-run-requests 0 --repeats 1"
      " --warmup 1 --out ",
      dir_, "/from-trace.pbtxt")));
  ASSERT_EQ(tune.exit_code, 0) << tune.out;
  EXPECT_THAT(tune.out, HasSubstr("traffic trace "));
  EXPECT_THAT(tune.out, HasSubstr("* best: max_batch_size="));

  // Bad traces and flags are named.
  std::ofstream(dir_ + "/bad.jsonl") << "{\"arrival_s\": 1}\n";
  const ProcessResult bad = Execute(
      Bench(absl::StrCat("run --addr ", daemon->address(), " --trace ", dir_, "/bad.jsonl")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.out, HasSubstr("bad.jsonl:1: no prompt_tokens"));
  const ProcessResult both = Execute(Bench(absl::StrCat(
      "run --addr ", daemon->address(), " --trace ", trace, " --workload ", workload_)));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.out, HasSubstr("give --workload FILE or --trace FILE"));
}

TEST_F(BenchE2eTest, SweepReportsColdStart) {
  const std::string base = dir_ + "/base.pbtxt";
  std::ofstream(base) << Config("max_batch_size: 8");
  const std::string json = dir_ + "/sweep.json";
  const ProcessResult sweep = Execute(Bench(absl::StrCat(
      "sweep --convoyd ", CONVOYD_PATH, " --model ", model_dir_, " --base-config ", base,
      " --workload ", workload_, " --requests 3 --set max_batch_size=4 --work-dir ", dir_,
      "/sweep --json ", json)));
  ASSERT_EQ(sweep.exit_code, 0) << sweep.out;
  EXPECT_THAT(sweep.out, HasSubstr("cold start"));
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  EXPECT_GT(report["runs"][0]["cold_start_s"].get<double>(), 0);
}

TEST_F(BenchE2eTest, TunesALiveServerAndWritesAConfigItLoads) {
  auto daemon = DaemonProcess::Start(model_dir_, Config("max_batch_size: 8"));
  ASSERT_NE(daemon, nullptr);
  const std::string out = dir_ + "/tuned.pbtxt";
  const std::string json = dir_ + "/tune.json";
  // max_batch_size 0 does not validate: convoyd refuses that reload, and the search goes on.
  const ProcessResult tune = Execute(Bench(
      absl::StrCat("tune --addr ", daemon->address(), " --config ", daemon->config_path(),
                   " --pid ", daemon->pid(), " --workload ", workload_,
                   " --ttft-p99 5000 --itl-p99 1000 --set max_batch_size=0,2,8"
                   " --set max_queue_delay_microseconds=0,1000 --budget-s 45 --min-run-s 1"
                   " --min-run-requests 9 --repeats 2 --finalists 2 --warmup 1 --drain-s 10 --out ",
                   out, " --json ", json, " --svg ", dir_, "/tune.svg")));
  ASSERT_EQ(tune.exit_code, 0) << tune.out;
  // 9 arrivals at the workload's 6 req/s take longer than --min-run-s.
  EXPECT_THAT(tune.out, HasSubstr("shortest run 1.5 s (9 requests at 6 req/s)"));
  EXPECT_THAT(tune.out, HasSubstr("reload refused"));
  EXPECT_THAT(tune.out, HasSubstr("* best: "));

  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  ASSERT_TRUE(report["best"].is_string());
  const std::string best = report["best"];
  std::set<std::string> measured;
  for (const nlohmann::json& run : report["runs"]) measured.insert(run["config"]);
  EXPECT_TRUE(measured.count(best)) << best << " was not one of the tested points";
  for (const std::string& label : measured) EXPECT_THAT(label, Not(HasSubstr("max_batch_size=0 ")));

  // The written config is the base with the best point's values, and the server runs it now.
  const std::string written = ReadFile(out);
  absl::StatusOr<v1::ServerConfig> parsed = bench::ParseServerConfigText(written, out);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  for (absl::string_view field : absl::StrSplit(best, ' ')) {
    const std::vector<std::string> kv = absl::StrSplit(field, '=');
    ASSERT_EQ(kv.size(), 2u);
    EXPECT_THAT(written, HasSubstr(absl::StrCat(kv[0], ": ", kv[1], "\n")));
  }
  EXPECT_EQ(ReadFile(daemon->config_path()), written);
  auto stub = daemon->inference();
  std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
  ASSERT_TRUE(info);
  v1::ServerConfig effective;
  absl::StatusOr<v1::ServerConfig> in_force =
      bench::ParseServerConfigText(info->effective_config(), "effective");
  ASSERT_TRUE(in_force.ok());
  EXPECT_EQ(in_force->scheduler().max_batch_size(), parsed->scheduler().max_batch_size());
  EXPECT_EQ(in_force->scheduler().max_queue_delay_microseconds(),
            parsed->scheduler().max_queue_delay_microseconds());
  EXPECT_GE(info->config_reloads_refused(), 1);

  // A fresh convoyd loads it as it is.
  auto fresh = DaemonProcess::Start(model_dir_, written);
  ASSERT_NE(fresh, nullptr) << written;
}

// An interrupted search puts the config file (and so the server) back as it was.
TEST_F(BenchE2eTest, AnInterruptedTunePutsTheConfigBack) {
  auto daemon = DaemonProcess::Start(model_dir_, Config("max_batch_size: 8"));
  ASSERT_NE(daemon, nullptr);
  const std::string original = ReadFile(daemon->config_path());
  // One SIGINT, as a terminal's Ctrl-C sends (timeout(1) would send two: to the process and to
  // its group). Early or late, the file must end as it was.
  const ProcessResult tune = Execute(absl::StrCat(
      Bench(absl::StrCat("tune --addr ", daemon->address(), " --config ", daemon->config_path(),
                         " --pid ", daemon->pid(), " --workload ", workload_,
                         " --ttft-p99 5000 --set max_batch_size=2,4 --set "
                         "max_queue_delay_microseconds=0,1000 --budget-s 60 --min-run-s 1 "
                         "--min-run-requests 0")),
      " & pid=$!; sleep 4; kill -INT $pid; wait $pid"));
  EXPECT_EQ(tune.exit_code, 130) << tune.out;
  EXPECT_EQ(ReadFile(daemon->config_path()), original) << tune.out;
  auto stub = daemon->inference();
  std::optional<v1::ServerInfo> info = WaitForServerInfo(*stub, [](const v1::ServerInfo& i) {
    return i.effective_config().find("max_batch_size: 8\n") != std::string::npos;
  });
  ASSERT_TRUE(info);
  EXPECT_THAT(info->effective_config(), HasSubstr("max_batch_size: 8\n")) << tune.out;
}

// --watch with no traffic: it finds the point in force, reads /metrics, and moves nothing (a
// window without requests says nothing).
TEST_F(BenchE2eTest, WatchStartsFromThePointInForceAndLeavesAQuietServerAlone) {
  auto daemon = DaemonProcess::Start(model_dir_, Config("max_batch_size: 8"));
  ASSERT_NE(daemon, nullptr);
  const std::string config_before = ReadFile(daemon->config_path());
  const ProcessResult watch = Execute(Bench(absl::StrCat(
      "tune --watch --addr ", daemon->address(), " --http-addr 127.0.0.1:", daemon->http_port(),
      " --config ", daemon->config_path(), " --pid ", daemon->pid(),
      " --ttft-p99 500 --set max_batch_size=4,8 --watch-interval-s 1 --watch-for-s 3")));
  ASSERT_EQ(watch.exit_code, 0) << watch.out;
  EXPECT_THAT(watch.out, HasSubstr("watching; in force: max_batch_size=8"));
  EXPECT_THAT(watch.out, Not(HasSubstr("moving to")));
  EXPECT_EQ(ReadFile(daemon->config_path()), config_before);
  const ProcessResult no_metrics = Execute(
      Bench(absl::StrCat("tune --watch --addr ", daemon->address(), " --config ",
                         daemon->config_path(), " --ttft-p99 500 --set max_batch_size=4,8")));
  EXPECT_EQ(no_metrics.exit_code, 2);
  EXPECT_THAT(no_metrics.out, HasSubstr("give --http-addr"));
}

TEST_F(BenchE2eTest, TuneRefusesBadUsageNamingIt) {
  const std::string tune = Bench(absl::StrCat("tune --addr 127.0.0.1:1 --workload ", workload_));
  ProcessResult r = Execute(tune + " --config /nonexistent.pbtxt --ttft-p99 100 --set batch=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent.pbtxt"));
  r = Execute(tune + " --config x --set batch=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("give an SLO"));
  r = Execute(tune + " --config x --ttft-p99 100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("--set KEY=V1,V2"));
  r = Execute(tune + " --config x --ttft-p99 100 --set batch=1 --budget-s 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("budget must be above 0"));
  r = Execute(tune + " --config x --ttft-p99 100 --set batch=1 --min-run-requests -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("--min-run-requests must not be negative"));
  r = Execute(tune + " --config x --ttft-p99 100 --set batch=1 --duration-s 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("not --duration-s"));
  r = Execute(tune + " --config x --class-slo chat=100 --set batch=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("class SLO 'chat=100': expected NAME=TTFT_MS/ITL_MS"));
  r = Execute(tune + " --config x --class-slo nosuch=100/0 --set batch=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("the workload does not have (nosuch); its classes are: chat"));
  r = Execute(tune +
              " --config x --watch --http-addr 127.0.0.1:1 --class-slo chat=100/0 --set "
              "batch=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("not --class-slo"));
  r = Execute(tune + " --config x --watch --http-addr 127.0.0.1:1 --watch-satisfied 1.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("--watch-satisfied must be in (0, 1], not 1.5"));
}

}  // namespace
}  // namespace convoy::testing
