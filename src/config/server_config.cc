#include "config/server_config.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text_proto.h"
#include "convoy/status_macros.h"
#include "google/protobuf/text_format.h"

namespace convoy {
namespace {

using google::protobuf::TextFormat;

// Errors at the line where a field of the config was written.
class Locator {
 public:
  Locator(const TextFormat::ParseInfoTree* tree, absl::string_view source)
      : at_(v1::ServerConfig::descriptor(), tree, source) {}

  // `index` selects an element of a repeated last field, `outer` one of a repeated outer field
  // (e.g. one priority_queue_policy); -1 for none.
  absl::Status Error(std::initializer_list<const char*> path, int index, absl::string_view reason,
                     int outer = -1) const {
    FieldPath steps;
    size_t i = 0;
    for (const char* name : path) steps.push_back({name, ++i == path.size() ? index : outer});
    return at_.Error(steps, reason);
  }

 private:
  TextProtoLocator at_;
};

// The largest value each number of the config may take. Every number is bounded so that no
// arithmetic on it can wrap (sizes and durations are converted to int64 microseconds and bytes
// downstream) and no value can make the server allocate without limit before serving.
constexpr uint64_t kMaxBatch = 4096;
constexpr uint64_t kMaxTokens = uint64_t{1} << 20;
constexpr uint64_t kMaxPriorityLevels = 16;
constexpr uint64_t kMaxQueueSize = 1000000;
constexpr uint64_t kMaxDelayMicros = uint64_t{60} * 1000000;           // a minute
constexpr uint64_t kMaxTimeoutMicros = uint64_t{24} * 3600 * 1000000;  // a day
constexpr uint64_t kMaxDrainMicros = uint64_t{3600} * 1000000;         // an hour
constexpr uint64_t kMaxSlowClientMicros = uint64_t{3600} * 1000000;    // an hour
constexpr uint64_t kMaxBlockSize = 1024;
constexpr uint64_t kMaxKvBytes = uint64_t{1} << 40;       // 1 TiB
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;  // gRPC takes an int
constexpr uint64_t kMaxCpuThreads = 1024;
constexpr uint64_t kMaxStopTokenIds = 65536;
constexpr uint64_t kMaxChoices = 128;
constexpr uint64_t kMaxInFlightPerClient = 1000000;
constexpr uint64_t kMaxConcurrentStreams = 1000000;

absl::Status AtMost(const Locator& at, std::initializer_list<const char*> path, uint64_t value,
                    uint64_t max, int outer = -1) {
  if (value <= max) return absl::OkStatus();
  return at.Error(path, -1,
                  absl::StrCat(*(path.end() - 1), " ", value, " exceeds the maximum of ", max),
                  outer);
}

absl::Status CheckMaxima(const v1::ServerConfig& config, const Locator& at) {
  const v1::SchedulerConfig& s = config.scheduler();
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "max_batch_size"}, s.max_batch_size(), kMaxBatch));
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "max_queue_delay_microseconds"},
                         s.max_queue_delay_microseconds(), kMaxDelayMicros));
  RETURN_IF_ERROR(
      AtMost(at, {"scheduler", "max_num_batched_tokens"}, s.max_num_batched_tokens(), kMaxTokens));
  RETURN_IF_ERROR(
      AtMost(at, {"scheduler", "prefill_chunk_size"}, s.prefill_chunk_size(), kMaxTokens));
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "length_grouping_window"}, s.length_grouping_window(),
                         kMaxQueueSize));
  RETURN_IF_ERROR(
      AtMost(at, {"scheduler", "priority_levels"}, s.priority_levels(), kMaxPriorityLevels));
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "max_queue_size"}, s.max_queue_size(), kMaxQueueSize));
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "default_timeout_microseconds"},
                         s.default_timeout_microseconds(), kMaxTimeoutMicros));
  RETURN_IF_ERROR(AtMost(at, {"scheduler", "priority_aging_microseconds"},
                         s.priority_aging_microseconds(), kMaxTimeoutMicros));
  for (int i = 0; i < s.priority_queue_policy_size(); ++i) {
    const v1::PriorityQueuePolicy& p = s.priority_queue_policy(i);
    RETURN_IF_ERROR(AtMost(at, {"scheduler", "priority_queue_policy", "max_queue_size"},
                           p.max_queue_size(), kMaxQueueSize, i));
    RETURN_IF_ERROR(AtMost(at,
                           {"scheduler", "priority_queue_policy", "default_timeout_microseconds"},
                           p.default_timeout_microseconds(), kMaxTimeoutMicros, i));
  }
  RETURN_IF_ERROR(
      AtMost(at, {"kv_cache", "block_size"}, config.kv_cache().block_size(), kMaxBlockSize));
  RETURN_IF_ERROR(AtMost(at, {"kv_cache", "memory_budget_bytes"},
                         config.kv_cache().memory_budget_bytes(), kMaxKvBytes));
  RETURN_IF_ERROR(AtMost(at, {"request_defaults", "max_tokens"},
                         config.request_defaults().max_tokens(), kMaxTokens));
  RETURN_IF_ERROR(AtMost(at, {"request_limits", "max_stop_token_ids"},
                         config.request_limits().max_stop_token_ids(), kMaxStopTokenIds));
  RETURN_IF_ERROR(AtMost(at, {"request_limits", "max_choices"},
                         config.request_limits().max_choices(), kMaxChoices));
  RETURN_IF_ERROR(AtMost(at, {"request_limits", "max_in_flight_per_client"},
                         config.request_limits().max_in_flight_per_client(),
                         kMaxInFlightPerClient));
  RETURN_IF_ERROR(AtMost(at, {"frontend", "max_message_bytes"},
                         config.frontend().max_message_bytes(), kMaxMessageBytes));
  RETURN_IF_ERROR(AtMost(at, {"frontend", "max_concurrent_streams"},
                         config.frontend().max_concurrent_streams(), kMaxConcurrentStreams));
  RETURN_IF_ERROR(AtMost(at, {"frontend", "drain_timeout_microseconds"},
                         config.frontend().drain_timeout_microseconds(), kMaxDrainMicros));
  RETURN_IF_ERROR(AtMost(at, {"frontend", "slow_client_timeout_microseconds"},
                         config.frontend().slow_client_timeout_microseconds(),
                         kMaxSlowClientMicros));
  RETURN_IF_ERROR(
      AtMost(at, {"executor", "cpu_threads"}, config.executor().cpu_threads(), kMaxCpuThreads));
  // A fake step of a minute already stalls every request; more is a typo.
  RETURN_IF_ERROR(AtMost(at, {"executor", "fake_step_microseconds"},
                         config.executor().fake_step_microseconds(), 60'000'000));
  RETURN_IF_ERROR(AtMost(at, {"executor", "fake_microseconds_per_token"},
                         config.executor().fake_microseconds_per_token(), 1'000'000));
  return absl::OkStatus();
}

// `field`: "tls" (gRPC) or "http_tls".
absl::Status ValidateTls(const v1::TlsConfig& tls, const char* field, const Locator& at) {
  if (tls.cert_file().empty() != tls.key_file().empty()) {
    return at.Error({"frontend", field, tls.cert_file().empty() ? "key_file" : "cert_file"}, -1,
                    "cert_file and key_file go together (TLS needs both)");
  }
  if (!tls.client_ca_file().empty() && tls.cert_file().empty()) {
    return at.Error({"frontend", field, "client_ca_file"}, -1,
                    "client_ca_file (mutual TLS) needs cert_file and key_file");
  }
  return absl::OkStatus();
}

// An invalid scheduler option, at the config field it comes from.
absl::Status OptionError(const Locator& at, const v1::SchedulerConfig& s,
                         const InvalidOption& invalid) {
  const std::string& field = invalid.field;
  const std::string& reason = invalid.reason;
  if (field == "preferred_batch_sizes") {
    return at.Error({"scheduler", "preferred_batch_size"}, invalid.index, reason);
  }
  if (field == "block_size") return at.Error({"kv_cache", "block_size"}, -1, reason);
  if (field == "default_max_tokens")
    return at.Error({"request_defaults", "max_tokens"}, -1, reason);
  if (field == "queue_policies.max_queue_size" || field == "queue_policies.default_timeout") {
    const char* leaf = field == "queue_policies.max_queue_size" ? "max_queue_size"
                                                                : "default_timeout_microseconds";
    for (int i = 0; i < s.priority_queue_policy_size(); ++i) {
      if (static_cast<int32_t>(s.priority_queue_policy(i).priority_level()) == invalid.level) {
        return at.Error({"scheduler", "priority_queue_policy", leaf}, -1, reason, i);
      }
    }
    return at.Error({"scheduler", leaf}, -1, reason);
  }
  if (field == "max_queue_delay") {
    return at.Error({"scheduler", "max_queue_delay_microseconds"}, -1, reason);
  }
  if (field == "priority_aging") {
    return at.Error({"scheduler", "priority_aging_microseconds"}, -1, reason);
  }
  // The rest have the config field's name.
  return at.Error({"scheduler", field.c_str()}, -1, reason);
}

absl::Duration MicrosOrInfinite(uint64_t micros) {
  return micros == 0 ? absl::InfiniteDuration() : absl::Microseconds(micros);
}

// The inverse of MicrosOrInfinite, for the defaults.
uint64_t MicrosOrZero(absl::Duration d) {
  return d == absl::InfiniteDuration() ? 0 : static_cast<uint64_t>(absl::ToInt64Microseconds(d));
}

absl::Status Validate(const v1::ServerConfig& config, const Locator& at) {
  RETURN_IF_ERROR(CheckMaxima(config, at));
  const v1::SchedulerConfig& s = config.scheduler();
  std::set<uint32_t> seen;
  for (int i = 0; i < s.priority_queue_policy_size(); ++i) {
    const uint32_t level = s.priority_queue_policy(i).priority_level();
    if (level < 1 || level > s.priority_levels()) {
      return at.Error({"scheduler", "priority_queue_policy", "priority_level"}, -1,
                      absl::StrCat("priority_level ", level, " is outside 1..priority_levels (",
                                   s.priority_levels(), ")"),
                      i);
    }
    if (!seen.insert(level).second) {
      return at.Error({"scheduler", "priority_queue_policy", "priority_level"}, -1,
                      absl::StrCat("priority_level ", level, " has a policy already"), i);
    }
  }
  if (config.kv_cache().memory_budget_bytes() < 1) {
    return at.Error({"kv_cache", "memory_budget_bytes"}, -1,
                    "memory_budget_bytes must be positive");
  }
  // The scheduler's own rules (SchedulerOptions owns them), at the line of the field they name.
  SchedulerOptions options = SchedulerOptionsFromConfig(config);
  options.num_blocks = 1;  // known once the model is loaded; the engine checks it then
  if (std::optional<InvalidOption> invalid = options.FindInvalid()) {
    return OptionError(at, s, *invalid);
  }
  const v1::FrontendConfig& f = config.frontend();
  if (f.port() > 65535) {
    return at.Error({"frontend", "port"}, -1,
                    absl::StrCat("port ", f.port(), " is outside 0..65535 (0: any free port)"));
  }
  if (f.http_port() > 65535) {
    return at.Error(
        {"frontend", "http_port"}, -1,
        absl::StrCat("http_port ", f.http_port(), " is outside 0..65535 (0: any free port)"));
  }
  if (f.http_listen_address().empty()) {
    return at.Error({"frontend", "http_listen_address"}, -1,
                    "http_listen_address is empty (\"0.0.0.0\": every interface)");
  }
  if (f.http_port() != 0 && f.http_listen_address() == f.listen_address() &&
      f.http_port() == f.port()) {
    return at.Error({"frontend", "http_port"}, -1,
                    absl::StrCat("http_port ", f.http_port(), " is the gRPC port too"));
  }
  if (config.metrics().enabled() && f.http_port() != 0 &&
      f.http_listen_address() == config.metrics().listen_address() &&
      f.http_port() == config.metrics().port()) {
    return at.Error({"frontend", "http_port"}, -1,
                    absl::StrCat("http_port ", f.http_port(),
                                 " is the metrics port too (/metrics is served on both)"));
  }
  if (f.max_message_bytes() < 4096) {
    return at.Error(
        {"frontend", "max_message_bytes"}, -1,
        absl::StrCat("max_message_bytes ", f.max_message_bytes(), " is below the minimum of 4096"));
  }
  if (f.max_concurrent_streams() < 1) {
    return at.Error({"frontend", "max_concurrent_streams"}, -1,
                    "max_concurrent_streams must be at least 1 (a connection with no call open "
                    "serves nothing)");
  }
  if (config.request_limits().max_choices() < 1) {
    return at.Error({"request_limits", "max_choices"}, -1,
                    "max_choices must be at least 1 (every request has one choice)");
  }
  if (config.metrics().port() > 65535) {
    return at.Error(
        {"metrics", "port"}, -1,
        absl::StrCat("port ", config.metrics().port(), " is outside 0..65535 (0: any free port)"));
  }
  RETURN_IF_ERROR(ValidateTls(f.tls(), "tls", at));
  RETURN_IF_ERROR(ValidateTls(f.http_tls(), "http_tls", at));
  for (int i = 0; i < f.api_key_size(); ++i) {
    RETURN_IF_ERROR(ValidateApiKey(f.api_key(), i, s.priority_levels(),
                                   [&](const char* field, absl::string_view reason) {
                                     return at.Error({"frontend", "api_key", field}, -1, reason, i);
                                   }));
  }
  const double fraction = config.executor().gpu_memory_fraction();
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return at.Error({"executor", "gpu_memory_fraction"}, -1,
                    absl::StrCat("gpu_memory_fraction ", fraction, " is outside (0, 1]"));
  }
  if (config.executor().fake_step_microseconds() == 0) {
    return at.Error({"executor", "fake_step_microseconds"}, -1,
                    "fake_step_microseconds must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateApiKey(
    const google::protobuf::RepeatedPtrField<v1::ApiKey>& keys, int index, uint32_t priority_levels,
    const std::function<absl::Status(const char* field, absl::string_view reason)>& error) {
  const v1::ApiKey& key = keys[index];
  if (key.name().empty()) return error("name", "an API key needs a name (for logs and errors)");
  if (key.key().size() < kMinApiKeyChars) {
    return error("key", absl::StrCat("the key of '", key.name(), "' has ", key.key().size(),
                                     " characters; at least ", kMinApiKeyChars, " are needed"));
  }
  const uint32_t max_priority = key.has_max_priority() ? key.max_priority() : 1;
  if (max_priority < 1 || max_priority > priority_levels) {
    return error("max_priority",
                 absl::StrCat("max_priority ", max_priority, " of '", key.name(),
                              "' is outside 1..priority_levels (", priority_levels, ")"));
  }
  for (int j = 0; j < index; ++j) {
    if (keys[j].name() == key.name()) {
      return error("name", absl::StrCat("the name '", key.name(), "' is taken by another key"));
    }
    if (keys[j].key() == key.key()) {
      return error("key", absl::StrCat("the key of '", key.name(), "' is the key of '",
                                       keys[j].name(), "' too"));
    }
  }
  return absl::OkStatus();
}

void FillServerConfigDefaults(v1::ServerConfig* config) {
  // The scheduler's defaults are SchedulerOptions' own.
  const SchedulerOptions d;
  v1::SchedulerConfig* s = config->mutable_scheduler();
  if (s->mode() == v1::SchedulerConfig::MODE_UNSPECIFIED) {
    s->set_mode(d.mode == BatchingMode::kStatic ? v1::SchedulerConfig::STATIC
                                                : v1::SchedulerConfig::CONTINUOUS);
  }
  if (!s->has_max_batch_size()) s->set_max_batch_size(d.max_batch_size);
  if (!s->has_max_queue_delay_microseconds()) {
    s->set_max_queue_delay_microseconds(absl::ToInt64Microseconds(d.max_queue_delay));
  }
  if (!s->has_max_num_batched_tokens()) s->set_max_num_batched_tokens(d.max_num_batched_tokens);
  if (!s->has_prefill_chunk_size()) s->set_prefill_chunk_size(d.prefill_chunk_size);
  if (!s->has_length_grouping_window()) s->set_length_grouping_window(d.length_grouping_window);
  if (!s->has_priority_levels()) s->set_priority_levels(d.priority_levels);
  // Unlike SchedulerOptions' (level 1 of its one level), the config's default level is the
  // lowest of however many levels it declares.
  if (!s->has_default_priority_level()) s->set_default_priority_level(s->priority_levels());
  if (!s->has_max_queue_size()) s->set_max_queue_size(d.default_queue_policy.max_queue_size);
  if (!s->has_default_timeout_microseconds()) {
    s->set_default_timeout_microseconds(MicrosOrZero(d.default_queue_policy.default_timeout));
  }
  if (!s->has_priority_aging_microseconds()) {
    s->set_priority_aging_microseconds(MicrosOrZero(d.priority_aging));
  }
  if (!s->has_refuse_expected_timeouts()) {
    s->set_refuse_expected_timeouts(d.refuse_expected_timeouts);
  }
  for (v1::PriorityQueuePolicy& policy : *s->mutable_priority_queue_policy()) {
    if (!policy.has_max_queue_size()) policy.set_max_queue_size(s->max_queue_size());
    if (!policy.has_default_timeout_microseconds()) {
      policy.set_default_timeout_microseconds(s->default_timeout_microseconds());
    }
  }
  v1::KvCacheConfig* kv = config->mutable_kv_cache();
  if (!kv->has_block_size()) kv->set_block_size(d.block_size);
  if (!kv->has_memory_budget_bytes()) kv->set_memory_budget_bytes(uint64_t{1} << 30);
  if (!kv->has_enable_prefix_caching()) kv->set_enable_prefix_caching(d.enable_prefix_caching);
  if (!kv->has_dtype()) kv->set_dtype(v1::KvCacheConfig::DTYPE_UNSPECIFIED);
  v1::RequestDefaults* defaults = config->mutable_request_defaults();
  if (!defaults->has_max_tokens()) defaults->set_max_tokens(d.default_max_tokens);
  v1::RequestLimits* limits = config->mutable_request_limits();
  if (!limits->has_max_stop_token_ids()) limits->set_max_stop_token_ids(256);
  if (!limits->has_max_in_flight_per_client()) limits->set_max_in_flight_per_client(0);
  if (!limits->has_max_choices()) limits->set_max_choices(8);
  v1::FrontendConfig* f = config->mutable_frontend();
  if (!f->has_listen_address()) f->set_listen_address("127.0.0.1");
  if (!f->has_port()) f->set_port(50051);
  if (!f->has_max_message_bytes()) f->set_max_message_bytes(64u << 20);
  if (!f->has_drain_timeout_microseconds()) f->set_drain_timeout_microseconds(30000000);
  if (!f->has_slow_client_timeout_microseconds()) f->set_slow_client_timeout_microseconds(60000000);
  if (!f->has_max_concurrent_streams()) f->set_max_concurrent_streams(128);
  if (!f->has_http_port()) f->set_http_port(8000);
  if (!f->has_http_listen_address()) f->set_http_listen_address("127.0.0.1");
  if (!f->has_reflection()) f->set_reflection(false);
  for (v1::ApiKey& key : *f->mutable_api_key()) {
    if (!key.has_max_priority()) key.set_max_priority(1);
  }
  v1::ExecutorConfig* e = config->mutable_executor();
  if (e->device() == v1::ExecutorConfig::DEVICE_UNSPECIFIED) {
    e->set_device(v1::ExecutorConfig::AUTO);
  }
  if (!e->has_cpu_threads()) e->set_cpu_threads(0);
  if (!e->has_gpu_memory_fraction()) e->set_gpu_memory_fraction(0.9);
  if (!e->has_skip_padding()) e->set_skip_padding(true);
  if (!e->has_batch_invariant()) e->set_batch_invariant(true);
  if (!e->has_fake_step_microseconds()) e->set_fake_step_microseconds(2000);
  if (!e->has_fake_microseconds_per_token()) e->set_fake_microseconds_per_token(0);
  if (e->cpu_weights() == v1::ExecutorConfig::WEIGHTS_UNSPECIFIED) {
    e->set_cpu_weights(v1::ExecutorConfig::WEIGHTS_AUTO);
  }
  v1::MetricsConfig* m = config->mutable_metrics();
  if (!m->has_enabled()) m->set_enabled(true);
  if (!m->has_listen_address()) m->set_listen_address("127.0.0.1");
  if (!m->has_port()) m->set_port(8002);
}

absl::StatusOr<v1::ServerConfig> ParseServerConfig(absl::string_view text,
                                                   absl::string_view source) {
  v1::ServerConfig config;
  TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseTextProto(text, source, &config, &tree));
  FillServerConfigDefaults(&config);
  absl::Status status = Validate(config, Locator(&tree, source));
  if (!status.ok()) return status;
  return config;
}

absl::StatusOr<v1::ServerConfig> LoadServerConfig(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory; --config takes a config file (configs/*.pbtxt)"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the config file"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseServerConfig(text.str(), path);
}

SchedulerOptions SchedulerOptionsFromConfig(const v1::ServerConfig& config) {
  const v1::SchedulerConfig& s = config.scheduler();
  SchedulerOptions options;
  options.mode =
      s.mode() == v1::SchedulerConfig::STATIC ? BatchingMode::kStatic : BatchingMode::kContinuous;
  options.max_batch_size = static_cast<int32_t>(s.max_batch_size());
  options.max_queue_delay = absl::Microseconds(s.max_queue_delay_microseconds());
  options.preferred_batch_sizes.assign(s.preferred_batch_size().begin(),
                                       s.preferred_batch_size().end());
  options.max_num_batched_tokens = s.max_num_batched_tokens();
  options.prefill_chunk_size = static_cast<int32_t>(s.prefill_chunk_size());
  options.length_grouping_window = static_cast<int32_t>(s.length_grouping_window());
  options.priority_levels = static_cast<int32_t>(s.priority_levels());
  options.default_priority_level = static_cast<int32_t>(s.default_priority_level());
  options.default_queue_policy.max_queue_size = static_cast<int32_t>(s.max_queue_size());
  options.default_queue_policy.default_timeout = MicrosOrInfinite(s.default_timeout_microseconds());
  if (s.priority_queue_policy_size() > 0) {
    options.queue_policies.assign(options.priority_levels, options.default_queue_policy);
    for (const v1::PriorityQueuePolicy& policy : s.priority_queue_policy()) {
      QueuePolicy& out = options.queue_policies[policy.priority_level() - 1];
      out.max_queue_size = static_cast<int32_t>(policy.max_queue_size());
      out.default_timeout = MicrosOrInfinite(policy.default_timeout_microseconds());
    }
  }
  options.priority_aging = MicrosOrInfinite(s.priority_aging_microseconds());
  options.refuse_expected_timeouts = s.refuse_expected_timeouts();
  options.block_size = static_cast<int32_t>(config.kv_cache().block_size());
  options.enable_prefix_caching = config.kv_cache().enable_prefix_caching();
  options.default_max_tokens = static_cast<int32_t>(config.request_defaults().max_tokens());
  return options;
}

}  // namespace convoy
