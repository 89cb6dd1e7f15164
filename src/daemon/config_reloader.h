// Live reload of convoyd's config file. Reload reads the file again and either applies all of it
// or none of it:
//   - a file that does not parse or validate is refused with its file:line:field error;
//   - a change to a field that needs a restart (config_reload.h lists what may change live) is
//     refused, naming every such field;
//   - otherwise the batcher's knobs go to the engine loop (applied on its thread between steps;
//     held requests stay held), then the request limits and API keys to the front end.
// Refused or applied, one log line says so and why, the config in force stays whole, and the
// outcome is counted (convoy info, convoy_config_reloads_total).
//
// Thread-safe; Reload calls run one at a time.
#ifndef CONVOY_DAEMON_CONFIG_RELOADER_H_
#define CONVOY_DAEMON_CONFIG_RELOADER_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "convoy/v1/server_config.pb.h"
#include "engine/engine_loop.h"
#include "frontend/generation.h"
#include "metrics/metrics.h"

namespace convoy {

// The front end's limits that a reload may change, from `config` (defaults filled): the one
// mapping from config fields to ServingLimits, at start and at every reload.
void SetReloadableLimits(const v1::ServerConfig& config, ServingLimits* limits);

class ConfigReloader {
 public:
  // Reads the config file and applies the command line's overrides to it.
  using LoadFn = std::function<absl::StatusOr<v1::ServerConfig>()>;

  // `current`: the config in force. `engine` and `hub` must outlive the reloader; `metrics` may
  // be null. Publishes the config in force (hub's ConfigStatus, convoy_config_info).
  ConfigReloader(v1::ServerConfig current, LoadFn load, EngineLoop* engine, GenerationHub* hub,
                 Metrics* metrics);

  // Loads the file and applies it whole, or refuses it whole. `trigger` names the cause in the
  // log ("SIGHUP", "the file changed"). OK when applied; otherwise why it was refused.
  absl::Status Reload(absl::string_view trigger);

  v1::ServerConfig current() const;

 private:
  absl::Status Apply(const v1::ServerConfig& next);
  void Publish(const std::string& last_reload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LoadFn load_;
  EngineLoop* const engine_;
  GenerationHub* const hub_;
  Metrics* const metrics_;

  absl::Mutex reload_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Reload at a time
  mutable absl::Mutex mu_;
  v1::ServerConfig current_ ABSL_GUARDED_BY(mu_);
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convoy

#endif  // CONVOY_DAEMON_CONFIG_RELOADER_H_
