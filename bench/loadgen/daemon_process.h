// Starting and stopping convoyd for a sweep: one process per server config, on loopback ports it
// picks itself (--port 0 --port-file for gRPC, --http-port 0 --http-port-file for HTTP).
#ifndef CONVOY_BENCH_LOADGEN_DAEMON_PROCESS_H_
#define CONVOY_BENCH_LOADGEN_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy::bench {

struct DaemonSpec {
  std::string convoyd;      // the executable
  std::string config_path;  // --config
  std::string model_dir;    // --model
  std::string work_dir;     // holds the port files and the log (convoyd.log); must exist
  std::vector<std::string> extra_args;
};

class DaemonProcess {
 public:
  // Spawns convoyd listening on 127.0.0.1 with ports of its choosing; its stdout and stderr go to
  // WORK_DIR/convoyd.log.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const DaemonSpec& spec);
  // Stops the daemon if it still runs.
  ~DaemonProcess();

  // Waits for the gRPC port file; returns "127.0.0.1:PORT". An error (with the log's tail) when the
  // process exits first or `timeout` passes.
  absl::StatusOr<std::string> WaitForAddress(absl::Duration timeout);
  // The same for the HTTP port.
  absl::StatusOr<std::string> WaitForHttpAddress(absl::Duration timeout);

  // OK while the process runs; otherwise how it ended, with the log's tail.
  absl::Status CheckAlive();

  // SIGTERM, then waits up to `timeout` for the exit (SIGKILL after). An error when the exit was
  // not clean (non-zero status or a signal).
  absl::Status Stop(absl::Duration timeout);

  // The last `lines` lines of the log.
  std::string LogTail(int lines) const;
  const std::string& log_path() const { return log_path_; }
  // When the process was spawned (its cold start runs from here).
  absl::Time started_at() const { return started_at_; }
  pid_t pid() const { return pid_; }

 private:
  DaemonProcess(pid_t pid, std::string port_file, std::string http_port_file, std::string log_path)
      : pid_(pid),
        port_file_(std::move(port_file)),
        http_port_file_(std::move(http_port_file)),
        log_path_(std::move(log_path)) {}
  absl::StatusOr<std::string> WaitForPortFile(const std::string& path, absl::Duration timeout);
  // Reaps the child without blocking; true when it has exited.
  bool Reap();
  absl::Status ExitStatus() const;

  pid_t pid_;
  absl::Time started_at_ = absl::Now();
  bool exited_ = false;
  int wait_status_ = 0;
  std::string port_file_;
  std::string http_port_file_;
  std::string log_path_;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_DAEMON_PROCESS_H_
