#include "daemon_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "model/random_model.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "test_models.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace

std::string DefaultModelPath() {
  const char* env = std::getenv("CONVOY_MODELS_DIR");
  std::string dir = env != nullptr && *env != '\0' ? env : "models";
  if (dir.front() != '/') dir = absl::StrCat(TestSourceDir(), "/", dir);
  return absl::StrCat(dir, "/SmolLM2-135M-Instruct.Q4_1.gguf");
}

std::string WriteTestModel(const std::string& name, const ModelConfig& config) {
  const std::string dir = ProcessDir("convoy_daemon_" + name);
  RandomModelOptions options;
  options.config = config;
  options.seed = 7;
  options.dtype = DType::kF32;
  const absl::Status written = WriteRandomModel(dir, options);
  EXPECT_TRUE(written.ok()) << written;
  return dir;
}

std::string WriteSmolLm2VocabModel(const std::string& name, int64_t max_position_embeddings,
                                   bool chat_template) {
  ModelConfig config = TinyModelConfig();
  config.vocab_size = 49152;
  config.max_position_embeddings = max_position_embeddings;
  const std::string dir = WriteTestModel(name, config);
  const std::string fixtures = TestSourceDir() + "/tests/fixtures";
  std::filesystem::copy_file(fixtures + "/tokenizer/smollm2/tokenizer.json",
                             dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  if (chat_template) {
    std::ifstream in(fixtures + "/chat_template/smollm2.json");
    const nlohmann::json fixture = nlohmann::json::parse(in);
    const nlohmann::json tokenizer_config = {{"bos_token", "<|im_start|>"},
                                             {"eos_token", "<|im_end|>"},
                                             {"chat_template", fixture["template"]}};
    std::ofstream(dir + "/tokenizer_config.json") << tokenizer_config.dump();
  }
  return dir;
}

std::string DefaultTestConfig(const std::string& frontend_fields,
                              const std::string& scheduler_fields) {
  return absl::StrCat("scheduler { ", scheduler_fields, " }\n",
                      "kv_cache { block_size: 16 memory_budget_bytes: 8388608 }\n"
                      "executor { device: CPU cpu_threads: 1 }\n"
                      "frontend { drain_timeout_microseconds: 60000000 ",
                      frontend_fields, " }\n");
}

std::unique_ptr<DaemonProcess> DaemonProcess::Start(
    const std::string& model_dir, const std::string& config_text,
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<DaemonProcess> daemon =
      StartListening(model_dir, config_text, std::move(credentials), extra_args);
  if (daemon == nullptr || !daemon->WaitUntilServing()) return nullptr;
  return daemon;
}

std::unique_ptr<DaemonProcess> DaemonProcess::StartListening(
    const std::string& model_dir, const std::string& config_text,
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::vector<std::string>& extra_args) {
  static std::atomic<int> counter{0};
  const std::string dir = ProcessDir(absl::StrCat("convoyd_", counter.fetch_add(1)));
  const std::string config_path = dir + "/config.pbtxt";
  const std::string port_path = dir + "/port";
  const std::string http_port_path = dir + "/http_port";
  const std::string log_path = dir + "/convoyd.log";
  ::unlink(port_path.c_str());
  ::unlink(http_port_path.c_str());
  {
    std::ofstream out(config_path);
    out << config_text;
  }
  // Everything the child needs is built before fork: it only calls async-signal-safe functions.
  std::vector<std::string> args = {CONVOYD_PATH,
                                   "--config",
                                   config_path,
                                   "--model",
                                   model_dir,
                                   "--port",
                                   "0",
                                   "--port-file",
                                   port_path,
                                   "--listen-address",
                                   "127.0.0.1",
                                   "--metrics-port",
                                   "0",
                                   "--http-port",
                                   "0",
                                   "--http-port-file",
                                   http_port_path,
                                   "--http-listen-address",
                                   "127.0.0.1"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return nullptr;
  }
  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess(pid, dir));

  const absl::Time give_up = absl::Now() + kLiveness;
  while (true) {
    const std::string port_text = ReadFile(port_path);
    const std::string http_port_text = ReadFile(http_port_path);
    if (!port_text.empty() && port_text.back() == '\n' && !http_port_text.empty() &&
        http_port_text.back() == '\n') {
      daemon->port_ = std::stoi(port_text);
      daemon->http_port_ = std::stoi(http_port_text);
      break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      daemon->exited_ = true;
      ADD_FAILURE() << "convoyd exited before listening:\n" << daemon->Log();
      return nullptr;
    }
    if (absl::Now() > give_up) {
      ADD_FAILURE() << "convoyd did not listen within " << kLiveness << ":\n" << daemon->Log();
      return nullptr;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  channel_args.SetMaxSendMessageSize(64 << 20);
  daemon->channel_ = grpc::CreateCustomChannel(
      daemon->address(), credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(),
      channel_args);
  return daemon;
}

bool DaemonProcess::WaitUntilServing() {
  const absl::Time give_up = absl::Now() + kLiveness;
  auto health = this->health();
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(absl::Seconds(1)));
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    if (status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return true;
    }
    if (absl::Now() > give_up) {
      ADD_FAILURE() << "convoyd was not SERVING within " << kLiveness << ":\n" << Log();
      return false;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

DaemonProcess::~DaemonProcess() {
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  // Under a sanitizer (scripts/sanitize.sh) convoyd is instrumented too and reports into its log: a
  // report fails the test that started it, whether or not the daemon went on answering.
  const std::string log = Log();
  for (absl::string_view report : {"WARNING: ThreadSanitizer:", "ERROR: AddressSanitizer:",
                                   "ERROR: LeakSanitizer:", ": runtime error: "}) {
    if (absl::StrContains(log, report)) {
      ADD_FAILURE() << "convoyd's log holds a sanitizer report (" << report << "):\n" << log;
      break;
    }
  }
  // The config and the log stay for a failed test to be looked at.
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
}

std::string DaemonProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::unique_ptr<v1::Inference::Stub> DaemonProcess::inference() const {
  return v1::Inference::NewStub(channel_);
}

std::unique_ptr<grpc::health::v1::Health::Stub> DaemonProcess::health() const {
  return grpc::health::v1::Health::NewStub(channel_);
}

void DaemonProcess::Signal(int signal_number) const { ::kill(pid_, signal_number); }

std::optional<int> DaemonProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return std::nullopt;
    }
    if (absl::Now() > give_up) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

std::string DaemonProcess::Log() const { return ReadFile(dir_ + "/convoyd.log"); }

std::string DaemonProcess::WaitForLog(absl::string_view text, absl::Duration timeout) const {
  const absl::Time until = absl::Now() + timeout;
  std::string log = Log();
  while (!absl::StrContains(log, text) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
    log = Log();
  }
  return log;
}

int DaemonProcess::metrics_port() const {
  const std::string log = Log();
  const size_t line = log.find("metrics at http://");
  if (line == std::string::npos) return -1;
  const size_t path = log.find("/metrics", line);
  const size_t colon = log.rfind(':', path);
  int port = -1;
  if (path == std::string::npos || colon == std::string::npos || colon < line ||
      !absl::SimpleAtoi(absl::string_view(log).substr(colon + 1, path - colon - 1), &port)) {
    return -1;
  }
  return port;
}

v1::InferRequest MakeRequest(std::vector<int32_t> prompt, int32_t max_tokens) {
  v1::InferRequest request;
  for (int32_t id : prompt) request.add_prompt_token_ids(id);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  return request;
}

grpc::Status CallInfer(v1::Inference::Stub& stub, const v1::InferRequest& request,
                       v1::InferResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(kLiveness));
  return stub.Infer(&context, request, response);
}

grpc::Status CallInferStream(v1::Inference::Stub& stub, const v1::InferRequest& request,
                             v1::InferResponse* response, int* messages) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(kLiveness));
  auto reader = stub.InferStream(&context, request);
  v1::InferStreamResponse message;
  int with_tokens = 0;
  while (reader->Read(&message)) {
    response->set_request_id(message.request_id());
    if (message.token_ids_size() > 0) {
      ++with_tokens;
      EXPECT_EQ(message.first_token_index(), response->token_ids_size());
    }
    response->mutable_token_ids()->MergeFrom(message.token_ids());
    response->mutable_logprobs()->MergeFrom(message.logprobs());
    response->mutable_top_logprobs()->MergeFrom(message.top_logprobs());
    response->mutable_text()->append(message.text());
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      response->set_finish_reason(message.finish_reason());
      *response->mutable_usage() = message.usage();
      *response->mutable_timings() = message.timings();
      *response->mutable_prompt_token_ids() = message.prompt_token_ids();
      response->set_seed(message.seed());
    }
  }
  if (messages != nullptr) *messages = with_tokens;
  return reader->Finish();
}

std::optional<v1::ServerInfo> GetServerInfo(v1::Inference::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(absl::Seconds(10)));
  v1::ServerInfo info;
  if (!stub.GetServerInfo(&context, v1::GetServerInfoRequest(), &info).ok()) return std::nullopt;
  return info;
}

std::optional<v1::ServerInfo> WaitForServerInfo(
    v1::Inference::Stub& stub, const std::function<bool(const v1::ServerInfo&)>& done) {
  const absl::Time give_up = absl::Now() + kLiveness;
  std::optional<v1::ServerInfo> last;
  while (absl::Now() < give_up) {
    if (std::optional<v1::ServerInfo> info = GetServerInfo(stub)) {
      last = std::move(info);
      if (done(*last)) break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return last;
}

}  // namespace convoy::testing
