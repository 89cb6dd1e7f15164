// The CPU executor's storage flags that convoy-run and convoy-perplexity share: --weights and
// --kv-dtype.
#ifndef CONVOY_TOOLS_CPU_FORMAT_FLAGS_H_
#define CONVOY_TOOLS_CPU_FORMAT_FLAGS_H_

#include <optional>
#include <string>

#include "executor/cpu/cpu_executor.h"

namespace convoy::cli {

// Sets options->weight_format and options->kv_dtype from the flags' text. Returns "" when both
// parse, else what is wrong (for BadUsage).
inline std::string SetCpuFormats(const std::string& weights, const std::string& kv_dtype,
                                 CpuExecutorOptions* options) {
  const std::optional<CpuWeightFormat> weight_format = ParseCpuWeightFormat(weights);
  if (!weight_format) return "--weights must be auto, f32, bf16 or native, got '" + weights + "'";
  const std::optional<KvDtype> dtype = ParseCpuKvDtype(kv_dtype);
  if (!dtype) return "--kv-dtype must be f32, bf16 or int8, got '" + kv_dtype + "'";
  options->weight_format = *weight_format;
  options->kv_dtype = *dtype;
  return "";
}

}  // namespace convoy::cli

#endif  // CONVOY_TOOLS_CPU_FORMAT_FLAGS_H_
