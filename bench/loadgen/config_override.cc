#include "bench/loadgen/config_override.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace convoy::bench {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::TextFormat;

const std::map<std::string, std::string>& Aliases() {
  static const auto* aliases = new std::map<std::string, std::string>{
      {"batch", "scheduler.max_batch_size"},
      {"queue_delay_us", "scheduler.max_queue_delay_microseconds"},
      {"token_budget", "scheduler.max_num_batched_tokens"},
      {"chunk_size", "scheduler.prefill_chunk_size"},
  };
  return *aliases;
}

// The full dotted path of `key`, or empty when it names no field.
std::string Resolve(const std::string& key) {
  const std::string dashless = absl::StrReplaceAll(key, {{"-", "_"}});
  if (auto it = Aliases().find(dashless); it != Aliases().end()) return it->second;
  if (dashless.find('.') != std::string::npos) return dashless;
  for (const char* section : {"scheduler", "kv_cache", "request_defaults", "executor"}) {
    const FieldDescriptor* f = convoy::v1::ServerConfig::descriptor()->FindFieldByName(section);
    if (f->message_type()->FindFieldByName(dashless) != nullptr) {
      return absl::StrCat(section, ".", dashless);
    }
  }
  return "";
}

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::StatusOr<SweepAxis> ParseSweepAxis(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set '", text, "': expected key=value[,value...]"));
  }
  SweepAxis axis;
  axis.key = std::string(absl::StripAsciiWhitespace(text.substr(0, eq)));
  for (absl::string_view v : absl::StrSplit(text.substr(eq + 1), ',')) {
    v = absl::StripAsciiWhitespace(v);
    if (v.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--set '", text, "': empty value"));
    }
    axis.values.emplace_back(v);
  }
  if (Resolve(axis.key).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set '", text, "': unknown config field '", axis.key, "'"));
  }
  return axis;
}

std::vector<std::vector<Override>> CartesianProduct(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<Override>> out = {{}};
  for (const SweepAxis& axis : axes) {
    std::vector<std::vector<Override>> next;
    for (const std::vector<Override>& prefix : out) {
      for (const std::string& value : axis.values) {
        std::vector<Override> combo = prefix;
        combo.push_back({axis.key, value});
        next.push_back(std::move(combo));
      }
    }
    out = std::move(next);
  }
  return out;
}

absl::Status ApplyOverride(const Override& override, convoy::v1::ServerConfig* config) {
  const std::string path = Resolve(override.key);
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown config field '", override.key, "'"));
  }
  Message* message = config;
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const Descriptor* d = message->GetDescriptor();
    const FieldDescriptor* f = d->FindFieldByName(parts[i]);
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown config field '", override.key, "' (no ", parts[i], " in ", d->full_name(), ")"));
    }
    if (i + 1 < parts.size()) {
      if (f->message_type() == nullptr || f->is_repeated()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config field '", override.key, "': ", parts[i], " is not a message"));
      }
      message = message->GetReflection()->MutableMessage(message, f);
      continue;
    }
    if (f->is_repeated() || f->message_type() != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("config field '", override.key, "' is not a single value"));
    }
    if (!TextFormat::ParseFieldValueFromString(override.value, f, message)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config field '", override.key, "': invalid value '", override.value, "'"));
    }
  }
  return absl::OkStatus();
}

std::string OverrideLabel(const std::vector<Override>& overrides) {
  if (overrides.empty()) return "base";
  return absl::StrJoin(overrides, " ", [](std::string* out, const Override& o) {
    absl::StrAppend(out, o.key, "=", o.value);
  });
}

absl::StatusOr<convoy::v1::ServerConfig> ParseServerConfigText(absl::string_view text,
                                                               absl::string_view source) {
  convoy::v1::ServerConfig config;
  TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", errors.first()));
  }
  return config;
}

}  // namespace convoy::bench
