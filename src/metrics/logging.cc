#include "metrics/logging.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "spdlog/async.h"
#include "spdlog/async_logger.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace convoy {
namespace {

// A structured payload travels through spdlog as one string:
//   kMark message (kMark key kSep type value)*
// with type 's' (a raw string) or 'j' (a JSON literal). Plain spdlog messages do not start with
// kMark. The two separators are removed from messages and string values.
constexpr char kMark = '\x1f';
constexpr char kSep = '\x1e';

void AppendSanitized(absl::string_view text, std::string* out) {
  for (char c : text) out->push_back(c == kMark || c == kSep ? ' ' : c);
}

struct ParsedField {
  absl::string_view key;
  bool is_string;
  absl::string_view value;
};

struct ParsedPayload {
  absl::string_view message;
  std::vector<ParsedField> fields;
};

ParsedPayload ParsePayload(absl::string_view payload) {
  ParsedPayload parsed;
  if (payload.empty() || payload.front() != kMark) {
    parsed.message = payload;
    return parsed;
  }
  std::vector<absl::string_view> parts = absl::StrSplit(payload.substr(1), kMark);
  parsed.message = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t sep = parts[i].find(kSep);
    if (sep == absl::string_view::npos || sep + 1 >= parts[i].size()) continue;
    parsed.fields.push_back(
        {parts[i].substr(0, sep), parts[i][sep + 1] == 's', parts[i].substr(sep + 2)});
  }
  return parsed;
}

// Length of the valid UTF-8 sequence at the start of `s`, or 0 when it is not one.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t len;
  uint32_t min;
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) {
    len = 2;
    min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    len = 3;
    min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  uint32_t code = lead & (0x7f >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return len;
}

// `text` as a JSON string, quotes included; invalid UTF-8 becomes U+FFFD.
void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  while (!text.empty()) {
    const char c = text.front();
    const size_t len = Utf8SequenceLength(text);
    if (len == 0) {
      out->append("\xef\xbf\xbd");
      text.remove_prefix(1);
      continue;
    }
    if (len > 1) {
      out->append(text.data(), len);
    } else if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(out, "\\u%04x", static_cast<int>(c));
    } else {
      out->push_back(c);
    }
    text.remove_prefix(len);
  }
  out->push_back('"');
}

bool NeedsQuotes(absl::string_view text) {
  if (text.empty()) return true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == '"' || c == '=') return true;
  }
  return false;
}

class ConvoyFormatter : public spdlog::formatter {
 public:
  explicit ConvoyFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string time =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromChrono(msg.time), absl::UTCTimeZone());
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    const ParsedPayload payload =
        ParsePayload(absl::string_view(msg.payload.data(), msg.payload.size()));
    std::string line;
    if (format_ == LogFormat::kJson) {
      line = absl::StrCat("{\"time\":\"", time, "\",\"level\":\"",
                          absl::string_view(level.data(), level.size()), "\",\"message\":");
      AppendJsonString(payload.message, &line);
      for (const ParsedField& field : payload.fields) {
        line.push_back(',');
        AppendJsonString(field.key, &line);
        line.push_back(':');
        if (field.is_string) {
          AppendJsonString(field.value, &line);
        } else {
          line.append(field.value.data(), field.value.size());
        }
      }
      line.append("}\n");
    } else {
      line = absl::StrCat(time, " [", absl::string_view(level.data(), level.size()), "] ",
                          payload.message);
      std::string blocks;  // multi-line string fields, after the line
      for (const ParsedField& field : payload.fields) {
        absl::StrAppend(&line, " ", field.key, "=");
        if (field.is_string && absl::StrContains(field.value, '\n')) {
          line.append("(below)");
          absl::StrAppend(&blocks, "  ", field.key, ":\n");
          for (absl::string_view l : absl::StrSplit(field.value, '\n')) {
            absl::StrAppend(&blocks, "    ", l, "\n");
          }
        } else if (field.is_string && NeedsQuotes(field.value)) {
          AppendJsonString(field.value, &line);
        } else {
          line.append(field.value.data(), field.value.size());
        }
      }
      line.push_back('\n');
      line.append(blocks);
    }
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<ConvoyFormatter>(format_);
  }

 private:
  const LogFormat format_;
};

LogField OptionalMilliseconds(absl::string_view key, const std::optional<absl::Duration>& d) {
  return d ? LogField(key, absl::ToDoubleMilliseconds(*d)) : LogField(key, nullptr);
}

}  // namespace

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  using spdlog::level::level_enum;
  static constexpr std::pair<absl::string_view, level_enum> kLevels[] = {
      {"trace", level_enum::trace},       {"debug", level_enum::debug},  {"info", level_enum::info},
      {"warn", level_enum::warn},         {"warning", level_enum::warn}, {"error", level_enum::err},
      {"critical", level_enum::critical}, {"off", level_enum::off}};
  for (const auto& [level_name, level] : kLevels) {
    if (lower == level_name) return level;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level \"", name,
                   "\"; expected trace, debug, info, warning, error, critical or off"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "text") return LogFormat::kText;
  if (lower == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log format \"", name, "\"; expected text or json"));
}

namespace {

// The asynchronous loggers' writer thread and queue; made by the first asynchronous logger.
absl::Mutex async_pool_mu;
std::shared_ptr<spdlog::details::thread_pool> async_pool ABSL_GUARDED_BY(async_pool_mu);

std::shared_ptr<spdlog::details::thread_pool> AsyncPool(size_t queue_lines) {
  absl::MutexLock lock(&async_pool_mu);
  if (async_pool == nullptr) {
    async_pool = std::make_shared<spdlog::details::thread_pool>(queue_lines, /*threads_n=*/1);
  }
  return async_pool;
}

}  // namespace

int64_t DroppedLogLines() {
  absl::MutexLock lock(&async_pool_mu);
  return async_pool == nullptr ? 0 : static_cast<int64_t>(async_pool->overrun_counter());
}

absl::StatusOr<std::shared_ptr<spdlog::logger>> MakeLogger(const LoggingOptions& options) {
  absl::StatusOr<spdlog::level::level_enum> level = ParseLogLevel(options.level);
  if (!level.ok()) return level.status();
  std::vector<spdlog::sink_ptr> sinks = options.sinks;
  if (sinks.empty()) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  std::shared_ptr<spdlog::logger> logger;
  if (options.async) {
    logger = std::make_shared<spdlog::async_logger>(options.logger_name, sinks.begin(), sinks.end(),
                                                    AsyncPool(options.async_queue_lines),
                                                    spdlog::async_overflow_policy::overrun_oldest);
  } else {
    logger = std::make_shared<spdlog::logger>(options.logger_name, sinks.begin(), sinks.end());
  }
  logger->set_formatter(std::make_unique<ConvoyFormatter>(options.format));
  logger->set_level(*level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

absl::Status SetUpLogging(const LoggingOptions& options) {
  absl::StatusOr<std::shared_ptr<spdlog::logger>> logger = MakeLogger(options);
  if (!logger.ok()) return logger.status();
  spdlog::set_default_logger(*std::move(logger));
  return absl::OkStatus();
}

LogField::LogField(absl::string_view key, double value) : key_(key) {
  literal_ = std::isfinite(value) ? absl::StrCat(value) : "null";
}

void LogWithFields(spdlog::logger* logger, spdlog::level::level_enum level,
                   absl::string_view message, absl::Span<const LogField> fields) {
  if (logger == nullptr) logger = spdlog::default_logger_raw();
  if (logger == nullptr || !logger->should_log(level)) return;
  std::string payload(1, kMark);
  AppendSanitized(message, &payload);
  for (const LogField& field : fields) {
    payload.push_back(kMark);
    AppendSanitized(field.key(), &payload);
    payload.push_back(kSep);
    payload.push_back(field.is_string() ? 's' : 'j');
    AppendSanitized(field.value(), &payload);
  }
  logger->log(level, spdlog::string_view_t(payload.data(), payload.size()));
}

void LogEffectiveConfig(absl::string_view config_text, spdlog::logger* logger) {
  LogWithFields(logger, spdlog::level::info, "effective config", {{"config", config_text}});
}

void LogRequestDone(const RequestSummary& summary, spdlog::logger* logger) {
  std::vector<LogField> fields;
  fields.emplace_back("id", summary.id);
  if (!summary.client_request_id.empty()) {
    fields.emplace_back("client_request_id", summary.client_request_id);
  }
  fields.emplace_back("outcome", OutcomeName(summary.outcome));
  if (summary.seed) fields.emplace_back("seed", *summary.seed);
  if (summary.outcome == Outcome::kRejected && summary.reject_reason) {
    fields.emplace_back("reject_reason", RejectReasonName(*summary.reject_reason));
  }
  fields.emplace_back("prompt_tokens", summary.prompt_tokens);
  fields.emplace_back("cached_prompt_tokens", summary.cached_prompt_tokens);
  fields.emplace_back("generated_tokens", summary.generated_tokens);
  fields.push_back(OptionalMilliseconds("queue_ms", summary.queue_time));
  fields.push_back(OptionalMilliseconds("ttft_ms", summary.time_to_first_token));
  fields.emplace_back("total_ms", absl::ToDoubleMilliseconds(summary.e2e_latency));
  if (!summary.status.ok()) fields.emplace_back("error", summary.status.message());
  LogWithFields(logger,
                summary.outcome == Outcome::kFailed ? spdlog::level::warn : spdlog::level::info,
                "request done", fields);
}

}  // namespace convoy
