// convoy tune's TuneTarget over a running convoyd: a point is put in force by rewriting the
// server's config file (the base config with the point's overrides; written whole, then renamed
// over the file) and letting convoyd reload it (SIGHUP when its pid is known, else its watch of
// the file), and taken as in force only once GetServerInfo shows the reload counted and the
// point's fields in the effective config. A refused reload leaves the server on the config it had;
// the file is then put back as it was. Runs go through RunWorkload, each with a seed of its own so
// that no run finds another's prompts in the prefix cache.
#ifndef CONVOY_BENCH_LOADGEN_LIVE_SERVER_H_
#define CONVOY_BENCH_LOADGEN_LIVE_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/tuner.h"
#include "convoy/v1/server_config.pb.h"

namespace convoy::bench {

struct LiveServerOptions {
  ServerTarget target;
  // The config file the server was started with (--config); rewritten for every point.
  std::string config_path;
  // > 0: the server's process, sent SIGHUP after each write.
  pid_t pid = 0;
  // How long a reload may take to show in GetServerInfo (convoyd checks its file every 2 s).
  absl::Duration reload_timeout = absl::Seconds(20);
  v1::Workload workload;
  // Everything but the duration, which each Measure sets.
  RunOptions run_options;
  // When set and true, Apply and Measure do nothing and fail (the run in progress ends first).
  std::function<bool()> interrupted;
};

class LiveServer final : public TuneTarget {
 public:
  // Reads and parses the config file. INVALID_ARGUMENT naming the file when it cannot.
  static absl::StatusOr<std::unique_ptr<LiveServer>> Create(LiveServerOptions options);

  absl::Status Apply(const std::vector<Override>& point) override;
  RunResult Measure(double seconds) override;
  // Puts the config file back as it was when Create read it, and waits for its reload.
  absl::Status Restore();

  // The index of the first point of `space` whose values are all in force on the server; -1 for
  // none.
  absl::StatusOr<int> PointInForce(const std::vector<std::vector<Override>>& space) const;

  // The base config with `point` applied, as written to the file (and to convoy tune's --out).
  absl::StatusOr<std::string> ConfigText(const std::vector<Override>& point) const;

 private:
  LiveServer(LiveServerOptions options, std::string original, convoy::v1::ServerConfig base)
      : options_(std::move(options)),
        original_text_(original),
        file_text_(std::move(original)),
        base_(std::move(base)) {}

  // Writes `text` over the config file (a temporary file renamed over it).
  absl::Status WriteConfigFile(const std::string& text);
  // Writes `text` (unless the file holds it and no pid is known), triggers and awaits the reload
  // until `in_force_check` accepts the effective config. Puts the file back as it was when the
  // reload is refused or does not show.
  absl::Status Reload(
      const std::string& text,
      const std::function<absl::StatusOr<bool>(const std::string&)>& in_force_check);

  const LiveServerOptions options_;
  const std::string original_text_;
  std::string file_text_;  // what the config file holds now
  const convoy::v1::ServerConfig base_;
  uint64_t runs_ = 0;
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_LIVE_SERVER_H_
