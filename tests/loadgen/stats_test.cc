#include "bench/loadgen/stats.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace convoy::bench {
namespace {

// A completed request sent at `send` whose first token came `ttft` later, then `n - 1` more
// tokens `gap` apart.
RequestRecord Request(int cls, double send, double ttft, int n, double gap) {
  RequestRecord r;
  r.class_index = cls;
  r.send_s = send;
  r.first_token_s = send + ttft;
  r.output_tokens = n;
  r.token_gaps_s.assign(n - 1, gap);
  r.end_s = r.first_token_s + gap * (n - 1);
  r.completed = true;
  r.prompt_tokens = 10;
  return r;
}

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  const std::vector<double> v = {5, 1, 4, 2, 3};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 2);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 4.6);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(PercentileTest, OneToHundred) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_DOUBLE_EQ(s.p95, 95.05);
  EXPECT_DOUBLE_EQ(s.p99, 99.01);
  EXPECT_DOUBLE_EQ(s.max, 100);
}

TEST(StatsTest, MeanItl) {
  EXPECT_DOUBLE_EQ(Request(0, 0, 1, 5, 0.25).mean_itl_s(), 0.25);
  EXPECT_DOUBLE_EQ(Request(0, 0, 1, 1, 0.25).mean_itl_s(), 0);
}

TEST(StatsTest, SloNeedsBothTargets) {
  const SloTargets slo{0.5, 0.1};
  EXPECT_TRUE(MeetsSlo(Request(0, 0, 0.5, 10, 0.1), slo));
  EXPECT_FALSE(MeetsSlo(Request(0, 0, 0.6, 10, 0.05), slo));  // TTFT too long
  EXPECT_FALSE(MeetsSlo(Request(0, 0, 0.1, 10, 0.2), slo));   // tokens too slow
  RequestRecord failed = Request(0, 0, 0.1, 10, 0.01);
  failed.completed = false;
  EXPECT_FALSE(MeetsSlo(failed, slo));
  // No targets: every completed request counts.
  EXPECT_TRUE(MeetsSlo(Request(0, 0, 9, 10, 9), SloTargets{}));
}

TEST(StatsTest, PerClassAndOverallGoodput) {
  std::vector<RequestRecord> records;
  // Class 0: 4 requests, 3 within the SLO.
  records.push_back(Request(0, 0, 0.1, 11, 0.01));
  records.push_back(Request(0, 1, 0.2, 11, 0.01));
  records.push_back(Request(0, 2, 0.3, 11, 0.01));
  records.push_back(Request(0, 3, 2.0, 11, 0.01));  // TTFT over
  // Class 1: 2 requests, one too slow between tokens, one failed.
  records.push_back(Request(1, 0, 0.1, 5, 0.5));
  RequestRecord failed = Request(1, 1, 0.1, 3, 0.01);
  failed.completed = false;
  failed.error = "grpc 1: cancelled";
  records.push_back(failed);

  const std::vector<ClassStats> stats =
      ComputeStats(records, {"chat", "batch"}, 10.0, SloTargets{1.0, 0.1});
  ASSERT_EQ(stats.size(), 3u);
  const ClassStats& chat = stats[0];
  EXPECT_EQ(chat.name, "chat");
  EXPECT_EQ(chat.sent, 4);
  EXPECT_EQ(chat.completed, 4);
  EXPECT_EQ(chat.met_slo, 3);
  EXPECT_DOUBLE_EQ(chat.goodput_rps, 0.3);
  EXPECT_DOUBLE_EQ(chat.requests_per_s, 0.4);
  EXPECT_DOUBLE_EQ(chat.output_tokens_per_s, 4.4);
  EXPECT_DOUBLE_EQ(chat.ttft_s.p50, 0.25);
  EXPECT_EQ(chat.itl_s.count, 40);
  EXPECT_DOUBLE_EQ(chat.itl_s.p99, 0.01);
  EXPECT_DOUBLE_EQ(chat.e2e_s.max, 2.1);

  const ClassStats& batch = stats[1];
  EXPECT_EQ(batch.sent, 2);
  EXPECT_EQ(batch.completed, 1);
  EXPECT_EQ(batch.failed, 1);
  EXPECT_EQ(batch.met_slo, 0);
  EXPECT_EQ(batch.output_tokens, 8);  // tokens of the failed request count as delivered
  EXPECT_EQ(batch.ttft_s.count, 1);   // latencies only of completed requests

  const ClassStats& all = stats[2];
  EXPECT_EQ(all.name, "all");
  EXPECT_EQ(all.sent, 6);
  EXPECT_EQ(all.met_slo, 3);
  EXPECT_DOUBLE_EQ(all.goodput_rps, 0.3);
  EXPECT_DOUBLE_EQ(all.requests_per_s, 0.5);
}

// A class with its own targets is held to them, in its row and in "all"; the other classes keep
// the run's targets.
TEST(StatsTest, EachClassIsHeldToItsOwnTargets) {
  std::vector<RequestRecord> records;
  records.push_back(Request(0, 0, 0.1, 11, 0.01));  // chat: fast
  records.push_back(Request(0, 1, 0.4, 11, 0.01));  // chat: within 1 s, not within chat's 0.2 s
  records.push_back(Request(1, 0, 3.0, 5, 0.05));   // batch: within batch's 5 s, not 1 s
  records.push_back(Request(1, 1, 6.0, 5, 0.05));   // batch: over even batch's 5 s
  records.push_back(Request(2, 0, 0.5, 5, 0.05));   // other: the run's 1 s
  SloTargets slo{1.0, 0.1};
  slo.by_class["chat"] = {0.2, 0.1};
  slo.by_class["batch"] = {5.0, 0.0};
  const std::vector<ClassStats> stats = ComputeStats(records, {"chat", "batch", "other"}, 1.0, slo);
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0].met_slo, 1);
  EXPECT_EQ(stats[1].met_slo, 1);
  EXPECT_EQ(stats[2].met_slo, 1);
  EXPECT_EQ(stats[3].met_slo, 3);
  // Without the per-class targets the run's 1 s decides every request.
  EXPECT_EQ(ComputeStats(records, {"chat", "batch", "other"}, 1.0, SloTargets{1.0, 0.1})[3].met_slo,
            3);
  EXPECT_EQ(ComputeStats(records, {"chat", "batch", "other"}, 1.0, SloTargets{1.0, 0.1})[0].met_slo,
            2);
}

TEST(StatsTest, ClassSlosParseAndBadOnesAreNamed) {
  absl::StatusOr<std::map<std::string, SloTarget>> parsed =
      ParseClassSlos({"chat=500/100", "batch=5000/0"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_DOUBLE_EQ(parsed->at("chat").ttft_s, 0.5);
  EXPECT_DOUBLE_EQ(parsed->at("chat").itl_s, 0.1);
  EXPECT_DOUBLE_EQ(parsed->at("batch").ttft_s, 5.0);
  EXPECT_DOUBLE_EQ(parsed->at("batch").itl_s, 0.0);
  for (const char* bad :
       {"chat", "chat=500", "=500/100", "chat=a/100", "chat=-1/100", "chat=500/100/7"}) {
    absl::StatusOr<std::map<std::string, SloTarget>> r = ParseClassSlos({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status();
  }
  EXPECT_FALSE(ParseClassSlos({"chat=1/1", "chat=2/2"}).ok());
  SloTargets slo;
  slo.by_class = *parsed;
  EXPECT_EQ(UnknownSloClasses(slo, {"chat", "batch", "long"}), "");
  EXPECT_EQ(UnknownSloClasses(slo, {"chat", "long"}),
            "--class-slo names classes the workload does not have (batch); its classes are: "
            "chat, long");
  EXPECT_TRUE(slo.Any());
  EXPECT_FALSE(SloTargets{}.Any());
}

TEST(StatsTest, EmptyClassHasNoSamples) {
  const std::vector<ClassStats> stats = ComputeStats({}, {"a"}, 0, SloTargets{});
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].ttft_s.count, 0);
  EXPECT_EQ(stats[0].goodput_rps, 0);
}

}  // namespace
}  // namespace convoy::bench

namespace convoy::bench {
namespace {

RequestRecord Failed(double send, double end, std::string error) {
  RequestRecord r;
  r.send_s = send;
  r.end_s = end;
  r.error = std::move(error);
  return r;
}

TEST(StatsTest, RefusalsForLoadAreCountedAndTimedApartFromOtherFailures) {
  std::vector<RequestRecord> records = {
      Request(0, 0.0, 0.1, 3, 0.01),
      Failed(1.0, 1.0005, "grpc 8: the queue of priority level 1 is full"),
      Failed(2.0, 2.002, "http 429: the queue is full"),
      Failed(3.0, 3.5, "grpc 4: the deadline passed"),
      Failed(4.0, 4.1, "http 400: bad field"),
  };
  const std::vector<ClassStats> stats = ComputeStats(records, {"chat"}, 10.0, SloTargets());
  const ClassStats& all = stats.back();
  EXPECT_EQ(all.completed, 1);
  EXPECT_EQ(all.failed, 4);
  EXPECT_EQ(all.refused, 2);
  EXPECT_EQ(all.refusal_s.count, 2);
  EXPECT_NEAR(all.refusal_s.max, 0.002, 1e-9);
  EXPECT_FALSE(RefusedForLoad(records[0]));
  EXPECT_TRUE(RefusedForLoad(records[1]));
  EXPECT_FALSE(RefusedForLoad(records[3]));
  EXPECT_EQ(all.cancelled, 0);
}

TEST(StatsTest, RequestsTheClientCancelledAreCountedAsSuch) {
  std::vector<RequestRecord> records = {
      Request(0, 0.0, 0.1, 3, 0.01),
      Failed(1.0, 1.2, "grpc 1: Cancelled"),
      Failed(2.0, 2.2, "cancelled"),
      Failed(3.0, 3.5, "grpc 1: the server shut down"),
  };
  records[1].cancelled_by_client = true;
  records[2].cancelled_by_client = true;
  const ClassStats& all = ComputeStats(records, {"chat"}, 10.0, SloTargets()).back();
  EXPECT_EQ(all.failed, 3);
  EXPECT_EQ(all.cancelled, 2);
  EXPECT_EQ(all.refused, 0);
}

}  // namespace
}  // namespace convoy::bench
