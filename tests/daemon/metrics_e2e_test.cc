// convoyd's /metrics, scraped over HTTP while the daemon serves: a served request and a refused
// one move the counters and histograms they should.
#include <algorithm>
#include <optional>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "metrics/http_get.h"
#include "nlohmann/json.hpp"

namespace convoy::testing {
namespace {

// The daemon logs "metrics at http://ADDRESS:PORT/metrics" once listening.
int MetricsPort(const DaemonProcess& daemon) {
  std::smatch match;
  const std::string log = daemon.Log();
  if (!std::regex_search(log, match, std::regex(R"(metrics at http://[^ ]*:(\d+)/metrics)"))) {
    return -1;
  }
  return std::stoi(match[1]);
}

// The value of the sample whose line starts with `series` (name and labels), or -1.
double Sample(const std::string& body, const std::string& series) {
  size_t at = 0;
  while ((at = body.find(series, at)) != std::string::npos) {
    if (at == 0 || body[at - 1] == '\n') {
      const size_t space = body.find(' ', at + series.size());
      if (space == at + series.size()) return std::stod(body.substr(space + 1));
    }
    at += series.size();
  }
  return -1;
}

TEST(DaemonMetricsTest, ServedAndRefusedRequestsMoveTheMetrics) {
  auto daemon =
      DaemonProcess::Start(WriteTestModel("metrics", TinyModelConfig()), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto before = HttpGet(port, "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->status_code, 200);

  auto stub = daemon->inference();
  v1::InferRequest request;
  for (int t : {3, 4, 5, 6}) request.add_prompt_token_ids(t);
  request.mutable_sampling()->set_max_tokens(5);
  v1::InferResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Infer(&context, request, &response).ok());
  ASSERT_EQ(response.token_ids_size(), 5);

  v1::InferRequest bad;  // empty prompt: refused by the front end
  v1::InferResponse bad_response;
  grpc::ClientContext bad_context;
  EXPECT_EQ(stub->Infer(&bad_context, bad, &bad_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  auto after = HttpGet(port, "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  const std::string& b = before->body;
  const std::string& a = after->body;
  // The warm-up request counts too, so compare before and after.
  auto moved = [&](const std::string& series) { return Sample(a, series) - Sample(b, series); };
  EXPECT_EQ(moved(R"(convoy_requests_total{outcome="complete_length"})"), 1) << a;
  EXPECT_EQ(moved(R"(convoy_requests_rejected_total{reason="invalid_argument"})"), 1) << a;
  EXPECT_EQ(moved("convoy_request_refusal_seconds_count"), 1) << a;
  EXPECT_EQ(moved("convoy_e2e_request_latency_seconds_count"), 1) << a;
  EXPECT_EQ(moved("convoy_time_to_first_token_seconds_count"), 1) << a;
  EXPECT_EQ(moved("convoy_inter_token_latency_seconds_count"), 4) << a;
  EXPECT_EQ(moved("convoy_request_time_per_output_token_seconds_count"), 1) << a;
  EXPECT_EQ(moved("convoy_request_generation_tokens_sum"), 5) << a;
  EXPECT_GE(moved("convoy_generation_tokens_total"), 5) << a;
  EXPECT_GT(Sample(a, "convoy_kv_cache_blocks_free"), 0) << a;
}

// convoyd on the fake device (executor.device: FAKE): requests are served through the whole path,
// and where the steps' time went shows in /metrics and in GetServerInfo, each step at least the
// fake's step time as the device measured it.
TEST(DaemonMetricsTest, TheFakeDeviceServesAndTheStepPhasesAreMeasured) {
  std::string config = DefaultTestConfig();
  const std::string cpu = "executor { device: CPU cpu_threads: 1 }";
  ASSERT_NE(config.find(cpu), std::string::npos);
  config.replace(config.find(cpu), cpu.size(),
                 "executor { device: FAKE fake_step_microseconds: 1500 }");
  auto daemon = DaemonProcess::Start(WriteTestModel("metrics_fake", TinyModelConfig()), config);
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto stub = daemon->inference();
  v1::InferResponse response;
  ASSERT_TRUE(CallInfer(*stub, MakeRequest({3, 4, 5, 6}, 7), &response).ok());
  EXPECT_EQ(response.token_ids_size(), 7);

  const std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->executor(), "fake");
  const v1::StepPhaseMeans& means = info->step_phase_means();
  EXPECT_EQ(means.steps(), info->steps());
  EXPECT_GE(means.steps(), 7);  // the warm-up's steps and ours
  // Three means of the same steps, summed in doubles: equal to the step time up to rounding.
  EXPECT_GE(means.executor_prepare_us() + means.executor_forward_us() + means.executor_sample_us(),
            1500 - 1e-6);
  EXPECT_GT(means.wait_us(), 0);
  EXPECT_GT(means.engine_thread_us(), 0);

  auto metrics = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (const char* phase : {"plan", "launch", "emit", "plan_ahead", "wait", "apply",
                            "engine_thread", "prepare", "forward", "sample"}) {
    EXPECT_EQ(Sample(metrics->body,
                     absl::StrCat("convoy_engine_step_phase_seconds_count{phase=\"", phase, "\"}")),
              static_cast<double>(means.steps()))
        << phase << "\n"
        << metrics->body;
  }
}

// GetServerInfo's counters and /metrics count the same requests: here refusals by the front end
// (bad requests) and by the scheduler (a queue of one, full while one request runs and one waits).
TEST(DaemonMetricsTest, ServerInfoAndMetricsAgreeOnRejections) {
  ModelConfig long_context = TinyModelConfig();
  long_context.max_position_embeddings = 8192;
  auto daemon = DaemonProcess::Start(
      WriteTestModel("metrics_agree", long_context),
      DefaultTestConfig("", "max_batch_size: 1 max_num_batched_tokens: 64 max_queue_size: 1"));
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto stub = daemon->inference();
  v1::InferResponse response;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(CallInfer(*stub, v1::InferRequest(), &response).error_code(),  // empty prompt
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  grpc::ClientContext running_context, waiting_context;
  auto running = stub->InferStream(&running_context, MakeRequest({1, 2, 3}, 8000));
  v1::InferStreamResponse message;
  ASSERT_TRUE(running->Read(&message));
  auto waiting = stub->InferStream(&waiting_context, MakeRequest({4, 5, 6}, 8000));
  const absl::Time give_up = absl::Now() + kLiveness;
  while (absl::Now() < give_up) {
    const std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
    if (info && info->num_waiting() == 1) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(CallInfer(*stub, MakeRequest({7, 8}, 2), &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  running_context.TryCancel();
  waiting_context.TryCancel();
  while (running->Read(&message)) {
  }
  while (waiting->Read(&message)) {
  }
  running->Finish();
  waiting->Finish();

  auto metrics = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  double rejected_metric = 0;
  for (const char* reason : {"queue_full", "invalid_argument", "duplicate_id", "client_limit"}) {
    const double n = Sample(
        metrics->body, absl::StrCat("convoy_requests_rejected_total{reason=\"", reason, "\"}"));
    if (n > 0) rejected_metric += n;
  }
  const std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->requests_rejected(), 5);
  EXPECT_EQ(static_cast<double>(info->requests_rejected()), rejected_metric) << metrics->body;
}

// The OpenAI API's refusals before a request has a session (a body that is not JSON, an unknown
// field) count as the other protocols' do; a request over the client's in-flight limit gets 429
// with the limit's own code, not a full queue's.
TEST(DaemonMetricsTest, OpenAiRefusalsAreCountedAndTheClientLimitHasItsOwnCode) {
  ModelConfig long_context = TinyModelConfig();
  long_context.max_position_embeddings = 8192;
  auto daemon = DaemonProcess::Start(
      WriteTestModel("metrics_openai", long_context),
      DefaultTestConfig() + "request_limits { max_in_flight_per_client: 1 }\n");
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto stub = daemon->inference();
  const auto post = [&daemon](const std::string& body) {
    absl::StatusOr<HttpResponse> response = HttpCall(daemon->http_port(), "POST", "/v1/completions",
                                                     {"Content-Type: application/json"}, body);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(HttpResponse());
  };
  EXPECT_EQ(post("{").status_code, 400);
  EXPECT_EQ(post(R"({"prompt": [1, 2], "bogus": 1})").status_code, 400);
  EXPECT_EQ(post(R"({"prompt": [1, 2], "seed": 1.5})").status_code, 400);

  // A stream holds the client's one slot; an OpenAI request from the same address is refused.
  grpc::ClientContext running_context;
  auto running = stub->InferStream(&running_context, MakeRequest({1, 2, 3}, 8000));
  v1::InferStreamResponse message;
  ASSERT_TRUE(running->Read(&message));
  const HttpResponse refused = post(R"({"prompt": [1, 2], "max_tokens": 2})");
  EXPECT_EQ(refused.status_code, 429) << refused.body;
  const nlohmann::json error = nlohmann::json::parse(refused.body, nullptr, false)["error"];
  EXPECT_EQ(error["code"], "max_in_flight_per_client") << refused.body;
  EXPECT_EQ(error["type"], "rate_limit_error") << refused.body;
  running_context.TryCancel();
  while (running->Read(&message)) {
  }
  running->Finish();

  auto metrics = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(Sample(metrics->body, "convoy_requests_rejected_total{reason=\"invalid_argument\"}"), 3)
      << metrics->body;
  EXPECT_EQ(Sample(metrics->body, "convoy_requests_rejected_total{reason=\"client_limit\"}"), 1)
      << metrics->body;
  const std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->requests_rejected(), 4);
}

// Requests ended every way a client can see (length, stop token, stop string, their own
// deadline, cancelled, refused) are counted as the client saw them, the same in GetServerInfo and
// /metrics: a stop string or a deadline the front end enforces is not a cancellation.
TEST(DaemonMetricsTest, ServerInfoAndMetricsCountEachEndAsTheClientSawIt) {
  auto daemon = DaemonProcess::Start(
      WriteSmolLm2VocabModel("metrics_ends", 8192, /*chat_template=*/false), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto stub = daemon->inference();
  auto metrics_before = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics_before.ok()) << metrics_before.status();
  const std::optional<v1::ServerInfo> before = GetServerInfo(*stub);
  ASSERT_TRUE(before.has_value());

  // Length: a greedy answer of 24 tokens, whose text and tokens the next requests stop at.
  v1::InferRequest request;
  request.set_prompt_text("Once upon a time there was a");
  request.mutable_sampling()->set_max_tokens(24);
  v1::InferResponse whole;
  ASSERT_TRUE(CallInfer(*stub, request, &whole).ok());
  ASSERT_EQ(whole.finish_reason(), v1::FINISH_REASON_LENGTH);
  ASSERT_EQ(whole.token_ids_size(), 24);
  // Stop token: the fourth token generated (the same greedy answer up to it).
  v1::InferRequest stop_token = request;
  stop_token.mutable_sampling()->add_stop_token_ids(whole.token_ids(3));
  v1::InferResponse response;
  ASSERT_TRUE(CallInfer(*stub, stop_token, &response).ok());
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_STOP);
  // Stop string: a piece of the answer's text.
  ASSERT_GE(whole.text().size(), 8u) << whole.text();
  v1::InferRequest stop_string = request;
  stop_string.mutable_sampling()->add_stop(whole.text().substr(whole.text().size() / 2, 2));
  ASSERT_TRUE(CallInfer(*stub, stop_string, &response).ok());
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_STOP);
  // Its own deadline, passed while it generates.
  v1::InferRequest deadline = request;
  deadline.mutable_sampling()->set_max_tokens(8000);
  deadline.set_timeout_microseconds(300000);
  EXPECT_EQ(CallInfer(*stub, deadline, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // Cancelled by its client once it has a token.
  {
    grpc::ClientContext context;
    auto stream = stub->InferStream(&context, MakeRequest({1, 2, 3}, 8000));
    v1::InferStreamResponse message;
    ASSERT_TRUE(stream->Read(&message));
    context.TryCancel();
    while (stream->Read(&message)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Refused: an empty prompt.
  EXPECT_EQ(CallInfer(*stub, v1::InferRequest(), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // The cancelled request's end reaches the counters when the engine lets it go.
  std::optional<v1::ServerInfo> info;
  const absl::Time give_up = absl::Now() + kLiveness;
  while (absl::Now() < give_up) {
    info = GetServerInfo(*stub);
    if (info && info->requests_cancelled() > before->requests_cancelled()) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->requests_completed() - before->requests_completed(), 3);
  EXPECT_EQ(info->requests_timed_out() - before->requests_timed_out(), 1);
  EXPECT_EQ(info->requests_cancelled() - before->requests_cancelled(), 1);
  EXPECT_EQ(info->requests_failed() - before->requests_failed(), 0);
  EXPECT_EQ(info->requests_rejected() - before->requests_rejected(), 1);
  auto metrics = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto delta = [&](const std::string& outcome) {
    const std::string series = absl::StrCat("convoy_requests_total{outcome=\"", outcome, "\"}");
    return std::max(0.0, Sample(metrics->body, series)) -
           std::max(0.0, Sample(metrics_before->body, series));
  };
  EXPECT_EQ(delta("complete_length"), 1) << metrics->body;
  EXPECT_EQ(delta("complete_stop"), 2);
  EXPECT_EQ(delta("timed_out"), 1);
  EXPECT_EQ(delta("cancelled"), 1);
  EXPECT_EQ(delta("failed"), 0);
  EXPECT_EQ(delta("rejected"), 1);
}

// frontend.slow_client_timeout_microseconds: a stream whose client never reads is cancelled once
// its output has waited that long; its KV blocks are freed, the call ends, it is counted, and
// the server serves on.
TEST(DaemonMetricsTest, AStreamWhoseClientNeverReadsIsCancelledAndCounted) {
  ModelConfig long_context = TinyModelConfig();
  long_context.max_position_embeddings = 8192;
  auto daemon = DaemonProcess::Start(WriteTestModel("slow_client", long_context),
                                     DefaultTestConfig("slow_client_timeout_microseconds: 300000"));
  ASSERT_NE(daemon, nullptr);
  const int port = MetricsPort(*daemon);
  ASSERT_GT(port, 0) << daemon->Log();
  auto stub = daemon->inference();
  // This client's own channel announces a small flow-control window and never grows it (no BDP
  // probing), so that its transport does not take in megabytes on the application's behalf.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  args.SetMaxReceiveMessageSize(64 << 20);
  auto slow_channel =
      grpc::CreateCustomChannel(daemon->address(), grpc::InsecureChannelCredentials(), args);
  // Connected before the call: a call on an unconnected channel fails at the first failed attempt,
  // and Debian's gRPC 1.51 can take a connect still in progress as failed (grpc/grpc#35064).
  ASSERT_TRUE(slow_channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kLiveness)));
  auto slow_stub = v1::Inference::NewStub(slow_channel);

  // Big messages (20 top logprobs a token) that this client never reads: the server's writes stop
  // completing once the stream's flow-control window is full.
  v1::InferRequest request = MakeRequest({1, 2, 3}, 8000);
  request.set_return_logprobs(true);
  request.set_top_logprobs(20);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto stream = slow_stub->InferStream(&context, request);

  const absl::Time give_up = absl::Now() + kLiveness;
  double slow = -1;
  while (absl::Now() < give_up) {
    auto metrics = HttpGet(port, "/metrics");
    if (metrics.ok()) slow = Sample(metrics->body, "convoy_slow_clients_total");
    if (slow >= 1) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(slow, 1) << daemon->Log();
  // The call ends (cancelled by the server) without the client reading anything first...
  v1::InferStreamResponse message;
  int read = 0;
  while (stream->Read(&message)) ++read;
  EXPECT_FALSE(stream->Finish().ok());
  EXPECT_LT(read, 8000);
  // ... and nothing of it is left: no open call, every KV block free.
  std::optional<v1::ServerInfo> info;
  const absl::Time give_up_info = absl::Now() + kLiveness;
  while (absl::Now() < give_up_info) {
    info = GetServerInfo(*stub);
    if (info && info->active_calls() <= 1 && info->kv_blocks_free() == info->kv_blocks_total()) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(info.has_value());
  EXPECT_LE(info->active_calls(), 1);  // GetServerInfo's own
  EXPECT_EQ(info->kv_blocks_free(), info->kv_blocks_total());
  EXPECT_NE(daemon->Log().find("left the output unread"), std::string::npos) << daemon->Log();
  // Another client is served as before.
  v1::InferResponse response;
  EXPECT_TRUE(CallInfer(*stub, MakeRequest({4, 5}, 4), &response).ok());
  EXPECT_EQ(response.token_ids_size(), 4);
  // The slow client's request counts as cancelled, the other as complete, in both places.
  info = WaitForServerInfo(*stub, [](const v1::ServerInfo& i) {
    return i.requests_cancelled() >= 1 && i.requests_completed() >= 1;
  });
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->requests_cancelled(), 1);
  EXPECT_EQ(info->requests_completed(), 1);
  auto metrics = HttpGet(port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(Sample(metrics->body, "convoy_requests_total{outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(Sample(metrics->body, "convoy_requests_total{outcome=\"complete_length\"}"), 1);
}

}  // namespace
}  // namespace convoy::testing
