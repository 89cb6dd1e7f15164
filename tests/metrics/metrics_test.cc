// The metrics as a Prometheus server scrapes them: a real Exposer on 127.0.0.1 (a port picked by
// the system), read over HTTP, before and after the observer and front-end calls.
#include "metrics/metrics.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::HttpGet;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// Series (name with its labels, as exposed) to value.
using Samples = std::map<std::string, double>;

Samples ParseExposition(const std::string& text) {
  Samples samples;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    const std::string value(line.substr(space + 1));
    samples[std::string(line.substr(0, space))] = std::strtod(value.c_str(), nullptr);
  }
  return samples;
}

// One server for the suite (stopping civetweb takes seconds); tests compare scrapes taken before
// and after what they do, so they do not depend on each other.
class MetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    MetricsOptions options;
    options.listen_address = "127.0.0.1";
    options.port = 0;
    absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create(options);
    ASSERT_OK(metrics);
    metrics_ = std::move(metrics).value().release();
  }
  static void TearDownTestSuite() {
    delete metrics_;
    metrics_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(metrics_, nullptr);
    ASSERT_GT(metrics_->port(), 0);
  }

  Samples Scrape() {
    absl::StatusOr<testing::HttpResponse> response = HttpGet(metrics_->port(), "/metrics");
    EXPECT_OK(response);
    if (!response.ok()) return {};
    EXPECT_EQ(response->status_code, 200);
    return ParseExposition(response->body);
  }

  // The value of `series`; a test failure (and NaN) when the scrape lacks it.
  static double Value(const Samples& samples, const std::string& series) {
    auto it = samples.find(series);
    if (it == samples.end()) {
      ADD_FAILURE() << "no series " << series;
      return std::nan("");
    }
    return it->second;
  }
  static double Delta(const Samples& before, const Samples& after, const std::string& series) {
    return Value(after, series) - Value(before, series);
  }

  static Metrics* metrics_;
};

Metrics* MetricsTest::metrics_ = nullptr;

TEST_F(MetricsTest, ServesTheTextFormatOnItsPathOnly) {
  absl::StatusOr<testing::HttpResponse> response = HttpGet(metrics_->port(), "/metrics");
  ASSERT_OK(response);
  EXPECT_EQ(response->status_code, 200);
  EXPECT_THAT(response->body, HasSubstr("# TYPE convoy_requests_total counter"));
  EXPECT_THAT(response->body, HasSubstr("# TYPE convoy_time_to_first_token_seconds histogram"));
  EXPECT_THAT(response->body, HasSubstr("# TYPE convoy_num_requests_running gauge"));

  absl::StatusOr<testing::HttpResponse> other = HttpGet(metrics_->port(), "/other");
  ASSERT_OK(other);
  EXPECT_EQ(other->status_code, 404);
}

TEST_F(MetricsTest, FinishedRequestCountsAsSuccessAndFillsHistograms) {
  const Samples before = Scrape();
  metrics_->OnQueueTime(1, absl::Milliseconds(20));
  metrics_->OnFirstToken(absl::Milliseconds(120));
  for (int i = 0; i < 3; ++i) metrics_->OnInterTokenTime(absl::Milliseconds(30));
  metrics_->OnRequestDone(Outcome::kCompleteStop, /*prompt_tokens=*/12, /*generated_tokens=*/4,
                          absl::Milliseconds(300));
  const Samples after = Scrape();

  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="complete_stop"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="complete_length"})"), 0);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="failed"})"), 0);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_success_total{finished_reason="stop"})"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_request_success"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_nv_inference_request_failure{reason="REJECTED"})"), 0);

  EXPECT_EQ(Delta(before, after, R"(convoy_request_queue_time_seconds_count{priority="1"})"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_queue_duration_us"), 20000);
  EXPECT_EQ(Delta(before, after, "convoy_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(Delta(before, after, "convoy_generation_tokens_total"), 4);
  EXPECT_EQ(Delta(before, after, "convoy_e2e_request_latency_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(Delta(before, after, "convoy_e2e_request_latency_seconds_sum"), 0.3);
  // 0.3 s falls in the (0.25, 0.5] bucket.
  EXPECT_EQ(Delta(before, after, R"(convoy_e2e_request_latency_seconds_bucket{le="0.25"})"), 0);
  EXPECT_EQ(Delta(before, after, R"(convoy_e2e_request_latency_seconds_bucket{le="0.5"})"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_request_prompt_tokens_count"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_request_prompt_tokens_sum"), 12);
  EXPECT_EQ(Delta(before, after, "convoy_request_generation_tokens_sum"), 4);
}

// A request's mean time per output token, what a per-request ITL SLO measures: (e2e - TTFT) /
// (tokens - 1), one observation per request, none for a request without two tokens.
TEST_F(MetricsTest, RequestSummaryFillsTheMeanTimePerOutputToken) {
  const Samples before = Scrape();
  RequestSummary summary;
  summary.outcome = Outcome::kCompleteLength;
  summary.generated_tokens = 5;
  summary.time_to_first_token = absl::Milliseconds(100);
  summary.e2e_latency = absl::Milliseconds(380);  // 4 gaps of 70 ms on average
  metrics_->OnRequestDone(summary);
  RequestSummary one_token = summary;
  one_token.generated_tokens = 1;
  metrics_->OnRequestDone(one_token);
  RequestSummary no_token = summary;
  no_token.generated_tokens = 0;
  no_token.time_to_first_token.reset();
  no_token.outcome = Outcome::kTimedOut;
  metrics_->OnRequestDone(no_token);
  const Samples after = Scrape();

  const std::string name = "convoy_request_time_per_output_token_seconds";
  EXPECT_EQ(Delta(before, after, name + "_count"), 1);
  EXPECT_NEAR(Delta(before, after, name + "_sum"), 0.07, 1e-12);
  EXPECT_EQ(Delta(before, after, name + R"(_bucket{le="0.05"})"), 0);
  EXPECT_EQ(Delta(before, after, name + R"(_bucket{le="0.075"})"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_e2e_request_latency_seconds_count"), 3);
}

TEST_F(MetricsTest, RejectedRequestCountsWithItsReasonAndNoLatency) {
  const Samples before = Scrape();
  metrics_->OnRejected(RejectReason::kQueueFull);
  metrics_->OnRequestDone(Outcome::kRejected, 12, 0, absl::Milliseconds(1));
  const Samples after = Scrape();

  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="rejected"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_rejected_total{reason="queue_full"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_rejected_total{reason="invalid_argument"})"),
            0);
  EXPECT_EQ(Delta(before, after, R"(convoy_nv_inference_request_failure{reason="REJECTED"})"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_request_success"), 0);
  EXPECT_EQ(Delta(before, after, "convoy_e2e_request_latency_seconds_count"), 0);
  EXPECT_EQ(Delta(before, after, "convoy_request_prompt_tokens_count"), 0);
  // Its refusal latency is kept apart from the latencies of served requests.
  EXPECT_EQ(Delta(before, after, "convoy_request_refusal_seconds_count"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_refusal_seconds_bucket{le="0.0005"})"), 0);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_refusal_seconds_bucket{le="0.001"})"), 1);
}

TEST_F(MetricsTest, RefusalsAtTheDoorKeepTheirLatency) {
  const Samples before = Scrape();
  metrics_->OnRefusalLatency(absl::Microseconds(80));
  metrics_->OnRefusalLatency(absl::Milliseconds(30));
  const Samples after = Scrape();
  EXPECT_EQ(Delta(before, after, "convoy_request_refusal_seconds_count"), 2);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_refusal_seconds_bucket{le="5e-05"})"), 0);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_refusal_seconds_bucket{le="0.0001"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_refusal_seconds_bucket{le="0.05"})"), 2);
  EXPECT_NEAR(Delta(before, after, "convoy_request_refusal_seconds_sum"), 0.03008, 1e-9);
}

TEST_F(MetricsTest, EndsOtherThanSuccessCountAsFailuresByReason) {
  const Samples before = Scrape();
  for (Outcome outcome :
       {Outcome::kCancelled, Outcome::kTimedOut, Outcome::kFailed, Outcome::kFailed}) {
    metrics_->OnRequestDone(outcome, 3, 1, absl::Milliseconds(10));
  }
  const Samples after = Scrape();

  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="cancelled"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="timed_out"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_requests_total{outcome="failed"})"), 2);
  EXPECT_EQ(Delta(before, after, R"(convoy_nv_inference_request_failure{reason="CANCELED"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_nv_inference_request_failure{reason="REJECTED"})"), 1);
  EXPECT_EQ(Delta(before, after, R"(convoy_nv_inference_request_failure{reason="BACKEND"})"), 2);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_request_success"), 0);
}

TEST_F(MetricsTest, StepStatsMoveStepHistogramsCountersAndGauges) {
  StepStats step;
  step.num_rows = 3;
  step.num_prefill_rows = 1;
  step.num_decode_rows = 2;
  step.padded_length = 8;
  step.real_tokens = 10;  // a prompt chunk of 8 and two decodes
  step.padded_tokens = 14;
  step.num_running = 3;
  step.kv_blocks_used = 30;
  step.kv_blocks_free = 70;
  step.queue_depth = {2, 5};

  const Samples before = Scrape();
  metrics_->OnStepPlanned(step);
  const Samples after = Scrape();

  EXPECT_EQ(Delta(before, after, "convoy_iteration_sequences_count"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_iteration_sequences_sum"), 3);
  EXPECT_EQ(Delta(before, after, "convoy_iteration_tokens_total_count"), 1);
  EXPECT_EQ(Delta(before, after, "convoy_iteration_tokens_total_sum"), 10);
  EXPECT_EQ(Delta(before, after, "convoy_prompt_tokens_total"), 8);
  EXPECT_EQ(Delta(before, after, "convoy_padded_tokens_total"), 14);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_count"), 3);
  EXPECT_EQ(Delta(before, after, "convoy_nv_inference_exec_count"), 1);
  EXPECT_EQ(Value(after, "convoy_num_requests_running"), 3);
  EXPECT_EQ(Value(after, "convoy_num_requests_waiting"), 7);
  EXPECT_EQ(Value(after, R"(convoy_num_requests_waiting_by_priority{priority="1"})"), 2);
  EXPECT_EQ(Value(after, R"(convoy_num_requests_waiting_by_priority{priority="2"})"), 5);
  EXPECT_DOUBLE_EQ(Value(after, "convoy_kv_cache_usage_perc"), 0.3);
  EXPECT_EQ(Value(after, "convoy_kv_cache_blocks_used"), 30);
  EXPECT_EQ(Value(after, "convoy_kv_cache_blocks_free"), 70);

  // The next step replaces the gauges and adds to the counters.
  StepStats decode;
  decode.num_rows = 2;
  decode.num_decode_rows = 2;
  decode.padded_length = 1;
  decode.real_tokens = 2;
  decode.num_running = 2;
  decode.kv_blocks_used = 10;
  decode.kv_blocks_free = 90;
  decode.queue_depth = {0, 1};
  metrics_->OnStepPlanned(decode);
  const Samples later = Scrape();
  EXPECT_EQ(Delta(before, later, "convoy_iteration_sequences_count"), 2);
  EXPECT_EQ(Delta(before, later, "convoy_prompt_tokens_total"), 8);
  EXPECT_EQ(Delta(before, later, "convoy_nv_inference_exec_count"), 2);
  EXPECT_EQ(Value(later, "convoy_num_requests_running"), 2);
  EXPECT_EQ(Value(later, "convoy_num_requests_waiting"), 1);
  EXPECT_EQ(Value(later, R"(convoy_num_requests_waiting_by_priority{priority="1"})"), 0);
  EXPECT_DOUBLE_EQ(Value(later, "convoy_kv_cache_usage_perc"), 0.1);

  // State without a step (nothing running) moves the gauges only.
  StepStats idle;
  idle.kv_blocks_free = 100;
  idle.queue_depth = {0, 0};
  metrics_->OnStepPlanned(idle);
  const Samples idle_samples = Scrape();
  EXPECT_EQ(Delta(before, idle_samples, "convoy_iteration_sequences_count"), 2);
  EXPECT_EQ(Value(idle_samples, "convoy_num_requests_running"), 0);
  EXPECT_EQ(Value(idle_samples, "convoy_kv_cache_usage_perc"), 0);
}

TEST_F(MetricsTest, PreemptionsCount) {
  const Samples before = Scrape();
  metrics_->OnPreempted(7);
  metrics_->OnPreempted(8);
  const Samples after = Scrape();
  EXPECT_EQ(Delta(before, after, "convoy_num_preemptions_total"), 2);
}

TEST_F(MetricsTest, QueueTimeIsKeptPerPriorityLevel) {
  const Samples before = Scrape();
  const std::string count3 = R"(convoy_request_queue_time_seconds_count{priority="3"})";
  const std::string sum3 = R"(convoy_request_queue_time_seconds_sum{priority="3"})";
  const double count3_before = before.count(count3) ? before.at(count3) : 0;
  const double sum3_before = before.count(sum3) ? before.at(sum3) : 0;
  metrics_->OnQueueTime(3, absl::Seconds(2));
  const Samples after = Scrape();
  EXPECT_EQ(Value(after, count3) - count3_before, 1);
  EXPECT_EQ(Value(after, sum3) - sum3_before, 2);
  EXPECT_EQ(Delta(before, after, R"(convoy_request_queue_time_seconds_count{priority="1"})"), 0);
}

TEST_F(MetricsTest, SecondServerOnTheSamePortIsUnavailable) {
  MetricsOptions options;
  options.listen_address = "127.0.0.1";
  options.port = metrics_->port();
  EXPECT_THAT(Metrics::Create(options),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("127.0.0.1")));
}

TEST(MetricsOptionsTest, BadOptionsAreRefused) {
  MetricsOptions options;
  options.port = 70000;
  EXPECT_THAT(Metrics::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("70000")));
  options.port = 0;
  options.path = "metrics";
  EXPECT_THAT(Metrics::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics")));
  options.path = "/metrics";
  options.priority_levels = 0;
  EXPECT_THAT(Metrics::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority_levels")));
}

TEST(MetricsOptionsTest, WithoutHttpTheRegistryStillCounts) {
  MetricsOptions options;
  options.serve_http = false;
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create(options);
  ASSERT_OK(metrics);
  EXPECT_EQ((*metrics)->port(), 0);
  // Level 1 exists from the start; level 3 appears on first use.
  const std::string level1 = R"(convoy_request_queue_time_seconds_count{priority="1"})";
  const std::string level3 = R"(convoy_request_queue_time_seconds_count{priority="3"})";
  const Samples before = ParseExposition((*metrics)->Serialize());
  EXPECT_EQ(before.count(level1), 1);
  EXPECT_EQ(before.count(R"(convoy_num_requests_waiting_by_priority{priority="1"})"), 1);
  EXPECT_EQ(before.count(level3), 0);
  (*metrics)->OnQueueTime(3, absl::Seconds(1));
  (*metrics)->OnRequestDone(Outcome::kCompleteLength, 4, 2, absl::Milliseconds(5));
  const Samples samples = ParseExposition((*metrics)->Serialize());
  EXPECT_EQ(samples.at(level3), 1);
  EXPECT_EQ(samples.at(R"(convoy_requests_total{outcome="complete_length"})"), 1);
  EXPECT_EQ(samples.at(R"(convoy_request_success_total{finished_reason="length"})"), 1);
}

// The process's resident memory is read at each scrape: this test process has touched far more
// than a page.
TEST(MetricsOptionsTest, ReportsTheResidentMemoryOfTheProcess) {
  MetricsOptions options;
  options.serve_http = false;
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create(options);
  ASSERT_OK(metrics);
  const Samples samples = ParseExposition((*metrics)->Serialize());
  ASSERT_EQ(samples.count("process_resident_memory_bytes"), 1);
  EXPECT_GT(samples.at("process_resident_memory_bytes"), 4096);
}

}  // namespace
}  // namespace convoy
