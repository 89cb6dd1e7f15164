// Request traces: parsing (and refusing bad lines), the workload standing for a trace, and the
// replay's times and requests.
#include "bench/loadgen/trace.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// As convoyd writes it: in order of the requests' ends, not of their arrivals.
constexpr char kTrace[] =
    R"({"arrival_s":12.5,"prompt_tokens":40,"output_tokens":8,"priority":2,"outcome":"complete_length"}
{"arrival_s":10.0,"prompt_tokens":400,"output_tokens":16,"priority":1,"outcome":"complete_stop"}

{"arrival_s":11.0,"prompt_tokens":20,"output_tokens":0,"priority":2,"outcome":"rejected"}
)";

TEST(TraceTest, ParsesSortsAndClassifiesByPriority) {
  absl::StatusOr<Trace> trace = ParseTrace(kTrace, "t.jsonl");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->entries.size(), 3u);
  EXPECT_EQ(trace->entries[0].arrival_s, 0);
  EXPECT_EQ(trace->entries[0].prompt_tokens, 400);
  EXPECT_EQ(trace->entries[1].arrival_s, 1);
  EXPECT_EQ(trace->entries[1].output_tokens, 1);  // 0 generated is sent as 1
  EXPECT_EQ(trace->entries[2].arrival_s, 2.5);
  EXPECT_EQ(trace->span_s(), 2.5);
  EXPECT_EQ(trace->priorities, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(trace->entries[0].class_index, 0);
  EXPECT_EQ(trace->entries[2].class_index, 1);

  const v1::Workload workload = TraceWorkload(*trace, 2);
  ASSERT_EQ(workload.request_class_size(), 2);
  EXPECT_EQ(workload.request_class(1).name(), "priority 2");
  EXPECT_EQ(workload.request_class(1).weight(), 2);
  EXPECT_EQ(workload.request_class(1).prompt_tokens().uniform().min(), 20);
  EXPECT_EQ(workload.request_class(1).prompt_tokens().uniform().max(), 40);
  EXPECT_EQ(workload.num_requests(), 3);
  EXPECT_DOUBLE_EQ(workload.arrival().open_loop().rate_rps(), 3 / 2.5 * 2);
}

TEST(TraceTest, ReplaysAtTheScaledTimesWithTheRecordedLengths) {
  absl::StatusOr<Trace> trace = ParseTrace(kTrace, "t.jsonl");
  ASSERT_TRUE(trace.ok());
  TraceReplay replay(*trace, /*rate_scale=*/2, /*vocab_size=*/50, /*max_context=*/256, 7);
  std::vector<double> times;
  std::vector<PlannedRequest> requests;
  while (!replay.done()) {
    times.push_back(replay.next_arrival_s());
    requests.push_back(replay.Next());
  }
  EXPECT_EQ(times, (std::vector<double>{0, 0.5, 1.25}));
  ASSERT_EQ(requests.size(), 3u);
  // 400 + 16 does not fit 256 tokens: the prompt is cut.
  EXPECT_EQ(requests[0].prompt_token_ids.size(), 240u);
  EXPECT_EQ(requests[0].max_tokens, 16);
  EXPECT_EQ(requests[0].priority, 1);
  EXPECT_EQ(requests[2].prompt_token_ids.size(), 40u);
  EXPECT_EQ(requests[2].class_index, 1);
  for (const PlannedRequest& r : requests) {
    for (int32_t id : r.prompt_token_ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 50);
    }
  }
}

TEST(TraceTest, RefusesBadLinesNamingThem) {
  EXPECT_THAT(ParseTrace("", "t"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("t: the trace has no request")));
  EXPECT_THAT(ParseTrace("{\"arrival_s\":1,\"prompt_tokens\":3,\"output_tokens\":1,"
                         "\"priority\":0}\nnot json\n",
                         "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t:2: not a JSON object")));
  EXPECT_THAT(ParseTrace(R"({"prompt_tokens":3,"output_tokens":1,"priority":0})", "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t:1: no arrival_s")));
  EXPECT_THAT(
      ParseTrace(R"({"arrival_s":-1,"prompt_tokens":3,"output_tokens":1,"priority":0})", "t"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("arrival_s must be")));
  EXPECT_THAT(
      ParseTrace(R"({"arrival_s":1,"prompt_tokens":0,"output_tokens":1,"priority":0})", "t"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("t:1: prompt_tokens must be an integer of at least 1, not 0")));
  EXPECT_THAT(
      ParseTrace(R"({"arrival_s":1,"prompt_tokens":2,"output_tokens":"x","priority":0})", "t"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output_tokens must be")));
  EXPECT_THAT(ParseTrace(R"({"arrival_s":1,"prompt_tokens":2,"output_tokens":1})", "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t:1: no priority")));
  EXPECT_THAT(LoadTrace("/nonexistent/trace.jsonl"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot read the trace")));
}

}  // namespace
}  // namespace convoy::bench
