// convoyd's live config reload: SIGHUP (or a changed file) under load applies the batcher's new
// knobs between steps without failing a request; a reload that changes a restart-only field, or
// that does not validate, is refused whole and the config in force stays.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "metrics/http_get.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kMaxTokens = 8;

// Writes the file whole and then moves it into place, as a ConfigMap update does: the daemon
// never reads half a file.
void RewriteConfig(const DaemonProcess& daemon, const std::string& text) {
  const std::string tmp = daemon.dir() + "/config.pbtxt.new";
  {
    std::ofstream out(tmp);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), daemon.config_path().c_str()), 0);
}

// Polls GetServerInfo until `done` holds; fails the test after kLiveness.
template <typename Predicate>
std::optional<v1::ServerInfo> WaitForInfo(DaemonProcess& daemon, Predicate done) {
  auto stub = daemon.inference();
  const absl::Time give_up = absl::Now() + kLiveness;
  while (absl::Now() < give_up) {
    std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
    if (info && done(*info)) return info;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ADD_FAILURE() << "the server did not get there within " << kLiveness << ":\n" << daemon.Log();
  return std::nullopt;
}

// One request, unary or streamed; checks that it ends with exactly one final answer, OK.
void OneRequest(v1::Inference::Stub& stub, int n, bool stream) {
  v1::InferRequest request = MakeRequest({1 + n % 50, 2, 3, 4 + n % 7}, kMaxTokens);
  if (!stream) {
    v1::InferResponse response;
    const grpc::Status status = CallInfer(stub, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.token_ids_size(), kMaxTokens);
    EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_LENGTH);
    return;
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto reader = stub.InferStream(&context, request);
  v1::InferStreamResponse message;
  int finals = 0;
  int tokens = 0;
  while (reader->Read(&message)) {
    tokens += message.token_ids_size();
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) ++finals;
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(tokens, kMaxTokens);
}

// Clients that keep sending requests (half of them streamed) until Stop.
class Load {
 public:
  Load(DaemonProcess* daemon, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, daemon, c] {
        auto stub = daemon->inference();
        for (int n = c; !stop_.load(); n += 1000) {
          OneRequest(*stub, n, /*stream=*/c % 2 == 1);
          sent_.fetch_add(1);
        }
      });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  int64_t sent() const { return sent_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> sent_{0};
  std::vector<std::thread> threads_;
};

std::string Config(const std::string& scheduler_fields) {
  return DefaultTestConfig("", absl::StrCat("max_num_batched_tokens: 4096 ", scheduler_fields));
}

TEST(DaemonReloadTest, SighupUnderLoadAppliesTheNewBatchSizeAndDelay) {
  const std::string model_dir = WriteTestModel("reload", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, Config("max_batch_size: 16"));
  ASSERT_NE(daemon, nullptr);
  {
    Load load(daemon.get(), 24);
    // Under the old config steps hold more than the new max_batch_size: the check after the
    // reload can fail.
    ASSERT_TRUE(WaitForInfo(*daemon, [](const v1::ServerInfo& info) {
      return info.largest_step_rows_since_reload() > 3;
    }));
    RewriteConfig(*daemon, Config("max_batch_size: 3 max_queue_delay_microseconds: 10000000"));
    daemon->Signal(SIGHUP);
    std::optional<v1::ServerInfo> reloaded = WaitForInfo(
        *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_applied() == 1; });
    ASSERT_TRUE(reloaded);
    EXPECT_EQ(reloaded->last_config_reload(), "applied");
    EXPECT_THAT(reloaded->effective_config(), HasSubstr("max_batch_size: 3\n"));
    EXPECT_THAT(reloaded->effective_config(),
                HasSubstr("max_queue_delay_microseconds: 10000000\n"));
    // The load goes on under the new knobs.
    const int64_t sent_at_reload = load.sent();
    ASSERT_TRUE(WaitForInfo(
        *daemon, [&](const v1::ServerInfo&) { return load.sent() >= sent_at_reload + 48; }));
    load.Stop();  // every request ended OK, with one final answer (checked by each client)
  }
  std::optional<v1::ServerInfo> after = GetServerInfo(*daemon->inference());
  ASSERT_TRUE(after);
  EXPECT_GE(after->largest_step_rows_since_reload(), 1);
  EXPECT_LE(after->largest_step_rows_since_reload(), 3);
  EXPECT_EQ(after->requests_failed(), 0);
  EXPECT_EQ(after->requests_rejected(), 0);

  // The new queue delay: once idle, the engine holds a lone request (the old delay, 0, ran it at
  // once) until max_batch_size requests wait (or 10 s pass), and then fires them together.
  ASSERT_TRUE(WaitForInfo(*daemon, [](const v1::ServerInfo& info) {
    return info.num_running() == 0 && info.num_waiting() == 0;
  }));
  auto stub = daemon->inference();
  std::vector<std::thread> waiting;
  waiting.emplace_back([&] { OneRequest(*stub, 1, /*stream=*/false); });
  std::optional<v1::ServerInfo> held =
      WaitForInfo(*daemon, [](const v1::ServerInfo& info) { return info.num_waiting() == 1; });
  ASSERT_TRUE(held);
  for (int poll = 0; poll < 20; ++poll) {
    absl::SleepFor(absl::Milliseconds(50));
    std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->steps(), held->steps()) << "a batch of one fired before the queue delay";
    EXPECT_EQ(info->num_waiting(), 1);
  }
  for (int n = 2; n <= 3; ++n) waiting.emplace_back([&, n] { OneRequest(*stub, n, false); });
  for (std::thread& t : waiting) t.join();
  std::optional<v1::ServerInfo> fired = GetServerInfo(*stub);
  ASSERT_TRUE(fired);
  EXPECT_GT(fired->steps(), held->steps());
  EXPECT_LE(fired->largest_step_rows_since_reload(), 3);
}

TEST(DaemonReloadTest, RefusedReloadsKeepTheConfigInForce) {
  const std::string model_dir = WriteTestModel("reload", TinyModelConfig());
  const std::string original = Config("max_batch_size: 16");
  auto daemon = DaemonProcess::Start(model_dir, original);
  ASSERT_NE(daemon, nullptr);
  auto stub = daemon->inference();
  std::optional<v1::ServerInfo> before = GetServerInfo(*stub);
  ASSERT_TRUE(before);
  ASSERT_FALSE(before->config_hash().empty());

  // A restart-only field (the KV cache's size) changed beside a live one: refused whole.
  std::string resized = original;
  const std::string budget = "memory_budget_bytes: 8388608";
  ASSERT_NE(resized.find(budget), std::string::npos);
  resized.replace(resized.find(budget), budget.size(), "memory_budget_bytes: 4194304");
  resized.replace(resized.find("max_batch_size: 16"), 18, "max_batch_size: 2");
  RewriteConfig(*daemon, resized);
  daemon->Signal(SIGHUP);
  std::optional<v1::ServerInfo> refused = WaitForInfo(
      *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_refused() == 1; });
  ASSERT_TRUE(refused);
  EXPECT_THAT(refused->last_config_reload(),
              HasSubstr("need a restart to change: kv_cache.memory_budget_bytes"));
  EXPECT_THAT(refused->last_config_reload(), Not(HasSubstr("max_batch_size")));
  EXPECT_EQ(refused->config_hash(), before->config_hash());
  EXPECT_THAT(refused->effective_config(), HasSubstr("max_batch_size: 16\n"));
  EXPECT_THAT(daemon->WaitForLog("refused, the config in force is kept"),
              HasSubstr("refused, the config in force is kept"));

  // A gRPC port in the file: the command line's --port 0 still overrides it, so nothing a
  // restart needs changes; but a listen address is not overridden for the metrics.
  RewriteConfig(*daemon, original + "metrics { listen_address: \"0.0.0.0\" }\n");
  daemon->Signal(SIGHUP);
  refused = WaitForInfo(
      *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_refused() == 2; });
  ASSERT_TRUE(refused);
  EXPECT_THAT(refused->last_config_reload(), HasSubstr("metrics.listen_address"));

  // A value that does not validate: refused with its file, line and field.
  RewriteConfig(*daemon, Config("max_batch_size: 0"));
  daemon->Signal(SIGHUP);
  refused = WaitForInfo(
      *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_refused() == 3; });
  ASSERT_TRUE(refused);
  EXPECT_THAT(refused->last_config_reload(),
              HasSubstr("config.pbtxt:1: scheduler.max_batch_size: max_batch_size must be at "
                        "least 1"));
  EXPECT_EQ(refused->config_hash(), before->config_hash());
  EXPECT_EQ(refused->config_reloads_applied(), 0);

  // The server serves on under the old config.
  OneRequest(*stub, 1, /*stream=*/false);
  const absl::StatusOr<HttpResponse> metrics = HttpGet(daemon->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, HasSubstr("convoy_config_reloads_total{result=\"refused\"} 3"));
  EXPECT_THAT(metrics->body, HasSubstr("convoy_config_reloads_total{result=\"applied\"} 0"));
  EXPECT_THAT(metrics->body, HasSubstr(absl::StrCat("convoy_config_info{hash=\"",
                                                    before->config_hash(), "\"} 1")));
}

// Without a signal: a changed file (as a ConfigMap update) is noticed and applied.
TEST(DaemonReloadTest, AChangedFileIsReloadedWithoutASignal) {
  const std::string model_dir = WriteTestModel("reload", TinyModelConfig());
  auto daemon = DaemonProcess::Start(model_dir, Config("max_batch_size: 16"));
  ASSERT_NE(daemon, nullptr);
  RewriteConfig(*daemon, Config("max_batch_size: 5 preferred_batch_size: 4"));
  std::optional<v1::ServerInfo> reloaded = WaitForInfo(
      *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_applied() == 1; });
  ASSERT_TRUE(reloaded);
  EXPECT_THAT(reloaded->effective_config(), HasSubstr("max_batch_size: 5\n"));
  EXPECT_THAT(reloaded->effective_config(), HasSubstr("preferred_batch_size: 4\n"));
  EXPECT_THAT(daemon->WaitForLog("config reload (the config file changed): applied"),
              HasSubstr("config reload (the config file changed): applied"));
  const absl::StatusOr<HttpResponse> metrics = HttpGet(daemon->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, HasSubstr(absl::StrCat("convoy_config_info{hash=\"",
                                                    reloaded->config_hash(), "\"} 1")));
}

// A change made while the model loads (before the file is watched) is still a change: it is
// reloaded once the server serves. The watcher used to take the file as it found it then as the
// config in force.
TEST(DaemonReloadTest, AChangeMadeWhileTheModelLoadsIsReloaded) {
  const std::string model_dir = WriteTestModel("reload", TinyModelConfig());
  auto daemon = DaemonProcess::StartListening(model_dir, Config("max_batch_size: 16"));
  ASSERT_NE(daemon, nullptr);
  RewriteConfig(*daemon, Config("max_batch_size: 6"));
  ASSERT_TRUE(daemon->WaitUntilServing());
  std::optional<v1::ServerInfo> reloaded = WaitForInfo(
      *daemon, [](const v1::ServerInfo& info) { return info.config_reloads_applied() == 1; });
  ASSERT_TRUE(reloaded);
  EXPECT_THAT(reloaded->effective_config(), HasSubstr("max_batch_size: 6\n"));
}

}  // namespace
}  // namespace convoy::testing
