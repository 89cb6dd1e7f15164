// What the daemon adds on top of the engine: the same requests through the EngineLoop in this
// process and through a real convoyd (gRPC on loopback, the front end, the same engine), on the
// same random-weight model, in the same run.
//
//   1. Latency of a 1-token request (one request at a time): p50 / p90 of each, and the daemon's
//      p50 overhead against the limit (200 us).
//   2. Server CPU per streamed token: the daemon process's CPU time (user + system, from /proc)
//      while it streams N tokens, minus the CPU time the in-process engine loop spends on the
//      same requests, per token, against the limit (20 us).
//
//   frontend_overhead_bench [--iterations 500] [--streams 8] [--stream-tokens 1000]
// Prints one line per measurement and "ratio" = measured / limit (<= 1 meets the target).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.grpc.pb.h"
#include "engine/engine_loop.h"
#include "executor/cpu/cpu_executor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "model/model_weights.h"
#include "model/random_model.h"

namespace convoy {
namespace {

constexpr double kLatencyLimitUs = 200.0;
constexpr double kCpuPerTokenLimitUs = 20.0;

struct Options {
  int iterations = 500;
  int streams = 8;
  int stream_tokens = 1000;
};

ModelConfig BenchModel() {
  ModelConfig c;
  c.vocab_size = 320;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 2048;
  return c;
}

constexpr char kConfig[] = R"pb(
  scheduler { max_batch_size: 64 max_num_batched_tokens: 4096 }
  kv_cache { block_size: 16 memory_budget_bytes: 33554432 }
  executor { device: CPU cpu_threads: 1 }
)pb";

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[i];
}

std::vector<int32_t> Prompt(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back((salt * 131 + i * 29 + 3) % 320);
  return prompt;
}

// CPU seconds (user + system) of process `pid` so far.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ThisProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// --- In-process: the EngineLoop over the CPU executor ---------------------------------------

class InProcess {
 public:
  static std::unique_ptr<InProcess> Create(const std::string& model_dir) {
    auto weights = ModelWeights::Load(model_dir);
    if (!weights.ok()) return nullptr;
    CpuExecutorOptions options;
    options.num_threads = 1;
    options.kv_cache_bytes = 32 << 20;
    options.weight_format = CpuWeightFormat::kF32;
    auto executor = CpuExecutor::Create(**weights, options);
    if (!executor.ok()) return nullptr;
    auto self = std::unique_ptr<InProcess>(new InProcess);
    self->executor_ = std::move(executor).value();
    EngineLoopOptions loop_options;
    loop_options.scheduler.max_batch_size = 64;
    loop_options.scheduler.max_num_batched_tokens = 4096;
    auto loop = EngineLoop::Create(self->executor_.get(), loop_options);
    if (!loop.ok()) return nullptr;
    self->loop_ = std::move(loop).value();
    return self;
  }

  // Runs `requests` together; returns the tokens generated.
  int64_t Run(std::vector<Request> requests) {
    absl::Mutex mu;
    int64_t tokens = 0;
    size_t finals = 0;
    for (Request& request : requests) {
      request.id = next_id_++;
      const absl::Status submitted = loop_->Submit(std::move(request), [&](const Event& event) {
        absl::MutexLock lock(&mu);
        if (event.kind == Event::Kind::kToken) ++tokens;
        if (event.kind == Event::Kind::kFinal) ++finals;
      });
      if (!submitted.ok()) std::fprintf(stderr, "submit: %s\n", submitted.ToString().c_str());
    }
    absl::MutexLock lock(&mu);
    const size_t n = requests.size();
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return finals == n; };
    mu.Await(absl::Condition(&done));
    return tokens;
  }

 private:
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<EngineLoop> loop_;
  RequestId next_id_ = 1;
};

// --- The daemon ---------------------------------------------------------------------------------

class Daemon {
 public:
  static std::unique_ptr<Daemon> Start(const std::string& dir, const std::string& model_dir) {
    const std::string config = dir + "/config.pbtxt";
    const std::string port_file = dir + "/port";
    std::ofstream(config) << kConfig;
    ::unlink(port_file.c_str());
    std::vector<std::string> args = {CONVOYD_PATH, "--config",         config,      "--model",
                                     model_dir,    "--port",           "0",         "--port-file",
                                     port_file,    "--listen-address", "127.0.0.1", "--log-level",
                                     "warn",       "--metrics-port",   "0"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    auto daemon = std::unique_ptr<Daemon>(new Daemon(pid));
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    std::string port;
    while (absl::Now() < give_up) {
      std::ifstream in(port_file);
      if (std::getline(in, port) && !port.empty()) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    if (port.empty()) return nullptr;
    grpc::ChannelArguments args_;
    daemon->channel_ =
        grpc::CreateCustomChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials(), args_);
    auto health = grpc::health::v1::Health::NewStub(daemon->channel_);
    while (absl::Now() < give_up) {
      grpc::ClientContext context;
      grpc::health::v1::HealthCheckResponse response;
      if (health->Check(&context, {}, &response).ok() &&
          response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
        return daemon;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return nullptr;
  }
  ~Daemon() {
    ::kill(pid_, SIGTERM);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  explicit Daemon(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  std::shared_ptr<grpc::Channel> channel_;
};

v1::InferRequest ToApi(const Request& request) {
  v1::InferRequest out;
  for (int32_t id : request.prompt_tokens) out.add_prompt_token_ids(id);
  out.mutable_sampling()->set_max_tokens(request.max_tokens);
  return out;
}

int Run(const std::string& dir, const Options& options);

int Main(const Options& options) {
  const std::string dir = absl::StrCat("/tmp/convoy_frontend_bench_", ::getpid());
  const int code = Run(dir, options);
  std::filesystem::remove_all(dir);
  return code;
}

int Run(const std::string& dir, const Options& options) {
  RandomModelOptions model;
  model.config = BenchModel();
  model.seed = 1;
  if (!WriteRandomModel(dir + "/model", model).ok()) return 1;
  auto in_process = InProcess::Create(dir + "/model");
  auto daemon = Daemon::Start(dir, dir + "/model");
  if (in_process == nullptr || daemon == nullptr) {
    std::fprintf(stderr, "cannot start the engine or convoyd\n");
    return 1;
  }
  auto stub = v1::Inference::NewStub(daemon->channel());

  // 1. One-token requests, one at a time, alternating in-process and daemon.
  Request one;
  one.prompt_tokens = Prompt(8, 1);
  one.max_tokens = 1;
  const v1::InferRequest one_api = ToApi(one);
  std::vector<double> local_us, daemon_us;
  for (int i = 0; i < options.iterations + 20; ++i) {
    absl::Time t0 = absl::Now();
    in_process->Run({one});
    const double local = absl::ToDoubleMicroseconds(absl::Now() - t0);
    grpc::ClientContext context;
    v1::InferResponse response;
    t0 = absl::Now();
    const grpc::Status status = stub->Infer(&context, one_api, &response);
    const double remote = absl::ToDoubleMicroseconds(absl::Now() - t0);
    if (!status.ok() || response.token_ids_size() != 1) {
      std::fprintf(stderr, "Infer failed: %s\n", status.error_message().c_str());
      return 1;
    }
    if (i >= 20) {  // warm-up
      local_us.push_back(local);
      daemon_us.push_back(remote);
    }
  }
  const double local_p50 = Percentile(local_us, 0.5), daemon_p50 = Percentile(daemon_us, 0.5);
  const double overhead = daemon_p50 - local_p50;
  std::printf(
      "1-token request, %d sequential: in-process p50 %.1f us p90 %.1f us; "
      "convoyd p50 %.1f us p90 %.1f us\n",
      options.iterations, local_p50, Percentile(local_us, 0.9), daemon_p50,
      Percentile(daemon_us, 0.9));
  std::printf("daemon overhead at p50: %.1f us (limit %.0f us, ratio %.2f)\n", overhead,
              kLatencyLimitUs, overhead / kLatencyLimitUs);

  // 2. Streams: server CPU per token against the in-process engine's CPU on the same requests.
  std::vector<Request> streams;
  for (int i = 0; i < options.streams; ++i) {
    Request r;
    r.prompt_tokens = Prompt(16, i);
    r.max_tokens = options.stream_tokens;
    streams.push_back(r);
  }
  double cpu0 = ThisProcessCpuSeconds();
  absl::Time t0 = absl::Now();
  const int64_t local_tokens = in_process->Run(streams);
  const double local_cpu = ThisProcessCpuSeconds() - cpu0;
  const double local_wall = absl::ToDoubleSeconds(absl::Now() - t0);

  cpu0 = ProcessCpuSeconds(daemon->pid());
  t0 = absl::Now();
  std::vector<int64_t> received(streams.size(), 0);
  std::vector<int64_t> messages(streams.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < streams.size(); ++i) {
    clients.emplace_back([&, i] {
      auto client = v1::Inference::NewStub(daemon->channel());
      grpc::ClientContext context;
      auto reader = client->InferStream(&context, ToApi(streams[i]));
      v1::InferStreamResponse message;
      while (reader->Read(&message)) {
        received[i] += message.token_ids_size();
        ++messages[i];
      }
      reader->Finish();
    });
  }
  for (std::thread& client : clients) client.join();
  const double daemon_wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double daemon_cpu = ProcessCpuSeconds(daemon->pid()) - cpu0;
  int64_t daemon_tokens = 0, daemon_messages = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    daemon_tokens += received[i];
    daemon_messages += messages[i];
  }
  const double per_token = (daemon_cpu - local_cpu) * 1e6 / std::max<int64_t>(1, daemon_tokens);
  std::printf(
      "%d streams x %d tokens: in-process %lld tokens, %.3f s CPU, %.3f s wall; "
      "convoyd %lld tokens in %lld messages, %.3f s CPU, %.3f s wall\n",
      options.streams, options.stream_tokens, static_cast<long long>(local_tokens), local_cpu,
      local_wall, static_cast<long long>(daemon_tokens), static_cast<long long>(daemon_messages),
      daemon_cpu, daemon_wall);
  std::printf(
      "server CPU per streamed token beyond the engine: %.2f us (limit %.0f us, ratio "
      "%.2f); engine CPU per token %.2f us\n",
      per_token, kCpuPerTokenLimitUs, per_token / kCpuPerTokenLimitUs,
      local_cpu * 1e6 / std::max<int64_t>(1, local_tokens));
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--iterations") options.iterations = value;
    if (flag == "--streams") options.streams = value;
    if (flag == "--stream-tokens") options.stream_tokens = value;
  }
  return convoy::Main(options);
}
