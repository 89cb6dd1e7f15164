#include "daemon/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "config/config_reload.h"
#include "config/server_config.h"
#include "convoy/status_macros.h"
#include "daemon/config_reloader.h"
#include "daemon/executor_factory.h"
#include "daemon/http_routes.h"
#include "engine/engine_loop.h"
#include "frontend/api_keys.h"
#include "frontend/grpc_server.h"
#include "frontend/health_service.h"
#include "frontend/inference_service.h"
#include "frontend/kserve_service.h"
#include "frontend/openai_service.h"
#include "frontend/output_constraints.h"
#include "http/http_server.h"
#include "metrics/metrics.h"
#include "metrics/request_trace.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "spdlog/spdlog.h"
#include "text/chat_template.h"

#ifndef CONVOY_VERSION
#define CONVOY_VERSION "unknown"
#endif

namespace convoy {
namespace {

constexpr absl::Duration kWarmUpLimit = absl::Minutes(10);
// How often the config file's content is compared with what was last read.
constexpr int kConfigPollMillis = 2000;
// After the drain: time for the last responses to reach their clients.
constexpr absl::Duration kFlushLimit = absl::Seconds(10);

// The write end of the pipe the signal handler writes to, and how many signals came.
int signal_pipe = -1;
std::atomic<int> signals_seen{0};

// Async-signal-safe: the first signal goes to the watcher thread through the pipe; the second
// ends the process at once. A handler (rather than sigwait) also catches the signals in threads
// that libraries start with their own signal masks, and overrides an inherited SIG_IGN.
void OnShutdownSignal(int signal_number) {
  if (signals_seen.fetch_add(1) == 0) {
    const char byte = static_cast<char>(signal_number);
    [[maybe_unused]] ssize_t written = write(signal_pipe, &byte, 1);
  } else {
    _exit(128 + signal_number);
  }
}

// The write end of the pipe SIGHUP writes to ('H'); the reload watcher reads it. 'Q' stops the
// watcher.
int reload_pipe = -1;

void OnReloadSignal(int /*signal_number*/) {
  const char byte = 'H';
  [[maybe_unused]] ssize_t written = write(reload_pipe, &byte, 1);
}

// Installs the SIGHUP handler (before the model loads, so that an early SIGHUP does not end the
// process, as its default action would); returns the pipe's read end.
absl::StatusOr<int> WatchReloadSignal() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError("pipe2() failed");
  reload_pipe = fds[1];
  struct sigaction action = {};
  action.sa_handler = OnReloadSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGHUP, &action, nullptr) != 0) return absl::InternalError("sigaction() failed");
  return fds[0];
}

// The file's content hash; empty when it cannot be read.
std::string FileHash(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return ConfigHash(text.str());
}

// Reloads on SIGHUP (a byte on `signal_fd`) and whenever `path`'s content changes from `seen` (its
// hash when the config in force was read: a change made while the model loaded is a change), until
// a 'Q' comes through the pipe.
void WatchForReloads(ConfigReloader* reloader, const std::string& path, int signal_fd,
                     std::string seen) {
  while (true) {
    pollfd fd{signal_fd, POLLIN, 0};
    const int ready = poll(&fd, 1, kConfigPollMillis);
    if (ready > 0) {
      char bytes[64];
      const ssize_t n = read(signal_fd, bytes, sizeof(bytes));
      const std::string got(bytes, n > 0 ? static_cast<size_t>(n) : 0);
      if (got.find('Q') != std::string::npos) return;
      if (got.find('H') == std::string::npos) continue;
      if (path.empty()) {
        spdlog::warn("SIGHUP: no config file to reload (convoyd runs on the defaults)");
        continue;
      }
      seen = FileHash(path);
      reloader->Reload("SIGHUP").IgnoreError();  // logged and counted
      continue;
    }
    if (path.empty()) continue;
    const std::string now = FileHash(path);
    if (!now.empty() && now != seen) {
      seen = now;
      reloader->Reload("the config file changed").IgnoreError();
    }
  }
}

// Installs the SIGTERM and SIGINT handlers and starts the signal thread (after WatchReloadSignal
// has installed SIGHUP's): the one thread that waits with the daemon's signals unblocked
// (BlockDaemonSignals). It notifies the returned notification at the first SIGTERM or SIGINT.
// Never destroyed (the thread outlives main).
absl::StatusOr<absl::Notification*> WatchShutdownSignals() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2() failed");
  signal_pipe = fds[1];
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &action, nullptr) != 0 || sigaction(SIGINT, &action, nullptr) != 0) {
    return absl::InternalError("sigaction() failed");
  }
  // Held by a static so that it stays reachable once the watcher thread has ended (LeakSanitizer
  // reported it as lost at exit, and the daemon's exit status became 1).
  static absl::Notification* const first_signal = new absl::Notification;
  std::thread([read_fd = fds[0]] {
    // The signals stay blocked in this thread too, except inside ppoll and sigsuspend, which
    // unblock them for as long as they wait: a handler runs within the wait (ThreadSanitizer, which
    // defers a handler to a point it knows is safe, counts both as such, not a plain read), and a
    // signal that comes between two waits stays pending until the next.
    sigset_t none;
    sigemptyset(&none);
    pollfd fd{read_fd, POLLIN, 0};
    int ready;
    do {
      ready = ppoll(&fd, 1, nullptr, &none);  // -1 with EINTR after each handler
    } while (ready < 0 && errno == EINTR);
    char byte = 0;
    if (ready > 0 && read(read_fd, &byte, 1) == 1) {
      spdlog::info("signal {}: draining (a second signal exits at once)", static_cast<int>(byte));
      first_signal->Notify();
    }
    // Stays the signals' thread: a second signal ends the process from its handler, and SIGHUP
    // goes on reloading while the server drains.
    while (true) sigsuspend(&none);
  }).detach();
  return first_signal;
}

// Each HTTP connection holds a file descriptor for as long as its client streams an answer: the
// soft limit on open files (often 1024) goes up to the hard one.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("open files limit raised from {} to {}", before, limit.rlim_cur);
  }
}

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

// Runs one short request through the whole engine (prefill and a decode step), so the first
// client does not pay for first-touch costs.
absl::Status WarmUp(EngineLoop* engine, const ModelConfig& model) {
  Request request;
  request.id = -1;  // the front end's ids start at 1
  const int64_t prompt_len = std::clamp<int64_t>(model.max_position_embeddings - 2, 1, 8);
  for (int64_t i = 0; i < prompt_len; ++i) {
    request.prompt_tokens.push_back(static_cast<int32_t>((i * 7 + 1) % model.vocab_size));
  }
  request.max_tokens = 2;
  auto done = std::make_shared<absl::Notification>();
  auto result = std::make_shared<absl::Status>();
  RETURN_IF_ERROR(engine->Submit(std::move(request), [done, result](const Event& event) {
    if (event.kind != Event::Kind::kFinal) return;
    if (event.outcome != Outcome::kCompleteLength && event.outcome != Outcome::kCompleteStop) {
      *result = event.status.ok() ? absl::InternalError(OutcomeName(event.outcome)) : event.status;
    }
    done->Notify();
  }));
  if (!done->WaitForNotificationWithTimeout(kWarmUpLimit)) {
    return absl::DeadlineExceededError("the warm-up request did not finish in 10 minutes");
  }
  return *result;
}

std::string ModelName(const v1::ServerConfig& config) {
  if (!config.model().name().empty()) return config.model().name();
  std::string dir = config.model().dir();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
  // A model file's name without its extension: "SmolLM2-135M-Instruct.Q4_1.gguf" serves as
  // "SmolLM2-135M-Instruct.Q4_1".
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

v1::ModelInfo ToModelInfo(const ModelConfig& model, const std::string& name, int64_t max_context) {
  v1::ModelInfo info;
  info.set_name(name);
  info.set_architecture(model.architecture);
  info.set_vocab_size(model.vocab_size);
  info.set_max_context_length(max_context);
  info.set_num_hidden_layers(model.num_hidden_layers);
  info.set_hidden_size(model.hidden_size);
  info.set_num_parameters(model.NumParameters());
  info.set_bos_token_id(model.bos_token_id);
  if (model.eos_token_ids.empty()) {
    if (model.eos_token_id >= 0) info.add_eos_token_ids(model.eos_token_id);
  } else {
    for (int64_t id : model.eos_token_ids) info.add_eos_token_ids(id);
  }
  return info;
}

// A PEM file that config field frontend.<section>.<field> names.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* section,
                                    const char* field) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::NotFoundError(absl::StrCat("frontend.", section, ".", field, ": cannot read '",
                                            path, "' (or it is empty)"));
  }
  return text.str();
}

// The PEM files of frontend.<section>, read; nullopt when it names none (no TLS).
template <typename Options>
absl::StatusOr<std::optional<Options>> ReadTlsFiles(const v1::TlsConfig& tls, const char* section) {
  if (tls.cert_file().empty()) return std::nullopt;
  Options files;
  ASSIGN_OR_RETURN(files.cert_chain, ReadPem(tls.cert_file(), section, "cert_file"));
  ASSIGN_OR_RETURN(files.private_key, ReadPem(tls.key_file(), section, "key_file"));
  if (!tls.client_ca_file().empty()) {
    ASSIGN_OR_RETURN(files.client_ca, ReadPem(tls.client_ca_file(), section, "client_ca_file"));
  }
  return files;
}

absl::StatusOr<GrpcServerOptions> GrpcOptionsFromConfig(const v1::FrontendConfig& frontend) {
  GrpcServerOptions options;
  options.listen_address = frontend.listen_address();
  options.port = static_cast<int>(frontend.port());
  options.max_message_bytes = static_cast<int>(frontend.max_message_bytes());
  options.max_concurrent_streams = static_cast<int>(frontend.max_concurrent_streams());
  options.reflection = frontend.reflection();
  ASSIGN_OR_RETURN(options.tls, ReadTlsFiles<GrpcTlsOptions>(frontend.tls(), "tls"));
  return options;
}

absl::StatusOr<HttpServerOptions> HttpOptionsFromConfig(const v1::FrontendConfig& frontend) {
  HttpServerOptions options;
  options.listen_address = frontend.http_listen_address();
  options.port = static_cast<int>(frontend.http_port());
  ASSIGN_OR_RETURN(options.tls, ReadTlsFiles<HttpTlsOptions>(frontend.http_tls(), "http_tls"));
  return options;
}

// The engine and what it runs on, in the order they must be destroyed (engine first).
struct Engine {
  std::unique_ptr<Tokenizer> tokenizer;        // null when the model has none
  std::vector<int32_t> end_of_generation_ids;  // ModelEndOfGenerationIds
  // The model's chat template; unset when it has none or it cannot be rendered (the reason says
  // which).
  std::optional<ChatTemplate> chat_template;
  std::string no_chat_template_reason;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<EngineLoop> loop;
  std::string executor_name;
  // Structured output; null when the model cannot have it (the status says why).
  std::unique_ptr<OutputConstraints> output_constraints;
  absl::Status no_output_constraints;
};

absl::StatusOr<Engine> LoadEngine(const v1::ServerConfig& config, Metrics* metrics) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> weights, ModelWeights::Load(config.model().dir()));
  Engine engine;
  ASSIGN_OR_RETURN(engine.tokenizer, LoadModelTokenizer(*weights));
  engine.end_of_generation_ids = ModelEndOfGenerationIds(*weights, engine.tokenizer.get());
  ASSIGN_OR_RETURN(BuiltExecutor built,
                   CreateExecutor(*weights, config, engine.end_of_generation_ids));
  ASSIGN_OR_RETURN(std::optional<std::string> template_source,
                   LoadModelChatTemplateSource(*weights));
  if (!template_source) {
    engine.no_chat_template_reason = "the model has no chat template";
  } else if (absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(*template_source);
             parsed.ok()) {
    engine.chat_template = *std::move(parsed);
  } else {
    // The ids and text APIs still work; chat requests say why they cannot.
    engine.no_chat_template_reason = absl::StrCat("the model's chat template cannot be rendered (",
                                                  parsed.status().message(), ")");
    spdlog::warn("chat messages refused: {}", engine.no_chat_template_reason);
  }
  weights.reset();
  engine.executor = std::move(built.executor);
  engine.executor_name = built.name;
  const std::string built_weights = built.weights;
  EngineLoopOptions loop_options;
  loop_options.scheduler = SchedulerOptionsFromConfig(config);
  loop_options.observer = metrics;
  ASSIGN_OR_RETURN(engine.loop, EngineLoop::Create(engine.executor.get(), loop_options));
  const ModelConfig& model = engine.executor->model_config();
  if (engine.tokenizer == nullptr) {
    engine.no_output_constraints =
        absl::FailedPreconditionError("structured output needs a model with a tokenizer");
  } else if (!engine.executor->limits().applies_token_constraints) {
    engine.no_output_constraints = absl::UnimplementedError(absl::StrCat(
        "the ", engine.executor_name, " executor does not apply structured output yet"));
  } else {
    const absl::Time vocab_start = absl::Now();
    ASSIGN_OR_RETURN(engine.output_constraints,
                     OutputConstraints::Create(*engine.tokenizer, model.vocab_size,
                                               engine.end_of_generation_ids));
    spdlog::debug("structured output's vocabulary built in {}",
                  absl::FormatDuration(absl::Now() - vocab_start));
  }
  const KvCacheSpec& kv = engine.executor->kv_spec();
  spdlog::info(
      "model {} loaded on the {} executor in {}: weights {}; {} KV blocks of {} tokens ({} tokens, "
      "K and V in {}); {}",
      config.model().dir(), engine.executor_name, absl::FormatDuration(absl::Now() - start),
      built_weights.empty() ? "as the executor keeps them" : built_weights, kv.num_blocks,
      kv.block_size, int64_t{kv.num_blocks} * kv.block_size, KvDtypeName(kv.dtype),
      engine.tokenizer == nullptr ? "token ids only (the model has no tokenizer)"
      : engine.chat_template      ? "text prompts and chat messages accepted"
                                  : "text prompts accepted (no chat messages)");
  return engine;
}

}  // namespace

void BlockDaemonSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, signal_number);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int RunDaemon(const DaemonOptions& options) {
  const v1::ServerConfig& config = options.config;
  // What the config file held when `config` was read (moments ago, in main), before the model
  // loads: the watcher, started once serving, reloads if it changed meanwhile.
  const std::string config_file_hash =
      options.config_path.empty() ? "" : FileHash(options.config_path);
  // SIGHUP's handler first: the signal thread that WatchShutdownSignals starts takes all three.
  absl::StatusOr<int> reload_signals = WatchReloadSignal();
  if (!reload_signals.ok()) {
    spdlog::error("{}", reload_signals.status().ToString());
    return 1;
  }
  absl::StatusOr<absl::Notification*> watched = WatchShutdownSignals();
  if (!watched.ok()) {
    spdlog::error("{}", watched.status().ToString());
    return 1;
  }
  absl::Notification* first_signal = *watched;
  RaiseOpenFileLimit();

  HealthService health({std::string(v1::Inference::service_full_name()),
                        std::string(inference::GRPCInferenceService::service_full_name())});
  health.SetServing(false, "the model is loading");
  InferenceService inference(CONVOY_VERSION);
  KServeService kserve(inference.hub(), CONVOY_VERSION);
  absl::StatusOr<std::shared_ptr<const ApiKeys>> keys =
      ApiKeys::FromConfig(config.frontend(), config.scheduler().priority_levels());
  if (!keys.ok()) {
    spdlog::error("cannot load the API keys: {}", keys.status().ToString());
    return 1;
  }
  const bool keys_asked = (*keys)->enabled();
  inference.hub()->SetApiKeys(*std::move(keys));
  absl::StatusOr<GrpcServerOptions> server_options = GrpcOptionsFromConfig(config.frontend());
  if (!server_options.ok()) {
    spdlog::error("{}", server_options.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<GrpcServer>> server =
      GrpcServer::Start(*server_options, &inference, &health, &kserve);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  spdlog::info(
      "convoyd {} listening on {}:{} ({}{}{}; config {}); NOT_SERVING until the model is ready",
      CONVOY_VERSION, server_options->listen_address, (*server)->port(),
      !server_options->tls                     ? "plain text"
      : server_options->tls->client_ca.empty() ? "TLS"
                                               : "mutual TLS",
      keys_asked ? ", API keys required" : "", server_options->reflection ? ", reflection" : "",
      options.config_source);
  if (!options.port_file.empty()) {
    if (absl::Status written = WritePortFile(options.port_file, (*server)->port()); !written.ok()) {
      spdlog::error("{}", written.ToString());
      return 1;
    }
  }

  // Metrics first: the engine reports to them until it is destroyed.
  std::unique_ptr<Metrics> metrics;
  if (config.metrics().enabled()) {
    MetricsOptions metrics_options;
    metrics_options.listen_address = config.metrics().listen_address();
    metrics_options.port = static_cast<int32_t>(config.metrics().port());
    metrics_options.priority_levels = static_cast<int32_t>(config.scheduler().priority_levels());
    absl::StatusOr<std::unique_ptr<Metrics>> created = Metrics::Create(metrics_options);
    if (!created.ok()) {
      spdlog::error("cannot serve metrics: {}", created.status().ToString());
      (*server)->Shutdown(absl::ZeroDuration());
      return 1;
    }
    metrics = *std::move(created);
    spdlog::info("metrics at http://{}:{}/metrics", metrics_options.listen_address,
                 metrics->port());
  }

  // Before the front ends: their sessions write to it until they end.
  std::unique_ptr<RequestTrace> request_trace;
  if (!options.request_trace_path.empty()) {
    absl::StatusOr<std::unique_ptr<RequestTrace>> opened =
        RequestTrace::Open(options.request_trace_path, absl::Now());
    if (!opened.ok()) {
      spdlog::error("{}", opened.status().ToString());
      (*server)->Shutdown(absl::ZeroDuration());
      return 1;
    }
    request_trace = *std::move(opened);
    spdlog::info("request trace: {}", options.request_trace_path);
  }

  // The OpenAI API's threads: made before the HTTP server, so that they end after it.
  OpenAiService openai(inference.hub(), OpenAiOptions());

  // The HTTP port, up while the model loads (/ready says 503 until it is ready).
  HttpRouter http_routes;
  absl::Status routed = AddHealthRoutes(&health, &http_routes);
  if (routed.ok()) routed = openai.AddRoutes(&http_routes);
  if (routed.ok() && metrics != nullptr) routed = metrics->AddHttpRoute("/metrics", &http_routes);
  if (!routed.ok()) {
    spdlog::error("cannot set up the HTTP routes: {}", routed.ToString());
    (*server)->Shutdown(absl::ZeroDuration());
    return 1;
  }
  absl::StatusOr<HttpServerOptions> http_options = HttpOptionsFromConfig(config.frontend());
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      http_options.ok() ? HttpServer::Start(*http_options, std::move(http_routes))
                        : absl::StatusOr<std::unique_ptr<HttpServer>>(http_options.status());
  if (!http.ok()) {
    spdlog::error("cannot serve HTTP: {}", http.status().ToString());
    (*server)->Shutdown(absl::ZeroDuration());
    return 1;
  }
  spdlog::info("HTTP at {}://{}:{} (/health, /ready{}{})", http_options->tls ? "https" : "http",
               http_options->listen_address, (*http)->port(),
               metrics != nullptr ? ", /metrics" : "",
               http_options->tls && !http_options->tls->client_ca.empty() ? "; mutual TLS" : "");
  if (!options.http_port_file.empty()) {
    if (absl::Status written = WritePortFile(options.http_port_file, (*http)->port());
        !written.ok()) {
      spdlog::error("{}", written.ToString());
      (*server)->Shutdown(absl::ZeroDuration());
      return 1;
    }
  }

  absl::StatusOr<Engine> engine = LoadEngine(config, metrics.get());
  absl::Status ready = engine.status();
  if (ready.ok()) ready = WarmUp(engine->loop.get(), engine->executor->model_config());
  if (!ready.ok()) {
    spdlog::error("cannot serve: {}", ready.ToString());
    (*http)->Stop(absl::ZeroDuration());
    (*server)->Shutdown(absl::ZeroDuration());
    return 1;
  }

  const ModelConfig& model = engine->executor->model_config();
  ServingContext serving;
  serving.engine = engine->loop.get();
  serving.limits.model_name = ModelName(config);
  serving.limits.vocab_size = model.vocab_size;
  serving.limits.max_context_length = model.max_position_embeddings;
  serving.limits.priority_levels = static_cast<int32_t>(config.scheduler().priority_levels());
  SetReloadableLimits(config, &serving.limits);
  serving.limits.max_top_logprobs = engine->executor->limits().max_top_logprobs;
  serving.limits.tokenizer = engine->tokenizer.get();
  serving.limits.end_of_generation_ids = engine->end_of_generation_ids;
  if (engine->chat_template) serving.limits.chat_template = &*engine->chat_template;
  serving.limits.output_constraints = engine->output_constraints.get();
  serving.limits.no_output_constraints = engine->no_output_constraints;
  if (!engine->executor->limits().applies_extended_sampling) {
    serving.limits.no_extended_sampling = absl::UnimplementedError(
        absl::StrCat("the ", engine->executor_name,
                     " executor does not apply min_p, penalties or logit_bias yet"));
  }
  if (!engine->executor->limits().scores_prompts) {
    serving.limits.no_prompt_scoring = absl::UnimplementedError(
        absl::StrCat("the ", engine->executor_name, " executor does not score prompts yet"));
  }
  serving.limits.no_chat_template_reason = engine->no_chat_template_reason;
  serving.model_info =
      ToModelInfo(model, serving.limits.model_name, serving.limits.max_context_length);
  serving.executor_name = engine->executor_name;
  serving.kv_block_size = engine->executor->kv_spec().block_size;
  serving.kv_dtype = KvDtypeName(engine->executor->kv_spec().dtype);
  serving.metrics = metrics.get();
  serving.request_trace = request_trace.get();
  inference.Start(std::move(serving));
  if (!first_signal->HasBeenNotified()) {
    health.SetServing(true);
    spdlog::info("SERVING model '{}'", ModelName(config));
  }

  ConfigReloader reloader(config, options.reload_config, engine->loop.get(), inference.hub(),
                          metrics.get());
  std::thread watcher([&reloader, path = options.config_path, fd = *reload_signals,
                       seen = config_file_hash] { WatchForReloads(&reloader, path, fd, seen); });

  first_signal->WaitForNotification();
  {
    const char stop = 'Q';
    [[maybe_unused]] ssize_t written = write(reload_pipe, &stop, 1);
  }
  watcher.join();
  // Shutdown: refuse new work at once, let admitted requests finish within the drain timeout.
  // New calls are refused before health says so: a client that saw NOT_SERVING is refused too.
  inference.StopAccepting();
  health.SetServing(false, "the server is shutting down (draining)");
  const absl::Duration drain_timeout =
      absl::Microseconds(reloader.current().frontend().drain_timeout_microseconds());
  const absl::Time drain_start = absl::Now();
  auto drained = std::make_shared<absl::Notification>();
  std::thread drainer([loop = engine->loop.get(), drained] {
    loop->Shutdown(/*drain=*/true);
    drained->Notify();
  });
  if (!drained->WaitForNotificationWithTimeout(drain_timeout)) {
    spdlog::warn("drain timeout ({}) passed with {} calls open; cancelling them",
                 absl::FormatDuration(drain_timeout), inference.open_calls());
    inference.AbortAll();
  }
  drainer.join();
  if (!inference.WaitForNoCalls(kFlushLimit)) {
    spdlog::warn("{} calls still open after the drain; cancelling them", inference.open_calls());
  }
  health.EndWatches();
  (*server)->Shutdown(absl::Seconds(1));
  (*http)->Stop(absl::Seconds(1));
  spdlog::info("drained in {}; exiting", absl::FormatDuration(absl::Now() - drain_start));
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace convoy
