#include "bench/loadgen/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "convoy/status_macros.h"

extern char** environ;

namespace convoy::bench {

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const DaemonSpec& spec) {
  const std::string port_file = absl::StrCat(spec.work_dir, "/port");
  const std::string http_port_file = absl::StrCat(spec.work_dir, "/http-port");
  const std::string log_path = absl::StrCat(spec.work_dir, "/convoyd.log");
  ::unlink(port_file.c_str());
  ::unlink(http_port_file.c_str());
  const std::pair<const char*, std::string> flags[] = {{"--config", spec.config_path},
                                                       {"--model", spec.model_dir},
                                                       {"--listen-address", "127.0.0.1"},
                                                       {"--port", "0"},
                                                       {"--port-file", port_file},
                                                       {"--http-listen-address", "127.0.0.1"},
                                                       {"--http-port", "0"},
                                                       {"--http-port-file", http_port_file},
                                                       {"--metrics-port", "0"}};
  std::vector<std::string> args = {spec.convoyd};
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    args.push_back(value);
  }
  args.insert(args.end(), spec.extra_args.begin(), spec.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const absl::Time spawned = absl::Now();
  const int rc = posix_spawn(&pid, spec.convoyd.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", spec.convoyd, ": ", std::strerror(rc)));
  }
  std::unique_ptr<DaemonProcess> process(
      new DaemonProcess(pid, port_file, http_port_file, log_path));
  process->started_at_ = spawned;
  return process;
}

DaemonProcess::~DaemonProcess() {
  if (!exited_) Stop(absl::Seconds(30)).IgnoreError();
}

bool DaemonProcess::Reap() {
  if (exited_) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    wait_status_ = status;
  }
  return exited_;
}

absl::Status DaemonProcess::ExitStatus() const {
  if (WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0) return absl::OkStatus();
  const std::string how = WIFEXITED(wait_status_)
                              ? absl::StrCat("exited with status ", WEXITSTATUS(wait_status_))
                              : absl::StrCat("was killed by signal ", WTERMSIG(wait_status_));
  return absl::InternalError(
      absl::StrCat("convoyd ", how, "; the end of ", log_path_, ":\n", LogTail(15)));
}

absl::Status DaemonProcess::CheckAlive() {
  if (!Reap()) return absl::OkStatus();
  absl::Status status = ExitStatus();
  if (status.ok()) {
    return absl::InternalError(
        absl::StrCat("convoyd exited early; the end of ", log_path_, ":\n", LogTail(15)));
  }
  return status;
}

absl::StatusOr<std::string> DaemonProcess::WaitForAddress(absl::Duration timeout) {
  return WaitForPortFile(port_file_, timeout);
}

absl::StatusOr<std::string> DaemonProcess::WaitForHttpAddress(absl::Duration timeout) {
  return WaitForPortFile(http_port_file_, timeout);
}

absl::StatusOr<std::string> DaemonProcess::WaitForPortFile(const std::string& path,
                                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string text;
    if (in && std::getline(in, text)) {
      int port = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0) {
        return absl::StrCat("127.0.0.1:", port);
      }
    }
    RETURN_IF_ERROR(CheckAlive());
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("convoyd wrote no ", path, " in ",
                                                  absl::FormatDuration(timeout), "; the end of ",
                                                  log_path_, ":\n", LogTail(15)));
}

absl::Status DaemonProcess::Stop(absl::Duration timeout) {
  if (Reap()) return ExitStatus();
  ::kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Reap()) return ExitStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  exited_ = true;
  wait_status_ = status;
  return absl::DeadlineExceededError(absl::StrCat(
      "convoyd did not exit within ", absl::FormatDuration(timeout), " of SIGTERM; killed"));
}

std::string DaemonProcess::LogTail(int lines) const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> all = absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + from, all.end(), "\n");
}

}  // namespace convoy::bench
