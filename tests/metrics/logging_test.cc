// Log lines as an operator's tools read them: JSON lines parse and carry their fields; text lines
// are readable; levels filter.
#include "metrics/logging.h"

#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// A logger writing to a string.
class CapturedLog {
 public:
  explicit CapturedLog(LogFormat format, const std::string& level = "info") {
    LoggingOptions options;
    options.level = level;
    options.format = format;
    options.sinks.push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    absl::StatusOr<std::shared_ptr<spdlog::logger>> logger = MakeLogger(options);
    EXPECT_OK(logger);
    if (logger.ok()) logger_ = *std::move(logger);
  }

  spdlog::logger* logger() { return logger_.get(); }
  std::string text() const { return out_.str(); }
  std::vector<std::string> lines() const {
    return absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  }
  // Every line parsed as JSON; a test failure for a line that does not parse.
  std::vector<nlohmann::json> json_lines() const {
    std::vector<nlohmann::json> parsed;
    for (const std::string& line : lines()) {
      nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(value.is_discarded()) << "not JSON: " << line;
      EXPECT_TRUE(value.is_object()) << line;
      parsed.push_back(std::move(value));
    }
    return parsed;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> logger_;
};

RequestSummary CompletedRequest() {
  RequestSummary summary;
  summary.id = 42;
  summary.outcome = Outcome::kCompleteStop;
  summary.prompt_tokens = 17;
  summary.cached_prompt_tokens = 16;
  summary.generated_tokens = 5;
  summary.queue_time = absl::Milliseconds(3);
  summary.time_to_first_token = absl::Milliseconds(25);
  summary.e2e_latency = absl::Milliseconds(140);
  return summary;
}

TEST(LogLevelTest, ParsesNamesAndNamesTheBadOne) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("INFO"), spdlog::level::info);
  EXPECT_EQ(*ParseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("warning"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("error"), spdlog::level::err);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  EXPECT_THAT(ParseLogLevel("verbose"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"verbose\"")));
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_THAT(ParseLogFormat("xml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"xml\"")));

  LoggingOptions options;
  options.level = "loud";
  EXPECT_THAT(MakeLogger(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"loud\"")));
}

TEST(JsonLogTest, RequestDoneLineCarriesItsFields) {
  CapturedLog log(LogFormat::kJson);
  LogRequestDone(CompletedRequest(), log.logger());
  const std::vector<nlohmann::json> lines = log.json_lines();
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json& line = lines[0];
  EXPECT_THAT(line.value("time", ""),
              MatchesRegex(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z)"));
  EXPECT_EQ(line.value("level", ""), "info");
  EXPECT_EQ(line.value("message", ""), "request done");
  EXPECT_EQ(line.value("id", -1), 42);
  EXPECT_EQ(line.value("outcome", ""), "complete_stop");
  EXPECT_EQ(line.value("prompt_tokens", -1), 17);
  EXPECT_EQ(line.value("cached_prompt_tokens", -1), 16);
  EXPECT_EQ(line.value("generated_tokens", -1), 5);
  EXPECT_DOUBLE_EQ(line.value("queue_ms", -1.0), 3.0);
  EXPECT_DOUBLE_EQ(line.value("ttft_ms", -1.0), 25.0);
  EXPECT_DOUBLE_EQ(line.value("total_ms", -1.0), 140.0);
  EXPECT_FALSE(line.contains("error"));
  EXPECT_FALSE(line.contains("reject_reason"));
}

TEST(JsonLogTest, UnknownTimingsAreNullAndErrorsAreLogged) {
  CapturedLog log(LogFormat::kJson);
  RequestSummary summary;
  summary.id = 9;
  summary.outcome = Outcome::kRejected;
  summary.reject_reason = RejectReason::kQueueFull;
  summary.prompt_tokens = 3;
  summary.status = absl::ResourceExhaustedError("the queue of priority level 1 is \"full\"");
  LogRequestDone(summary, log.logger());
  summary.outcome = Outcome::kFailed;
  summary.status = absl::InternalError("executor failed");
  LogRequestDone(summary, log.logger());

  const std::vector<nlohmann::json> lines = log.json_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].value("outcome", ""), "rejected");
  EXPECT_EQ(lines[0].value("reject_reason", ""), "queue_full");
  EXPECT_TRUE(lines[0].at("queue_ms").is_null());
  EXPECT_TRUE(lines[0].at("ttft_ms").is_null());
  EXPECT_EQ(lines[0].value("error", ""), "the queue of priority level 1 is \"full\"");
  EXPECT_EQ(lines[1].value("level", ""), "warning");
  EXPECT_EQ(lines[1].value("error", ""), "executor failed");
}

TEST(JsonLogTest, ConfigAndOddTextStayOneValidLineEach) {
  CapturedLog log(LogFormat::kJson);
  const std::string config = "max_batch_size: 8\nname: \"tiny\\model\"\n\ttab\x01";
  LogEffectiveConfig(config, log.logger());
  log.logger()->info("plain {} with \"quotes\" and a {}", 1, "brace{}");
  const std::string invalid_utf8 = "bad \xff byte, fine \xc3\xa9";
  LogWithFields(log.logger(), spdlog::level::info, "fields",
                {{"text", invalid_utf8},
                 {"flag", true},
                 {"ratio", 0.5},
                 {"none", nullptr},
                 {"count", int64_t{-3}},
                 {"inf", std::numeric_limits<double>::infinity()}});

  const std::vector<nlohmann::json> lines = log.json_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].value("message", ""), "effective config");
  EXPECT_EQ(lines[0].value("config", ""), config);
  EXPECT_EQ(lines[1].value("message", ""), "plain 1 with \"quotes\" and a brace{}");
  EXPECT_EQ(lines[2].value("text", ""), "bad \xef\xbf\xbd byte, fine \xc3\xa9");
  EXPECT_EQ(lines[2].value("flag", false), true);
  EXPECT_DOUBLE_EQ(lines[2].value("ratio", 0.0), 0.5);
  EXPECT_TRUE(lines[2].at("none").is_null());
  EXPECT_EQ(lines[2].value("count", 0), -3);
  EXPECT_TRUE(lines[2].at("inf").is_null());
}

TEST(LogLevelTest, LinesBelowTheLevelAreDropped) {
  CapturedLog log(LogFormat::kJson, "warning");
  log.logger()->info("hidden");
  LogRequestDone(CompletedRequest(), log.logger());  // info
  log.logger()->warn("shown");
  const std::vector<nlohmann::json> lines = log.json_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].value("message", ""), "shown");
}

TEST(TextLogTest, RequestDoneLineIsKeyValues) {
  CapturedLog log(LogFormat::kText);
  RequestSummary summary = CompletedRequest();
  summary.status = absl::CancelledError("client went away");
  LogRequestDone(summary, log.logger());
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              MatchesRegex(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z \[info\] request done .*)"));
  EXPECT_THAT(lines[0], HasSubstr(" id=42 outcome=complete_stop prompt_tokens=17 "
                                  "cached_prompt_tokens=16 generated_tokens=5 queue_ms=3 "
                                  "ttft_ms=25 total_ms=140"));
  EXPECT_THAT(lines[0], HasSubstr(" error=\"client went away\""));
  EXPECT_THAT(log.text(), Not(HasSubstr("\x1f")));
}

TEST(TextLogTest, ConfigFollowsOnIndentedLines) {
  CapturedLog log(LogFormat::kText);
  LogEffectiveConfig("a: 1\nb: 2", log.logger());
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("[info] effective config config=(below)"));
  EXPECT_EQ(lines[1], "  config:");
  EXPECT_EQ(lines[2], "    a: 1");
  EXPECT_EQ(lines[3], "    b: 2");
}

TEST(SetUpLoggingTest, InstallsTheDefaultLogger) {
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  std::ostringstream out;
  LoggingOptions options;
  options.format = LogFormat::kJson;
  options.sinks.push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  ASSERT_OK(SetUpLogging(options));
  LogRequestDone(CompletedRequest());
  spdlog::info("from spdlog");
  spdlog::default_logger()->flush();
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0]).value("id", -1), 42);
  EXPECT_EQ(nlohmann::json::parse(lines[1]).value("message", ""), "from spdlog");
  spdlog::set_default_logger(previous);
}

}  // namespace
}  // namespace convoy
