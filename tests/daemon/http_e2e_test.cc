// convoyd's HTTP port end to end: liveness and readiness (GET /health and /ready, KServe's
// /v2/health/live and /v2/health/ready) while the model loads, once it serves and while it drains,
// always in agreement with grpc.health.v1; /metrics on the HTTP port and on the metrics port; and
// the config and flags of the port.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "config/server_config.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "metrics/http_get.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "subprocess.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;
using HealthResponse = grpc::health::v1::HealthCheckResponse;

HealthResponse::ServingStatus GrpcHealth(const DaemonProcess& daemon) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  HealthResponse response;
  const grpc::Status status =
      daemon.health()->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// GET `path` on `port`; a failed request is a test failure (status 0).
HttpResponse Get(int port, const std::string& path) {
  absl::StatusOr<HttpResponse> response = HttpGet(port, path);
  EXPECT_OK(response);
  return response.ok() ? *response : HttpResponse();
}

// The message of a JSON error body ({"error": {"message": ...}}), or "" when there is none.
std::string ErrorMessage(const std::string& body) {
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (!json.contains("error") || !json["error"]["message"].is_string()) return "";
  return json["error"]["message"];
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A copy of a test model whose config.json is a named pipe: convoyd blocks reading it (its model
// is "loading") until the test writes the real file into the pipe.
class HeldModel {
 public:
  HeldModel() {
    const std::string source = WriteTestModel("http", TinyModelConfig());
    config_json_ = ReadWhole(source + "/config.json");
    dir_ = held_.Join("model");
    std::filesystem::create_directories(dir_);
    for (const auto& entry : std::filesystem::directory_iterator(source)) {
      if (entry.path().filename() == "config.json") continue;
      std::filesystem::create_symlink(entry.path(), dir_ + "/" + entry.path().filename().string());
    }
    EXPECT_EQ(::mkfifo((dir_ + "/config.json").c_str(), 0644), 0) << std::strerror(errno);
  }

  const std::string& dir() const { return dir_; }

  // Writes config.json into the pipe once the daemon opened it; false when it does not within
  // kLiveness.
  bool Release() const {
    const std::string path = dir_ + "/config.json";
    const absl::Time give_up = absl::Now() + kLiveness;
    int fd = -1;
    while ((fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      if (errno != ENXIO || absl::Now() > give_up) return false;  // ENXIO: no reader yet
      absl::SleepFor(absl::Milliseconds(5));
    }
    ::fcntl(fd, F_SETFL, 0);
    const bool written = ::write(fd, config_json_.data(), config_json_.size()) ==
                         static_cast<ssize_t>(config_json_.size());
    ::close(fd);
    return written;
  }

 private:
  TestDir held_;  // removed with the model
  std::string dir_;
  std::string config_json_;
};

TEST(DaemonHttpTest, ReadyOnlyOnceTheModelIsLoadedLiveAllAlong) {
  HeldModel model;
  auto daemon = DaemonProcess::StartListening(model.dir(), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  const int port = daemon->http_port();
  ASSERT_GT(port, 0);

  // Loading (blocked on config.json): live, not ready, on both protocols.
  for (const char* path : {"/health", "/v2/health/live"}) {
    EXPECT_EQ(Get(port, path).status_code, 200) << path;
  }
  for (const char* path : {"/ready", "/v2/health/ready"}) {
    const HttpResponse ready = Get(port, path);
    EXPECT_EQ(ready.status_code, 503) << path;
    EXPECT_THAT(ErrorMessage(ready.body), HasSubstr("the model is loading")) << ready.body;
  }
  EXPECT_EQ(GrpcHealth(*daemon), HealthResponse::NOT_SERVING);
  // Metrics are up before the model: on the HTTP port and on the metrics port.
  const HttpResponse metrics = Get(port, "/metrics");
  EXPECT_EQ(metrics.status_code, 200);
  EXPECT_THAT(metrics.body, HasSubstr("# TYPE convoy_requests_total counter"));
  ASSERT_GT(daemon->metrics_port(), 0) << daemon->Log();
  const HttpResponse own_port = Get(daemon->metrics_port(), "/metrics");
  EXPECT_EQ(own_port.status_code, 200);
  EXPECT_THAT(own_port.body, HasSubstr("# TYPE convoy_requests_total counter"));

  ASSERT_TRUE(model.Release());
  ASSERT_TRUE(daemon->WaitUntilServing());
  for (const char* path : {"/ready", "/v2/health/ready", "/health", "/v2/health/live"}) {
    EXPECT_EQ(Get(port, path).status_code, 200) << path;
  }
  const HttpResponse not_found = Get(port, "/nothing/here");
  EXPECT_EQ(not_found.status_code, 404);
  EXPECT_THAT(ErrorMessage(not_found.body), HasSubstr("/nothing/here"));
}

TEST(DaemonHttpTest, DrainingTurnsReadyTo503AtOnceAndLiveStays200) {
  ModelConfig long_context = TinyModelConfig();
  long_context.max_position_embeddings = 8192;  // room for a request of thousands of tokens
  auto daemon =
      DaemonProcess::Start(WriteTestModel("http_long", long_context), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  const int port = daemon->http_port();
  EXPECT_EQ(Get(port, "/ready").status_code, 200);

  // A long generation keeps the daemon draining until the test cancels it.
  auto stub = daemon->inference();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  std::vector<int32_t> prompt(30, 7);
  auto reader = stub->InferStream(&context, MakeRequest(prompt, 8000));
  v1::InferStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  daemon->Signal(SIGTERM);

  HttpResponse ready;
  const absl::Time give_up = absl::Now() + kLiveness;
  while ((ready = Get(port, "/ready")).status_code == 200 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(ready.status_code, 503);
  EXPECT_THAT(ErrorMessage(ready.body), HasSubstr("draining")) << ready.body;
  EXPECT_EQ(Get(port, "/v2/health/ready").status_code, 503);
  EXPECT_EQ(Get(port, "/health").status_code, 200) << "live while draining";
  EXPECT_EQ(Get(port, "/v2/health/live").status_code, 200);
  EXPECT_EQ(GrpcHealth(*daemon), HealthResponse::NOT_SERVING);

  context.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(daemon->WaitForExit(kLiveness), std::optional<int>(0)) << daemon->Log();
  EXPECT_FALSE(HttpGet(port, "/health").ok()) << "the HTTP server stops with the daemon";
}

TEST(DaemonHttpTest, ABadHttpPortIsRefusedAtStart) {
  const ProcessResult flag =
      Execute(absl::StrCat(CONVOYD_PATH, " --model /nonexistent --http-port 70000"));
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.out, HasSubstr("--http-port must be in 0..65535"));
}

TEST(HttpConfigTest, DefaultsAndLimitsOfTheHttpPort) {
  absl::StatusOr<v1::ServerConfig> defaults = ParseServerConfig("", "<defaults>");
  ASSERT_OK(defaults);
  EXPECT_EQ(defaults->frontend().http_port(), 8000u);
  EXPECT_EQ(defaults->frontend().http_listen_address(), defaults->frontend().listen_address());

  EXPECT_THAT(ParseServerConfig("frontend {\n  http_port: 70000\n}\n", "x.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("x.pbtxt:2: frontend.http_port: http_port 70000 is outside")));
  EXPECT_THAT(ParseServerConfig("frontend { port: 9000 http_port: 9000 }", "x.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the gRPC port too")));
  EXPECT_THAT(ParseServerConfig("frontend { http_port: 8002 }", "x.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the metrics port too")));
  EXPECT_OK(ParseServerConfig("frontend { http_port: 8002 } metrics { enabled: false }", "x"));
  EXPECT_OK(ParseServerConfig("frontend { port: 0 http_port: 0 } metrics { port: 0 }", "x"));
  EXPECT_THAT(ParseServerConfig("frontend { http_listen_address: \"\" }", "x.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("http_listen_address")));
}

}  // namespace
}  // namespace convoy::testing
