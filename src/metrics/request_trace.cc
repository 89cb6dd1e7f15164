#include "metrics/request_trace.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace convoy {

absl::StatusOr<std::unique_ptr<RequestTrace>> RequestTrace::Open(const std::string& path,
                                                                 absl::Time origin) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the request trace ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<RequestTrace>(new RequestTrace(file, path, origin));
}

RequestTrace::~RequestTrace() { std::fclose(file_); }

std::string RequestTrace::FormatLine(const RequestSummary& summary, absl::Time origin) {
  return absl::StrFormat(
      R"({"arrival_s":%.6f,"prompt_tokens":%d,"output_tokens":%d,"priority":%d,"outcome":"%s"})",
      absl::ToDoubleSeconds(summary.arrival - origin), summary.prompt_tokens,
      summary.generated_tokens, summary.priority, OutcomeName(summary.outcome));
}

void RequestTrace::Record(const RequestSummary& summary) {
  if (summary.prompt_tokens <= 0) return;  // refused before its prompt was known
  const std::string line = absl::StrCat(FormatLine(summary, origin_), "\n");
  absl::MutexLock lock(&mu_);
  if (failed_) return;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    failed_ = true;
    spdlog::error("cannot write the request trace {}: {}; tracing stops", path_,
                  std::strerror(errno));
  }
}

}  // namespace convoy
