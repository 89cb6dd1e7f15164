// Log set-up for the daemon (spdlog): a level by name, plain text or JSON lines, and helpers for
// lines with structured fields (the effective config at start, one line per finished request).
//
// JSON lines: one object per line, {"time":"2024-05-01T12:34:56.789012Z","level":"info",
// "message":"...", <fields>}. Text lines: `2024-05-01T12:34:56.789012Z [info] message k=v k=v`.
// Plain spdlog calls (spdlog::info("...")) get the same shape, without fields.
#ifndef CONVOY_METRICS_LOGGING_H_
#define CONVOY_METRICS_LOGGING_H_

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "metrics/request_summary.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/sink.h"

namespace convoy {

enum class LogFormat { kText, kJson };

// "trace", "debug", "info", "warn" or "warning", "error", "critical", "off" (any case).
// INVALID_ARGUMENT naming `name` otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name);
// "text" or "json" (any case).
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

struct LoggingOptions {
  std::string level = "info";
  LogFormat format = LogFormat::kText;
  // Where lines go; empty: stderr.
  std::vector<spdlog::sink_ptr> sinks;
  std::string logger_name = "convoy";
  // Lines go to the sinks from a thread of their own, through a queue of `async_queue_lines`: a
  // thread that logs never waits on a slow sink (a stalled pipe, a full disk). When the queue is
  // full the oldest line is dropped and counted (DroppedLogLines). Off: each line is written by the
  // thread that logs it (tests that read their sink at once).
  bool async = false;
  size_t async_queue_lines = 8192;
};

// Lines the asynchronous logger dropped because its queue was full, since the process started.
int64_t DroppedLogLines();

// A logger formatted as `options` says. Does not install it.
absl::StatusOr<std::shared_ptr<spdlog::logger>> MakeLogger(const LoggingOptions& options);
// MakeLogger, installed as spdlog's default logger (what spdlog::info and the helpers below use).
absl::Status SetUpLogging(const LoggingOptions& options);

// One structured field of a log line. Keys are identifiers of ours (not "time", "level" or
// "message"); values are strings, integers, floating point numbers (non-finite ones are logged
// as null), booleans or null. A LogField refers to its key and string value: use it within the
// call that logs it.
class LogField {
 public:
  LogField(absl::string_view key, absl::string_view value)
      : key_(key), value_(value), is_string_(true) {}
  LogField(absl::string_view key, const char* value) : LogField(key, absl::string_view(value)) {}
  LogField(absl::string_view key, const std::string& value)
      : LogField(key, absl::string_view(value)) {}
  LogField(absl::string_view key, bool value) : key_(key), literal_(value ? "true" : "false") {}
  LogField(absl::string_view key, std::nullptr_t) : key_(key), literal_("null") {}
  LogField(absl::string_view key, double value);
  template <typename T>
  requires std::integral<T> &&(!std::same_as<T, bool>)LogField(absl::string_view key, T value)
      : key_(key), literal_(std::to_string(value)) {}

  absl::string_view key() const { return key_; }
  bool is_string() const { return is_string_; }
  // The raw string for a string field; the JSON literal otherwise.
  absl::string_view value() const { return is_string_ ? value_ : absl::string_view(literal_); }

 private:
  absl::string_view key_;
  absl::string_view value_;
  std::string literal_;
  bool is_string_ = false;
};

// Logs `message` with `fields` at `level`. `logger` null: the default logger.
// `fields` may be a braced list: {{"key", value}, ...}.
void LogWithFields(spdlog::logger* logger, spdlog::level::level_enum level,
                   absl::string_view message, absl::Span<const LogField> fields);

// At start: the configuration in effect (defaults filled), e.g. its protobuf text. One line in
// JSON (field "config"); in text, the config follows on indented lines.
void LogEffectiveConfig(absl::string_view config_text, spdlog::logger* logger = nullptr);

// One line when a request ends (info; warning for kFailed): id, outcome, reject_reason (for
// kRejected when known), prompt_tokens, cached_prompt_tokens, generated_tokens, queue_ms, ttft_ms
// (null when unknown), total_ms, and error (the status message, when not OK).
void LogRequestDone(const RequestSummary& summary, spdlog::logger* logger = nullptr);

}  // namespace convoy

#endif  // CONVOY_METRICS_LOGGING_H_
