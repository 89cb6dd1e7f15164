// ParseServerConfig on arbitrary text: parse, fill defaults, validate; a config that is accepted
// must give scheduler options.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "config/server_config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<convoy::v1::ServerConfig> config = convoy::ParseServerConfig(text, "fuzz.pbtxt");
  if (!config.ok()) return 0;
  (void)convoy::SchedulerOptionsFromConfig(*config);
  return 0;
}
