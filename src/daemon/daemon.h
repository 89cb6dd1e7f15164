// convoyd's life: listen on the gRPC and HTTP ports (health NOT_SERVING, /ready 503), load the
// model, warm up, serve (SERVING, /ready 200), and on the first SIGTERM or SIGINT drain
// (NOT_SERVING and /ready 503 at once) and exit. While serving, SIGHUP, or a change of the config
// file's content (checked every few seconds: a Kubernetes ConfigMap is replaced by a symlink
// swap, which no watch on the file itself sees), reloads the config (config_reloader.h). See
// convoyd_main.cc for the command line.
#ifndef CONVOY_DAEMON_DAEMON_H_
#define CONVOY_DAEMON_DAEMON_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "convoy/v1/server_config.pb.h"

namespace convoy {

struct DaemonOptions {
  // Defaults filled, validated, command-line overrides applied; model.dir set.
  v1::ServerConfig config;
  // Where "config" came from, for the log.
  std::string config_source;
  // The config file, watched for changes; empty: none (the defaults), nothing to reload.
  std::string config_path;
  // Reads config_path again, with the same command-line overrides as "config".
  std::function<absl::StatusOr<v1::ServerConfig>()> reload_config;
  // When not empty, the bound port is written there (as decimal text) once the server listens.
  std::string port_file;
  // The same for the HTTP port.
  std::string http_port_file;
  // When not empty, a line per finished request is written there (metrics/request_trace.h).
  std::string request_trace_path;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every thread it starts from
// then on. Call first in main, before any thread starts (the logger's, gRPC's, the engine's):
// RunDaemon's own signal thread unblocks them once their handlers are installed, so the kernel
// hands them to that thread, waiting in a read, and never interrupts a worker's system call. A
// signal that comes before then waits, pending, and is handled then. (A thread that a library
// starts with its own mask may still take one; the handlers work on any thread.)
void BlockDaemonSignals();

// Runs until a signal ends it. Returns the process exit code: 0 after a clean drain, 1 when the
// server could not start (the reason is logged). Installs handlers for SIGTERM and SIGINT (the
// first drains, a second exits the process at once, code 128 + the signal) and SIGHUP (reload).
// Call once.
int RunDaemon(const DaemonOptions& options);

}  // namespace convoy

#endif  // CONVOY_DAEMON_DAEMON_H_
