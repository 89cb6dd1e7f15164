#include "bench/loadgen/live_server.h"

#include <signal.h>
#include <stdio.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/client.h"
#include "convoy/status_macros.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace convoy::bench {
namespace {

// How often GetServerInfo is asked while a reload is awaited.
constexpr absl::Duration kReloadPoll = absl::Milliseconds(100);

// Whether every field `point` sets has its value in `effective` (the config in force).
absl::StatusOr<bool> InForce(const std::string& effective_text,
                             const std::vector<Override>& point) {
  ASSIGN_OR_RETURN(const convoy::v1::ServerConfig effective,
                   ParseServerConfigText(effective_text, "the server's effective config"));
  convoy::v1::ServerConfig with_point = effective;
  for (const Override& o : point) RETURN_IF_ERROR(ApplyOverride(o, &with_point));
  return google::protobuf::util::MessageDifferencer::Equals(effective, with_point);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LiveServer>> LiveServer::Create(LiveServerOptions options) {
  std::ifstream in(options.config_path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the server's config file ", options.config_path));
  }
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(convoy::v1::ServerConfig base,
                   ParseServerConfigText(text.str(), options.config_path));
  return std::unique_ptr<LiveServer>(
      new LiveServer(std::move(options), text.str(), std::move(base)));
}

absl::StatusOr<int> LiveServer::PointInForce(
    const std::vector<std::vector<Override>>& space) const {
  ASSIGN_OR_RETURN(
      const convoy::v1::ServerInfo info,
      FetchServerInfo(options_.target.channel.get(), absl::Seconds(10), options_.target.api_key));
  for (size_t i = 0; i < space.size(); ++i) {
    ASSIGN_OR_RETURN(const bool in_force, InForce(info.effective_config(), space[i]));
    if (in_force) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<std::string> LiveServer::ConfigText(const std::vector<Override>& point) const {
  convoy::v1::ServerConfig config = base_;
  for (const Override& o : point) RETURN_IF_ERROR(ApplyOverride(o, &config));
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  return absl::StrCat("# convoy tune: ", OverrideLabel(point), "\n", text);
}

absl::Status LiveServer::WriteConfigFile(const std::string& text) {
  const std::string temporary = options_.config_path + ".convoy-tune";
  std::ofstream out(temporary);
  out << text;
  out.close();
  if (!out || ::rename(temporary.c_str(), options_.config_path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", options_.config_path));
  }
  file_text_ = text;
  return absl::OkStatus();
}

absl::Status LiveServer::Apply(const std::vector<Override>& point) {
  if (options_.interrupted && options_.interrupted()) {
    return absl::CancelledError("convoy tune was interrupted");
  }
  ASSIGN_OR_RETURN(const std::string text, ConfigText(point));
  return Reload(text, [&point](const std::string& effective) { return InForce(effective, point); });
}

absl::Status LiveServer::Restore() {
  return Reload(original_text_, [](const std::string&) -> absl::StatusOr<bool> { return true; });
}

absl::Status LiveServer::Reload(
    const std::string& text,
    const std::function<absl::StatusOr<bool>(const std::string&)>& in_force_check) {
  grpc::Channel* channel = options_.target.channel.get();
  const std::string& key = options_.target.api_key;
  ASSIGN_OR_RETURN(const convoy::v1::ServerInfo before,
                   FetchServerInfo(channel, absl::Seconds(10), key));
  const bool changed = text != file_text_;
  // Nothing to reload: the file already says so and the server runs it.
  if (!changed && options_.pid <= 0) {
    ASSIGN_OR_RETURN(const bool in_force, in_force_check(before.effective_config()));
    if (in_force) return absl::OkStatus();
  }
  const std::string previous = file_text_;
  if (changed) RETURN_IF_ERROR(WriteConfigFile(text));
  if (options_.pid > 0 && ::kill(options_.pid, SIGHUP) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot send SIGHUP to process ", options_.pid));
  }
  const absl::Time deadline = absl::Now() + options_.reload_timeout;
  while (absl::Now() < deadline) {
    absl::SleepFor(kReloadPoll);
    absl::StatusOr<convoy::v1::ServerInfo> info = FetchServerInfo(channel, absl::Seconds(10), key);
    if (!info.ok()) continue;
    if (info->config_reloads_refused() > before.config_reloads_refused()) {
      // The server keeps the config it had: so does its file.
      WriteConfigFile(previous).IgnoreError();
      return absl::FailedPreconditionError(
          absl::StrCat("convoyd refused the reload: ", info->last_config_reload()));
    }
    if (info->config_reloads_applied() > before.config_reloads_applied()) {
      ASSIGN_OR_RETURN(const bool in_force, in_force_check(info->effective_config()));
      if (in_force) return absl::OkStatus();
    }
  }
  WriteConfigFile(previous).IgnoreError();
  return absl::DeadlineExceededError(
      absl::StrCat("convoyd did not reload ", options_.config_path, " within ",
                   absl::FormatDuration(options_.reload_timeout),
                   options_.pid > 0 ? "" : " (without --pid it notices a change within 2 s)"));
}

RunResult LiveServer::Measure(double seconds) {
  if (options_.interrupted && options_.interrupted()) {
    RunResult interrupted;
    interrupted.error = "convoy tune was interrupted";
    return interrupted;
  }
  RunOptions options = options_.run_options;
  options.duration_s = seconds;
  v1::Workload workload = options_.workload;
  workload.set_seed(workload.seed() + 1 + runs_++);
  absl::StatusOr<RunResult> result = RunWorkload(options_.target, workload, options);
  if (result.ok()) return *std::move(result);
  RunResult failed;
  failed.error = std::string(result.status().message());
  return failed;
}

}  // namespace convoy::bench
