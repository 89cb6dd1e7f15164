// Reading convoy-bench workload files (schema: bench/loadgen/workload.proto).
#ifndef CONVOY_BENCH_LOADGEN_WORKLOAD_H_
#define CONVOY_BENCH_LOADGEN_WORKLOAD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/loadgen/workload.pb.h"

namespace convoy::bench {

// Parses a workload in protobuf text format, fills the defaults the schema writes down and
// validates it. Errors are INVALID_ARGUMENT and read "SOURCE:LINE: field.path: reason".
absl::StatusOr<v1::Workload> ParseWorkload(absl::string_view text, absl::string_view source);

// ParseWorkload on a file's contents; NOT_FOUND when it cannot be read.
absl::StatusOr<v1::Workload> LoadWorkload(const std::string& path);

// A one-line description of the arrival process, e.g. "open loop, Poisson, 4 req/s".
std::string DescribeArrival(const v1::Arrival& arrival);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_WORKLOAD_H_
