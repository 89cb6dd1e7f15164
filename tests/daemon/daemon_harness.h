// Runs the real convoyd binary for end-to-end tests: a random-weight model and a config in a
// directory of this process's own (ctest runs test cases as parallel processes), the daemon on
// free loopback ports (--port 0 --port-file, the same for HTTP and metrics), and gRPC stubs to it.
// Every wait is bounded.
#ifndef CONVOY_TESTS_DAEMON_DAEMON_HARNESS_H_
#define CONVOY_TESTS_DAEMON_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "model/model_config.h"
#include "test_models.h"

namespace convoy::testing {

inline constexpr absl::Duration kLiveness = absl::Seconds(60);

// Writes (once per process) the random model of `config` and returns its directory.
std::string WriteTestModel(const std::string& name, const ModelConfig& config);

// Writes (once per process and name) a random model of TinyModelConfig's shape with SmolLM2's
// vocabulary and tokenizer (tests/fixtures/tokenizer), so that prompts and answers are text, and,
// with `chat_template`, SmolLM2's chat template in its tokenizer_config.json. Returns its
// directory.
std::string WriteSmolLm2VocabModel(const std::string& name, int64_t max_position_embeddings,
                                   bool chat_template);

// The default model's file (SmolLM2-135M-Instruct, Q4_1 GGUF) where
// scripts/fetch-default-model.sh puts it: $CONVOY_MODELS_DIR (relative to the source tree when
// relative), by default models/.
std::string DefaultModelPath();

// A test config: one CPU thread, a small KV cache (1024 blocks of 16 tokens). `frontend_fields`
// go into its frontend block; `scheduler_fields` replace its scheduler block's.
inline constexpr char kTestSchedulerFields[] = "max_batch_size: 64 max_num_batched_tokens: 4096";
std::string DefaultTestConfig(const std::string& frontend_fields = "",
                              const std::string& scheduler_fields = kTestSchedulerFields);

class DaemonProcess {
 public:
  // Starts convoyd on `model_dir` with `config_text` (protobuf text) and waits until it is
  // SERVING. Null (with a test failure naming the reason and the daemon's log) when it does not
  // come up within kLiveness.
  // `credentials`: the channel's (TLS); null for plain text. `extra_args` go to convoyd's
  // command line after the test's own.
  static std::unique_ptr<DaemonProcess> Start(
      const std::string& model_dir, const std::string& config_text,
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
      const std::vector<std::string>& extra_args = {});
  // Starts convoyd and waits only until its gRPC and HTTP ports listen (the model may still be
  // loading). Null (with a test failure) when they do not within kLiveness.
  static std::unique_ptr<DaemonProcess> StartListening(
      const std::string& model_dir, const std::string& config_text,
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
      const std::vector<std::string>& extra_args = {});
  // Waits until the daemon is SERVING; false (with a test failure) when not within kLiveness.
  bool WaitUntilServing();
  // Kills the daemon if it is still running; removes its directory unless the test failed.
  ~DaemonProcess();

  std::string address() const;
  // The config file convoyd was started with (tests rewrite it to reload).
  std::string config_path() const { return dir_ + "/config.pbtxt"; }
  // A directory of this daemon's own, removed with it unless the test failed.
  const std::string& dir() const { return dir_; }
  // The HTTP port (health, /metrics) on 127.0.0.1.
  int http_port() const { return http_port_; }
  // The metrics port, from the daemon's log line "metrics at http://ADDRESS:PORT/metrics"; -1
  // before that line.
  int metrics_port() const;
  pid_t pid() const { return pid_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::unique_ptr<v1::Inference::Stub> inference() const;
  std::unique_ptr<grpc::health::v1::Health::Stub> health() const;

  void Signal(int signal_number) const;
  // Waits for the process to exit; its exit code, or nullopt on a timeout (or a death by signal,
  // reported as 128 + the signal).
  std::optional<int> WaitForExit(absl::Duration timeout);
  // The daemon's stdout and stderr so far.
  std::string Log() const;
  // The log once it holds `text`, or as it is after `timeout`: convoyd writes its log lines from a
  // thread of its own, so a line can come just after what it reports is visible elsewhere.
  std::string WaitForLog(absl::string_view text, absl::Duration timeout = kLiveness) const;

 private:
  DaemonProcess(pid_t pid, std::string dir) : pid_(pid), dir_(std::move(dir)) {}

  pid_t pid_;
  std::string dir_;
  int port_ = 0;
  int http_port_ = 0;
  bool exited_ = false;
  std::shared_ptr<grpc::Channel> channel_;
};

// A request for `prompt` with greedy or seeded sampling.
v1::InferRequest MakeRequest(std::vector<int32_t> prompt, int32_t max_tokens);

// Calls Infer with a deadline of kLiveness.
grpc::Status CallInfer(v1::Inference::Stub& stub, const v1::InferRequest& request,
                       v1::InferResponse* response);

// Calls InferStream with a deadline of kLiveness and gathers the messages into one response.
// `messages` (optional) counts the messages that carried tokens.
grpc::Status CallInferStream(v1::Inference::Stub& stub, const v1::InferRequest& request,
                             v1::InferResponse* response, int* messages = nullptr);

// The server's information, or nullopt when the call failed.
std::optional<v1::ServerInfo> GetServerInfo(v1::Inference::Stub& stub);

// Polls GetServerInfo until `done` holds (every 5 ms, at most kLiveness); the last information
// seen. A request's end is counted when the engine lets it go, which for a request its client
// cancelled comes after the client's answer: a test waits for the count, it does not assume it.
std::optional<v1::ServerInfo> WaitForServerInfo(
    v1::Inference::Stub& stub, const std::function<bool(const v1::ServerInfo&)>& done);

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_DAEMON_DAEMON_HARNESS_H_
