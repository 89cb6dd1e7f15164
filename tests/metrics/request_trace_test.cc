// convoyd's request trace: one JSON line per finished request, with lengths, times, priority and
// outcome only.
#include "metrics/request_trace.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(RequestTraceTest, WritesOneLinePerRequestWithoutItsIdentity) {
  const std::string path = ::convoy::testing::ProcessDir("convoy_request_trace") + "/trace.jsonl";
  const absl::Time origin = absl::FromUnixSeconds(1000);
  absl::StatusOr<std::unique_ptr<RequestTrace>> trace = RequestTrace::Open(path, origin);
  ASSERT_TRUE(trace.ok()) << trace.status();

  RequestSummary done;
  done.client_request_id = "customer-42";
  done.seed = 99;
  done.arrival = origin + absl::Milliseconds(2500);
  done.prompt_tokens = 412;
  done.generated_tokens = 96;
  done.priority = 2;
  done.outcome = Outcome::kCompleteStop;
  (*trace)->Record(done);
  RequestSummary refused_at_the_door;  // no prompt known: not traced
  refused_at_the_door.outcome = Outcome::kRejected;
  (*trace)->Record(refused_at_the_door);
  RequestSummary rejected = done;
  rejected.arrival = origin + absl::Seconds(3);
  rejected.generated_tokens = 0;
  rejected.outcome = Outcome::kRejected;
  (*trace)->Record(rejected);

  const std::string text = ReadFile(path);
  EXPECT_THAT(text, Not(HasSubstr("customer-42")));
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << text;
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_DOUBLE_EQ(first["arrival_s"].get<double>(), 2.5);
  EXPECT_EQ(first["prompt_tokens"], 412);
  EXPECT_EQ(first["output_tokens"], 96);
  EXPECT_EQ(first["priority"], 2);
  EXPECT_EQ(first["outcome"], OutcomeName(Outcome::kCompleteStop));
  EXPECT_EQ(first.size(), 5u) << "nothing but lengths, time, priority and outcome";
  const nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["outcome"], OutcomeName(Outcome::kRejected));
  EXPECT_EQ(second["output_tokens"], 0);
  trace->reset();
  std::remove(path.c_str());
}

TEST(RequestTraceTest, AnUnwritablePathIsNamed) {
  EXPECT_THAT(RequestTrace::Open("/nonexistent-dir/trace.jsonl", absl::Now()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("/nonexistent-dir/trace.jsonl")));
}

}  // namespace
}  // namespace convoy
