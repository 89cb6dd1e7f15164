// The server config: every shipped file loads and validates; defaults are filled; a bad file is
// refused with its file, line, field and reason.
#include <string>

#include "absl/strings/str_cat.h"
#include "config/server_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

std::string ConfigPath(const std::string& name) { return TestSourceDir() + "/configs/" + name; }

class ShippedConfigTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedConfigTest, LoadsAndMakesAScheduler) {
  absl::StatusOr<v1::ServerConfig> config = LoadServerConfig(ConfigPath(GetParam()));
  ASSERT_OK(config);
  SchedulerOptions options = SchedulerOptionsFromConfig(*config);
  options.num_blocks = 1000;
  EXPECT_OK(Scheduler::Create(options));
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfigTest,
                         ::testing::Values("default.pbtxt", "latency.pbtxt", "throughput.pbtxt",
                                           "mixed.pbtxt", "static.pbtxt"));

TEST(ServerConfigTest, ScenariosDiffer) {
  auto latency = LoadServerConfig(ConfigPath("latency.pbtxt"));
  auto throughput = LoadServerConfig(ConfigPath("throughput.pbtxt"));
  auto mixed = LoadServerConfig(ConfigPath("mixed.pbtxt"));
  auto baseline = LoadServerConfig(ConfigPath("static.pbtxt"));
  ASSERT_OK(latency);
  ASSERT_OK(throughput);
  ASSERT_OK(mixed);
  ASSERT_OK(baseline);
  EXPECT_EQ(latency->scheduler().max_queue_delay_microseconds(), 0u);
  EXPECT_GT(throughput->scheduler().max_batch_size(), latency->scheduler().max_batch_size());
  EXPECT_GE(mixed->scheduler().priority_levels(), 2u);
  EXPECT_EQ(baseline->scheduler().mode(), v1::SchedulerConfig::STATIC);
}

TEST(ServerConfigTest, FillsDefaults) {
  absl::StatusOr<v1::ServerConfig> config = ParseServerConfig("", "empty.pbtxt");
  ASSERT_OK(config);
  EXPECT_EQ(config->scheduler().mode(), v1::SchedulerConfig::CONTINUOUS);
  EXPECT_EQ(config->scheduler().max_batch_size(), 32u);
  EXPECT_EQ(config->scheduler().max_num_batched_tokens(), 2048u);
  EXPECT_EQ(config->scheduler().default_priority_level(), 1u);
  EXPECT_EQ(config->kv_cache().block_size(), 16u);
  EXPECT_TRUE(config->kv_cache().enable_prefix_caching());
  EXPECT_TRUE(SchedulerOptionsFromConfig(*config).enable_prefix_caching);
  EXPECT_FALSE(SchedulerOptionsFromConfig(
                   *ParseServerConfig("kv_cache { enable_prefix_caching: false }", "off.pbtxt"))
                   .enable_prefix_caching);
  EXPECT_EQ(config->request_defaults().max_tokens(), 256u);
  EXPECT_EQ(config->frontend().max_concurrent_streams(), 128u);
  // An explicit 0 is kept: it means "never wait", not "unset".
  absl::StatusOr<v1::ServerConfig> set = ParseServerConfig(
      "scheduler { priority_levels: 3 max_queue_delay_microseconds: 0 }", "x.pbtxt");
  ASSERT_OK(set);
  EXPECT_EQ(set->scheduler().default_priority_level(), 3u);
  EXPECT_TRUE(set->scheduler().has_max_queue_delay_microseconds());
}

// An empty config gives the scheduler SchedulerOptions' own defaults: one table of defaults.
TEST(ServerConfigTest, AnEmptyConfigIsSchedulerOptionsDefaults) {
  absl::StatusOr<v1::ServerConfig> config = ParseServerConfig("", "empty.pbtxt");
  ASSERT_OK(config);
  const SchedulerOptions got = SchedulerOptionsFromConfig(*config);
  const SchedulerOptions want;
  EXPECT_EQ(got.mode, want.mode);
  EXPECT_EQ(got.max_batch_size, want.max_batch_size);
  EXPECT_EQ(got.max_queue_delay, want.max_queue_delay);
  EXPECT_EQ(got.preferred_batch_sizes, want.preferred_batch_sizes);
  EXPECT_EQ(got.max_num_batched_tokens, want.max_num_batched_tokens);
  EXPECT_EQ(got.prefill_chunk_size, want.prefill_chunk_size);
  EXPECT_EQ(got.length_grouping_window, want.length_grouping_window);
  EXPECT_EQ(got.priority_levels, want.priority_levels);
  EXPECT_EQ(got.default_priority_level, want.default_priority_level);
  EXPECT_TRUE(got.queue_policies.empty());
  EXPECT_EQ(got.default_queue_policy.max_queue_size, want.default_queue_policy.max_queue_size);
  EXPECT_EQ(got.default_queue_policy.default_timeout, want.default_queue_policy.default_timeout);
  EXPECT_EQ(got.priority_aging, want.priority_aging);
  EXPECT_EQ(got.block_size, want.block_size);
  EXPECT_EQ(got.enable_prefix_caching, want.enable_prefix_caching);
  EXPECT_EQ(got.default_max_tokens, want.default_max_tokens);
}

// The config loader applies SchedulerOptions' rules (not copies of them), at the field's line:
// the reason is the one SchedulerOptions::Validate gives for the same mistake.
TEST(ServerConfigTest, SchedulerRulesComeFromSchedulerOptions) {
  SchedulerOptions window, chunk, tokens, preferred, level;
  for (SchedulerOptions* o : {&window, &chunk, &tokens, &preferred, &level}) o->num_blocks = 1;
  window.length_grouping_window = 0;
  chunk.prefill_chunk_size = 0;
  tokens.default_max_tokens = 0;
  preferred.max_batch_size = 4;
  preferred.preferred_batch_sizes = {2, 8};
  level.priority_levels = 2;
  level.default_priority_level = 5;
  struct Case {
    const char* text;
    const char* where;
    const SchedulerOptions* same;
  };
  const Case cases[] = {
      {"scheduler {\n length_grouping_window: 0\n}", "x.pbtxt:2: scheduler.length_grouping_window",
       &window},
      {"scheduler {\n prefill_chunk_size: 0\n}", "x.pbtxt:2: scheduler.prefill_chunk_size", &chunk},
      {"request_defaults {\n max_tokens: 0\n}", "x.pbtxt:2: request_defaults.max_tokens", &tokens},
      {"scheduler {\n max_batch_size: 4 preferred_batch_size: 2\n preferred_batch_size: 8\n}",
       "x.pbtxt:3: scheduler.preferred_batch_size[1]", &preferred},
      {"scheduler {\n priority_levels: 2\n default_priority_level: 5\n}",
       "x.pbtxt:3: scheduler.default_priority_level", &level},
  };
  for (const Case& c : cases) {
    const absl::Status direct = c.same->Validate();
    ASSERT_FALSE(direct.ok()) << c.text;
    EXPECT_THAT(
        ParseServerConfig(c.text, "x.pbtxt"),
        StatusIs(absl::StatusCode::kInvalidArgument, absl::StrCat(c.where, ": ", direct.message())))
        << c.text;
  }
}

TEST(ServerConfigTest, OptionsFollowTheConfig) {
  absl::StatusOr<v1::ServerConfig> config = ParseServerConfig(R"pb(
                                                                scheduler {
                                                                  mode: STATIC
                                                                  max_batch_size: 16
                                                                  preferred_batch_size: [ 4, 8 ]
                                                                  max_queue_delay_microseconds: 1500
                                                                  priority_levels: 2
                                                                  default_timeout_microseconds: 0
                                                                  priority_queue_policy {
                                                                    priority_level: 2
                                                                    max_queue_size: 7
                                                                    default_timeout_microseconds: 9
                                                                  }
                                                                }
                                                                kv_cache { block_size: 32 }
                                                              )pb",
                                                              "x.pbtxt");
  ASSERT_OK(config);
  const SchedulerOptions options = SchedulerOptionsFromConfig(*config);
  EXPECT_EQ(options.mode, BatchingMode::kStatic);
  EXPECT_EQ(options.max_batch_size, 16);
  EXPECT_EQ(options.preferred_batch_sizes, (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(options.max_queue_delay, absl::Microseconds(1500));
  EXPECT_EQ(options.block_size, 32);
  ASSERT_EQ(options.queue_policies.size(), 2u);
  EXPECT_EQ(options.queue_policy(1).max_queue_size, 1024);
  EXPECT_EQ(options.queue_policy(1).default_timeout, absl::InfiniteDuration());
  EXPECT_EQ(options.queue_policy(2).max_queue_size, 7);
  EXPECT_EQ(options.queue_policy(2).default_timeout, absl::Microseconds(9));
}

TEST(ServerConfigTest, SyntaxErrorsNameFileLineAndColumn) {
  EXPECT_THAT(
      ParseServerConfig("scheduler {\n  max_batch_size: 8\n  max_bach_size: 4\n}\n", "bad.pbtxt"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("bad.pbtxt:3:16: Message type \"convoy.v1.SchedulerConfig\" has "
                         "no field named \"max_bach_size\"")));
  EXPECT_THAT(ParseServerConfig("scheduler { max_batch_size: -1 }", "neg.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("neg.pbtxt:1:")));
}

TEST(ServerConfigTest, TheKvCacheTypeParses) {
  absl::StatusOr<v1::ServerConfig> unset = ParseServerConfig("", "empty.pbtxt");
  ASSERT_OK(unset);
  EXPECT_EQ(unset->kv_cache().dtype(), v1::KvCacheConfig::DTYPE_UNSPECIFIED);
  absl::StatusOr<v1::ServerConfig> int8 =
      ParseServerConfig("kv_cache { dtype: DTYPE_INT8 }", "int8.pbtxt");
  ASSERT_OK(int8);
  EXPECT_EQ(int8->kv_cache().dtype(), v1::KvCacheConfig::DTYPE_INT8);
  absl::StatusOr<v1::ServerConfig> bf16 =
      ParseServerConfig("kv_cache {\n  dtype: DTYPE_BF16\n}\n", "bf16.pbtxt");
  ASSERT_OK(bf16);
  EXPECT_EQ(bf16->kv_cache().dtype(), v1::KvCacheConfig::DTYPE_BF16);
  // The parser's error names the file and the value.
  EXPECT_THAT(ParseServerConfig("kv_cache {\n  dtype: DTYPE_FP8\n}\n", "fp8.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("fp8.pbtxt:"),
                                        HasSubstr("Unknown enumeration value of \"DTYPE_FP8\" "
                                                  "for field \"dtype\""))));
}

TEST(ServerConfigTest, SemanticErrorsNameFileLineFieldAndReason) {
  const char* text =
      "# comment\n"
      "scheduler {\n"
      "  max_batch_size: 32\n"
      "  preferred_batch_size: 8\n"
      "  preferred_batch_size: 64\n"
      "}\n";
  EXPECT_THAT(ParseServerConfig(text, "configs/x.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "configs/x.pbtxt:5: scheduler.preferred_batch_size[1]: "
                       "preferred_batch_size 64 exceeds max_batch_size 32"));
  EXPECT_THAT(ParseServerConfig("scheduler {\n max_batch_size: 64\n max_num_batched_tokens: 16\n}",
                                "y.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("y.pbtxt:3: scheduler.max_num_batched_tokens: "
                                 "max_num_batched_tokens 16 is less than max_batch_size 64")));
  EXPECT_THAT(ParseServerConfig("scheduler {\n priority_levels: 2\n default_priority_level: 3\n}",
                                "z.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("z.pbtxt:3: scheduler.default_priority_level: "
                                 "default_priority_level 3 is outside 1..priority_levels (2)")));
  EXPECT_THAT(ParseServerConfig("scheduler {\n priority_queue_policy { priority_level: 1 }\n"
                                " priority_queue_policy {\n  priority_level: 4 }\n}",
                                "p.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("p.pbtxt:4: scheduler.priority_queue_policy[1].priority_level: "
                                 "priority_level 4 is outside 1..priority_levels (1)")));
  EXPECT_THAT(ParseServerConfig("frontend {\n max_concurrent_streams: 0\n}", "f.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("f.pbtxt:2: frontend.max_concurrent_streams: "
                                 "max_concurrent_streams must be at least 1")));
  EXPECT_THAT(ParseServerConfig("kv_cache { block_size: 0 }", "k.pbtxt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("k.pbtxt:1: kv_cache.block_size: block_size must be at least 1")));
  EXPECT_THAT(
      ParseServerConfig("executor {\n device: FAKE\n fake_step_microseconds: 0\n}", "e.pbtxt"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("e.pbtxt:3: executor.fake_step_microseconds: fake_step_microseconds "
                         "must be positive")));
}

// Every number has a maximum: values that used to wrap, crash or cost gigabytes are refused at
// load, naming the file, line and field.
TEST(ServerConfigTest, NumbersAboveTheirMaximumAreRefused) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"executor {\n cpu_threads: 100000\n}",
       "x.pbtxt:2: executor.cpu_threads: cpu_threads 100000 exceeds the maximum of 1024"},
      {"kv_cache {\n memory_budget_bytes: 140737488519168\n}",
       "x.pbtxt:2: kv_cache.memory_budget_bytes: memory_budget_bytes 140737488519168 exceeds the "
       "maximum of 1099511627776"},
      {"frontend {\n max_message_bytes: 4294967295\n}",
       "x.pbtxt:2: frontend.max_message_bytes: max_message_bytes 4294967295 exceeds the maximum of "
       "1073741824"},
      {"frontend {\n max_concurrent_streams: 4294967295\n}",
       "x.pbtxt:2: frontend.max_concurrent_streams: max_concurrent_streams 4294967295 exceeds the "
       "maximum of 1000000"},
      {"frontend {\n drain_timeout_microseconds: 18446744073709551615\n}",
       "x.pbtxt:2: frontend.drain_timeout_microseconds: drain_timeout_microseconds "
       "18446744073709551615 exceeds the maximum of 3600000000"},
      {"scheduler {\n priority_levels: 1000000\n}",
       "x.pbtxt:2: scheduler.priority_levels: priority_levels 1000000 exceeds the maximum of 16"},
      {"scheduler {\n max_batch_size: 4294967295\n}",
       "x.pbtxt:2: scheduler.max_batch_size: max_batch_size 4294967295 exceeds the maximum of "
       "4096"},
      {"scheduler {\n default_timeout_microseconds: 18446744073709551615\n}",
       "x.pbtxt:2: scheduler.default_timeout_microseconds: default_timeout_microseconds "
       "18446744073709551615 exceeds the maximum of 86400000000"},
      {"scheduler {\n priority_queue_policy {\n  priority_level: 1\n  max_queue_size: 4294967295\n "
       "}\n}",
       "x.pbtxt:4: scheduler.priority_queue_policy[0].max_queue_size: max_queue_size 4294967295 "
       "exceeds the maximum of 1000000"},
      {"request_limits {\n max_stop_token_ids: 70000\n}",
       "x.pbtxt:2: request_limits.max_stop_token_ids: max_stop_token_ids 70000 exceeds the maximum "
       "of 65536"},
      {"executor {\n fake_step_microseconds: 60000001\n}",
       "x.pbtxt:2: executor.fake_step_microseconds: fake_step_microseconds 60000001 exceeds the "
       "maximum of 60000000"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseServerConfig(c.text, "x.pbtxt"),
                StatusIs(absl::StatusCode::kInvalidArgument, c.error))
        << c.text;
  }
}

// Safe by default: every port on loopback, no reflection, no TLS, no keys.
TEST(ServerConfigTest, ListensOnLoopbackByDefault) {
  absl::StatusOr<v1::ServerConfig> config = ParseServerConfig("", "empty.pbtxt");
  ASSERT_OK(config);
  EXPECT_EQ(config->frontend().listen_address(), "127.0.0.1");
  EXPECT_EQ(config->frontend().http_listen_address(), "127.0.0.1");
  EXPECT_EQ(config->metrics().listen_address(), "127.0.0.1");
  EXPECT_FALSE(config->frontend().reflection());
  EXPECT_TRUE(config->frontend().tls().cert_file().empty());
  EXPECT_EQ(config->frontend().api_key_size(), 0);
}

TEST(ServerConfigTest, TlsAndApiKeysAreChecked) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"frontend {\n tls {\n  cert_file: \"c.pem\"\n }\n}",
       "t.pbtxt:3: frontend.tls.cert_file: cert_file and key_file go together"},
      {"frontend {\n tls {\n  client_ca_file: \"ca.pem\"\n }\n}",
       "t.pbtxt:3: frontend.tls.client_ca_file: client_ca_file (mutual TLS) needs cert_file"},
      {"frontend {\n api_key {\n  name: \"a\"\n  key: \"short\"\n }\n}",
       "t.pbtxt:4: frontend.api_key[0].key: the key of 'a' has 5 characters; at least 16"},
      {"frontend {\n api_key {\n  key: \"0123456789abcdef\"\n }\n}",
       "frontend.api_key[0].name: an API key needs a name"},
      {"frontend {\n api_key { name: \"a\" key: \"0123456789abcdef\" }\n api_key {\n  name: "
       "\"a\"\n  key: \"0123456789abcdeX\"\n }\n}",
       "t.pbtxt:4: frontend.api_key[1].name: the name 'a' is taken by another key"},
      {"frontend {\n api_key {\n  name: \"a\"\n  key: \"0123456789abcdef\"\n  max_priority: 2\n"
       " }\n}",
       "t.pbtxt:5: frontend.api_key[0].max_priority: max_priority 2 of 'a' is outside "
       "1..priority_levels (1)"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseServerConfig(c.text, "t.pbtxt"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)))
        << c.text;
  }
}

TEST(ServerConfigTest, ADirectoryIsNotAConfig) {
  EXPECT_THAT(LoadServerConfig(TestSourceDir() + "/configs"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a directory")));
}

TEST(ServerConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadServerConfig("/nonexistent/x.pbtxt"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/x.pbtxt")));
}

}  // namespace
}  // namespace convoy::testing
