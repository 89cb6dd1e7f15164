#include "bench/loadgen/server_metrics.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace convoy::bench {

absl::StatusOr<double> FindSample(absl::string_view exposition, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || line.empty() || line.front() != ' ') continue;
    // The value, then an optional timestamp.
    const absl::string_view rest = absl::StripAsciiWhitespace(line);
    double parsed = 0;
    if (!absl::SimpleAtod(rest.substr(0, rest.find(' ')), &parsed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("/metrics: the value of ", series, " is not a number: '", line, "'"));
    }
    return parsed;
  }
  return absl::NotFoundError(absl::StrCat("/metrics has no series ", series));
}

ServerMetricsSample ParseServerMetrics(absl::string_view exposition) {
  ServerMetricsSample sample;
  auto read = [exposition](absl::string_view series, double* out) {
    if (absl::StatusOr<double> v = FindSample(exposition, series); v.ok()) *out = *v;
  };
  read("process_resident_memory_bytes", &sample.resident_bytes);
  read("convoy_kv_cache_usage_perc", &sample.kv_usage);
  read("convoy_kv_cache_blocks_used", &sample.kv_blocks_used);
  return sample;
}

void ServerMemory::Add(const ServerMetricsSample& sample) {
  ++samples;
  peak_resident_bytes = std::max(peak_resident_bytes, sample.resident_bytes);
  peak_kv_usage = std::max(peak_kv_usage, sample.kv_usage);
  peak_kv_blocks_used = std::max(peak_kv_blocks_used, sample.kv_blocks_used);
}

}  // namespace convoy::bench
