// Server-config sweeps: `--set key=v1,v2` axes, their cartesian product, and applying one
// combination to a base config (proto/convoy/v1/server_config.proto) to write a temporary file.
#ifndef CONVOY_BENCH_LOADGEN_CONFIG_OVERRIDE_H_
#define CONVOY_BENCH_LOADGEN_CONFIG_OVERRIDE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convoy/v1/server_config.pb.h"

namespace convoy::bench {

struct Override {
  std::string key;    // as given, e.g. "mode" or "kv_cache.block_size"
  std::string value;  // text-format value, e.g. "STATIC" or "32"
};

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

// Parses one `--set` value, "key=v1,v2,...". INVALID_ARGUMENT names what is wrong.
absl::StatusOr<SweepAxis> ParseSweepAxis(absl::string_view text);

// Every combination, the first axis varying slowest. No axes: one empty combination.
std::vector<std::vector<Override>> CartesianProduct(const std::vector<SweepAxis>& axes);

// Sets one field of `config`. A key is a field path below ServerConfig ("scheduler.mode"), a bare
// field name of scheduler, kv_cache, request_defaults or executor ("max_batch_size"), or one of the
// short names batch, queue_delay_us, token_budget, chunk_size. INVALID_ARGUMENT for an unknown key
// or a value the field cannot take.
absl::Status ApplyOverride(const Override& override, convoy::v1::ServerConfig* config);

// "mode=STATIC max_batch_size=8"; "base" for no overrides.
std::string OverrideLabel(const std::vector<Override>& overrides);

// Reads a server config in text format (no defaults filled, no validation: the daemon does both).
absl::StatusOr<convoy::v1::ServerConfig> ParseServerConfigText(absl::string_view text,
                                                               absl::string_view source);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_CONFIG_OVERRIDE_H_
