// Loading the server config file (proto/convoy/v1/server_config.proto, protobuf text format):
// parse, fill defaults, validate. Every error names the file, the line and the field:
//   configs/x.pbtxt:7: scheduler.preferred_batch_size: preferred_batch_size 64 exceeds
//   max_batch_size 32
#ifndef CONVOY_CONFIG_SERVER_CONFIG_H_
#define CONVOY_CONFIG_SERVER_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convoy/v1/server_config.pb.h"
#include "scheduler/scheduler_options.h"

namespace convoy {

// Parses `text`; `source` names the file in messages. The result has every default filled.
absl::StatusOr<v1::ServerConfig> ParseServerConfig(absl::string_view text,
                                                   absl::string_view source);
// Reads and parses `path`.
absl::StatusOr<v1::ServerConfig> LoadServerConfig(const std::string& path);

// API keys are at least this long.
inline constexpr size_t kMinApiKeyChars = 16;

// Checks keys[index] (name, key length, max_priority in 1..priority_levels, name and key unique
// among keys[0..index]); `error` makes the status for the field at fault and the reason.
absl::Status ValidateApiKey(
    const google::protobuf::RepeatedPtrField<v1::ApiKey>& keys, int index, uint32_t priority_levels,
    const std::function<absl::Status(const char* field, absl::string_view reason)>& error);

// Fills every unset field with its default (documented in the .proto).
void FillServerConfigDefaults(v1::ServerConfig* config);

// The scheduler's options from a filled, valid config. num_blocks is left at 0: it follows from
// the executor's KV cache (kv_cache.memory_budget_bytes and the model's shape).
SchedulerOptions SchedulerOptionsFromConfig(const v1::ServerConfig& config);

}  // namespace convoy

#endif  // CONVOY_CONFIG_SERVER_CONFIG_H_
