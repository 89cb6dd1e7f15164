// convoyd: the convoy inference server.
//   convoyd --config FILE [--model DIR] [--port N] [--port-file F] [--listen-address A]
//           [--http-port N] [--http-port-file F] [--http-listen-address A] [--log-level info]
//           [--request-trace FILE]
// Command-line flags override the config file (at start and at every reload). The server listens
// at once and reports NOT_SERVING on grpc.health.v1 (and 503 on the HTTP port's /ready) until the
// model is loaded and warmed up. SIGTERM or SIGINT: drain and exit 0; a second signal exits at
// once. SIGHUP, or a change of the config file, reloads it (daemon.h).
#include <algorithm>
#include <functional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "config/config_reload.h"
#include "config/server_config.h"
#include "daemon/daemon.h"
#include "metrics/logging.h"
#include "spdlog/spdlog.h"
#include "tools/cli_flags.h"

ABSL_FLAG(std::string, config, "",
          "Server config file (protobuf text, proto/convoy/v1/server_config.proto); none: the "
          "defaults");
ABSL_FLAG(std::string, model, "",
          "Model: a directory (config.json + safetensors) or a .gguf file (overrides model.dir)");
ABSL_FLAG(int32_t, port, 50051, "TCP port (overrides frontend.port); 0 picks a free one");
ABSL_FLAG(std::string, listen_address, "127.0.0.1",
          "Address to listen on (overrides frontend.listen_address)");
ABSL_FLAG(std::string, port_file, "", "Write the bound port to this file once listening");
ABSL_FLAG(
    int32_t, http_port, 8000,
    "HTTP port: /health, /ready, /metrics (overrides frontend.http_port); 0 picks a free one");
ABSL_FLAG(std::string, http_listen_address, "127.0.0.1",
          "Address the HTTP port listens on (overrides frontend.http_listen_address)");
ABSL_FLAG(std::string, http_port_file, "", "Write the bound HTTP port to this file once listening");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off");
ABSL_FLAG(std::string, log_format, "text", "text, or json (one JSON object per line)");
ABSL_FLAG(std::string, request_trace, "",
          "Write a line per finished request to this file (JSON: arrival time, prompt and output "
          "tokens, priority, outcome; never the prompt) for convoy-bench --trace to replay");
ABSL_FLAG(int32_t, metrics_port, 8002,
          "Prometheus /metrics port (overrides metrics.port); 0 picks a free one");

namespace {

const convoy::cli::CommandLine kCommandLine = {
    "convoyd",
    "convoyd --config FILE [--model DIR] [--port N] [--port-file F] [--listen-address A]\n"
    "        [--http-port N] [--http-port-file F] [--http-listen-address A]\n"
    "        [--request-trace FILE]\n\n"
    "Serves a model over gRPC (convoy.v1.Inference, KServe v2, grpc.health.v1.Health), with\n"
    "health (/health, /ready), the OpenAI API and /metrics on the HTTP port; on 127.0.0.1\n"
    "unless the config or the flags say otherwise.\n"
    "Flags override the config file. SIGTERM or SIGINT drains and exits 0; SIGHUP (or a change\n"
    "of the file) reloads the config's live settings.",
    {"config", "model", "port", "listen_address", "port_file", "log_level", "log_format",
     "metrics_port", "http_port", "http_listen_address", "http_port_file", "request_trace"},
    {}};

// A port flag: absl's name of it, its value, and the config field it overrides.
struct PortFlag {
  const char* name;
  int32_t value;
  std::function<void(uint32_t)> set;
};

// Applies the flags given on the command line to `config`; an error message, or empty.
template <typename Specified>
std::string ApplyOverrides(const Specified& specified, convoy::v1::ServerConfig* config) {
  if (specified.count("model")) config->mutable_model()->set_dir(absl::GetFlag(FLAGS_model));
  convoy::v1::FrontendConfig* frontend = config->mutable_frontend();
  const PortFlag ports[] = {
      {"port", absl::GetFlag(FLAGS_port), [&](uint32_t p) { frontend->set_port(p); }},
      {"http_port", absl::GetFlag(FLAGS_http_port),
       [&](uint32_t p) { frontend->set_http_port(p); }},
      {"metrics_port", absl::GetFlag(FLAGS_metrics_port),
       [&](uint32_t p) { config->mutable_metrics()->set_port(p); }}};
  for (const PortFlag& flag : ports) {
    if (!specified.count(flag.name)) continue;
    if (flag.value < 0 || flag.value > 65535) {
      std::string dashed = flag.name;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      return "--" + dashed + " must be in 0..65535";
    }
    flag.set(static_cast<uint32_t>(flag.value));
  }
  if (specified.count("listen_address")) {
    frontend->set_listen_address(absl::GetFlag(FLAGS_listen_address));
  }
  if (specified.count("http_listen_address")) {
    const std::string address = absl::GetFlag(FLAGS_http_listen_address);
    if (address.empty()) return "--http-listen-address is empty";
    frontend->set_http_listen_address(address);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  convoy::BlockDaemonSignals();  // before any thread starts
  // Debian's abseil checks every Mutex acquisition for lock-order cycles (gRPC's locks too); that
  // costs on every streamed token and finds nothing our tests and sanitizers would not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  convoy::cli::ParsedFlags parsed;
  if (int exit_code = convoy::cli::Parse(argc, argv, kCommandLine, &parsed); exit_code >= 0) {
    return exit_code;
  }
  absl::StatusOr<convoy::LogFormat> format =
      convoy::ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  if (!format.ok())
    return convoy::cli::BadUsage(kCommandLine, std::string(format.status().message()));
  convoy::LoggingOptions logging;
  logging.level = absl::GetFlag(FLAGS_log_level);
  logging.format = *format;
  logging.logger_name = "convoyd";
  // The engine and front-end threads never wait on stderr (a stalled pipe drops lines instead).
  logging.async = true;
  if (absl::Status status = convoy::SetUpLogging(logging); !status.ok()) {
    return convoy::cli::BadUsage(kCommandLine, std::string(status.message()));
  }

  const std::string config_path = absl::GetFlag(FLAGS_config);
  // The file as read, with the command line's overrides: at start, and at each reload.
  auto load = [config_path,
               specified = parsed.specified]() -> absl::StatusOr<convoy::v1::ServerConfig> {
    absl::StatusOr<convoy::v1::ServerConfig> config =
        config_path.empty() ? convoy::ParseServerConfig("", "<defaults>")
                            : convoy::LoadServerConfig(config_path);
    if (!config.ok()) return config.status();
    if (std::string error = ApplyOverrides(specified, &*config); !error.empty()) {
      return absl::InvalidArgumentError(error);
    }
    return config;
  };
  absl::StatusOr<convoy::v1::ServerConfig> config = load();
  if (!config.ok())
    return convoy::cli::BadUsage(kCommandLine, std::string(config.status().message()));
  convoy::DaemonOptions options;
  options.config = *std::move(config);
  options.config_source = config_path.empty() ? "<defaults>" : config_path;
  options.config_path = config_path;
  options.reload_config = load;
  if (options.config.model().dir().empty()) {
    return convoy::cli::BadUsage(kCommandLine,
                                 "no model: give --model DIR or model { dir: ... } in the config");
  }
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.http_port_file = absl::GetFlag(FLAGS_http_port_file);
  options.request_trace_path = absl::GetFlag(FLAGS_request_trace);
  convoy::LogEffectiveConfig(convoy::EffectiveConfigText(options.config));
  return convoy::RunDaemon(options);
}
