#include "daemon/config_reloader.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/config_reload.h"
#include "config/server_config.h"
#include "convoy/status_macros.h"
#include "frontend/api_keys.h"
#include "spdlog/spdlog.h"

namespace convoy {

void SetReloadableLimits(const v1::ServerConfig& config, ServingLimits* limits) {
  limits->max_stop_token_ids = static_cast<int32_t>(config.request_limits().max_stop_token_ids());
  limits->max_in_flight_per_client =
      static_cast<int32_t>(config.request_limits().max_in_flight_per_client());
  limits->max_choices = static_cast<int32_t>(config.request_limits().max_choices());
  limits->default_priority_level =
      static_cast<int32_t>(config.scheduler().default_priority_level());
  const uint64_t slow = config.frontend().slow_client_timeout_microseconds();
  limits->slow_client_timeout =
      slow == 0 ? absl::InfiniteDuration() : absl::Microseconds(static_cast<int64_t>(slow));
}

ConfigReloader::ConfigReloader(v1::ServerConfig current, LoadFn load, EngineLoop* engine,
                               GenerationHub* hub, Metrics* metrics)
    : load_(std::move(load)), engine_(engine), hub_(hub), metrics_(metrics) {
  absl::MutexLock lock(&mu_);
  current_ = std::move(current);
  Publish("");
}

v1::ServerConfig ConfigReloader::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

absl::Status ConfigReloader::Reload(absl::string_view trigger) {
  absl::MutexLock serial(&reload_mu_);
  absl::StatusOr<v1::ServerConfig> next =
      load_ ? load_() : absl::FailedPreconditionError("there is no config file to read again");
  absl::Status result = next.status();
  if (result.ok()) result = Apply(*next);
  absl::MutexLock lock(&mu_);
  if (result.ok()) {
    current_ = *std::move(next);
    ++applied_;
    Publish("applied");
    spdlog::info("config reload ({}): applied (hash {})", std::string(trigger),
                 ConfigHash(EffectiveConfigText(current_)));
  } else {
    ++refused_;
    Publish(absl::StrCat("refused: ", result.message()));
    spdlog::warn("config reload ({}): refused, the config in force is kept: {}",
                 std::string(trigger), std::string(result.message()));
  }
  if (metrics_ != nullptr) metrics_->OnConfigReload(result.ok());
  return result;
}

absl::Status ConfigReloader::Apply(const v1::ServerConfig& next) {
  const std::vector<std::string> restart = FieldsNeedingRestart(current(), next);
  if (!restart.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("these fields need a restart to change: ", absl::StrJoin(restart, ", ")));
  }
  // Everything that can fail comes before anything is applied.
  ASSIGN_OR_RETURN(std::shared_ptr<const ApiKeys> keys,
                   ApiKeys::FromConfig(next.frontend(), next.scheduler().priority_levels()));
  RETURN_IF_ERROR(engine_->Reconfigure(SchedulerOptionsFromConfig(next)));
  hub_->UpdateLimits([&next](ServingLimits* limits) { SetReloadableLimits(next, limits); });
  hub_->SetApiKeys(std::move(keys));
  return absl::OkStatus();
}

void ConfigReloader::Publish(const std::string& last_reload) {
  ConfigStatus status;
  status.text = EffectiveConfigText(current_);
  status.hash = ConfigHash(status.text);
  status.reloads_applied = applied_;
  status.reloads_refused = refused_;
  status.last_reload = last_reload;
  if (metrics_ != nullptr) metrics_->SetConfigHash(status.hash);
  hub_->SetConfigStatus(std::move(status));
}

}  // namespace convoy
