#include "config/config_reload.h"

#include <cstdint>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace convoy {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

// Collects the top two levels of each differing field's path ("frontend.port"). The differencer
// reports a message after the fields inside it that differ: a message is named only when none of
// its fields was (a message set in one config and absent from the other).
class PathCollector : public MessageDifferencer::Reporter {
 public:
  explicit PathCollector(std::vector<std::string>* paths) : paths_(paths) {}

  void ReportAdded(const Message&, const Message&,
                   const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }
  void ReportDeleted(const Message&, const Message&,
                     const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }
  void ReportModified(const Message&, const Message&,
                      const std::vector<MessageDifferencer::SpecificField>& path) override {
    Add(path);
  }

 private:
  void Add(const std::vector<MessageDifferencer::SpecificField>& path) {
    std::vector<std::string> names;
    for (const MessageDifferencer::SpecificField& step : path) {
      if (step.field == nullptr || names.size() == 2) break;
      names.push_back(step.field->name());
    }
    const std::string joined = absl::StrJoin(names, ".");
    if (joined.empty() || !seen_.insert(joined).second) return;
    for (const std::string& path : *paths_) {
      if (absl::StartsWith(path, joined + ".")) return;
    }
    paths_->push_back(joined);
  }

  std::vector<std::string>* const paths_;
  std::set<std::string> seen_;
};

const FieldDescriptor* Field(const google::protobuf::Descriptor* type, const char* name) {
  return type->FindFieldByName(name);
}

}  // namespace

std::vector<std::string> FieldsNeedingRestart(const v1::ServerConfig& current,
                                              const v1::ServerConfig& next) {
  MessageDifferencer differencer;
  const google::protobuf::Descriptor* scheduler = v1::SchedulerConfig::descriptor();
  for (const char* name :
       {"max_batch_size", "max_queue_delay_microseconds", "preferred_batch_size",
        "max_num_batched_tokens", "prefill_chunk_size", "length_grouping_window",
        "default_priority_level", "max_queue_size", "default_timeout_microseconds",
        "priority_aging_microseconds", "priority_queue_policy", "refuse_expected_timeouts"}) {
    differencer.IgnoreField(Field(scheduler, name));
  }
  const google::protobuf::Descriptor* server = v1::ServerConfig::descriptor();
  differencer.IgnoreField(Field(server, "request_defaults"));
  differencer.IgnoreField(Field(server, "request_limits"));
  const google::protobuf::Descriptor* frontend = v1::FrontendConfig::descriptor();
  for (const char* name : {"drain_timeout_microseconds", "slow_client_timeout_microseconds",
                           "api_key", "api_key_file"}) {
    differencer.IgnoreField(Field(frontend, name));
  }
  std::vector<std::string> paths;
  PathCollector collector(&paths);
  differencer.ReportDifferencesTo(&collector);
  differencer.Compare(current, next);
  return paths;
}

std::string EffectiveConfigText(const v1::ServerConfig& config) {
  v1::ServerConfig shown = config;
  for (v1::ApiKey& key : *shown.mutable_frontend()->mutable_api_key()) key.set_key("<redacted>");
  std::string text;
  google::protobuf::TextFormat::PrintToString(shown, &text);
  return text;
}

std::string ConfigHash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", hash);
}

}  // namespace convoy
