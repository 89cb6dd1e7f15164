// convoyd end to end: the real binary on a loopback port with a random-weight model. Tokens are
// checked against the engine run in-process (Generator over a CpuExecutor of the same weights);
// cancellation, shutdown and errors are checked through the public API and the process's exit.
// Waits are bounded (kLiveness); nothing asserts on timing.
#include <signal.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon_harness.h"
#include "engine/generator.h"
#include "executor/cpu/cpu_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const std::string& ModelDir() {
  static const std::string* dir = new std::string(WriteTestModel("tiny", TinyModelConfig()));
  return *dir;
}

// The in-process reference: the whole batch through the Generator, one CPU thread, fp32.
std::vector<GenerationOutput> GenerateInProcess(const std::vector<GenerationRequest>& requests) {
  auto weights = ModelWeights::Load(ModelDir());
  EXPECT_OK(weights);
  if (!weights.ok()) return {};
  CpuExecutorOptions options;
  options.num_threads = 1;
  options.kv_cache_bytes = 8 << 20;
  options.block_size = 16;
  options.weight_format = CpuWeightFormat::kF32;
  auto executor = CpuExecutor::Create(**weights, options);
  EXPECT_OK(executor);
  if (!executor.ok()) return {};
  Generator generator(executor->get(), {});
  auto outputs = generator.Generate(requests);
  EXPECT_OK(outputs);
  return outputs.ok() ? *outputs : std::vector<GenerationOutput>{};
}

GenerationRequest ToGenerationRequest(const v1::InferRequest& request) {
  GenerationRequest out;
  out.prompt.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  const v1::SamplingParameters& s = request.sampling();
  out.max_tokens = s.max_tokens();
  if (s.has_temperature()) out.sampling.temperature = s.temperature();
  if (s.has_top_k()) out.sampling.top_k = s.top_k();
  if (s.has_top_p()) out.sampling.top_p = s.top_p();
  if (s.has_seed()) out.sampling.seed = s.seed();
  out.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  return out;
}

std::vector<int32_t> Prompt(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back((salt * 131 + i * 29 + 3) % 320);
  return prompt;
}

// Polls the server until every KV block is free again (its snapshot is refreshed after the
// final events go out) and `also` holds; the last information seen.
v1::ServerInfo WaitForAllBlocksFree(
    v1::Inference::Stub& stub, const std::function<bool(const v1::ServerInfo&)>& also =
                                   [](const v1::ServerInfo&) { return true; }) {
  return WaitForServerInfo(stub,
                           [&also](const v1::ServerInfo& info) {
                             return info.kv_blocks_free() == info.kv_blocks_total() &&
                                    info.num_running() == 0 && also(info);
                           })
      .value_or(v1::ServerInfo());
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = DaemonProcess::Start(ModelDir(), DefaultTestConfig());
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->inference();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

TEST_F(DaemonTest, InferAndInferStreamMatchTheEngineInProcess) {
  std::vector<v1::InferRequest> requests;
  requests.push_back(MakeRequest(Prompt(5, 1), 12));  // greedy
  v1::InferRequest sampled = MakeRequest(Prompt(17, 2), 20);
  sampled.mutable_sampling()->set_temperature(0.9f);
  sampled.mutable_sampling()->set_top_k(40);
  sampled.mutable_sampling()->set_top_p(0.9f);
  sampled.mutable_sampling()->set_seed(1234);
  requests.push_back(sampled);
  requests.push_back(MakeRequest(Prompt(1, 3), 1));
  requests.push_back(MakeRequest(Prompt(40, 4), 30));

  std::vector<GenerationRequest> reference_requests;
  for (const auto& r : requests) reference_requests.push_back(ToGenerationRequest(r));
  // A stop token: the third token the greedy request produces alone.
  const std::vector<GenerationOutput> first = GenerateInProcess({reference_requests[0]});
  ASSERT_EQ(first.size(), 1u);
  v1::InferRequest stopped = requests[0];
  stopped.mutable_sampling()->add_stop_token_ids(first[0].token_ids[2]);
  requests.push_back(stopped);
  reference_requests.push_back(ToGenerationRequest(stopped));
  const std::vector<GenerationOutput> expected = GenerateInProcess(reference_requests);
  ASSERT_EQ(expected.size(), requests.size());

  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    v1::InferRequest request = requests[i];
    request.set_return_logprobs(true);
    v1::InferResponse unary;
    const grpc::Status unary_status = CallInfer(*stub_, request, &unary);
    ASSERT_TRUE(unary_status.ok()) << unary_status.error_message();
    EXPECT_THAT(unary.token_ids(), ElementsAreArray(expected[i].token_ids));
    ASSERT_EQ(unary.logprobs_size(), unary.token_ids_size());
    for (int t = 0; t < unary.logprobs_size(); ++t) {
      EXPECT_NEAR(unary.logprobs(t), expected[i].logprobs[t], 1e-4);
    }
    const v1::FinishReason reason = expected[i].finish_reason == FinishReason::kStop
                                        ? v1::FINISH_REASON_STOP
                                        : v1::FINISH_REASON_LENGTH;
    EXPECT_EQ(unary.finish_reason(), reason);
    EXPECT_EQ(unary.usage().prompt_tokens(), request.prompt_token_ids_size());
    EXPECT_EQ(unary.usage().completion_tokens(), unary.token_ids_size());
    EXPECT_GE(unary.timings().total_microseconds(),
              unary.timings().time_to_first_token_microseconds());

    v1::InferResponse streamed;
    int messages = 0;
    const grpc::Status stream_status = CallInferStream(*stub_, request, &streamed, &messages);
    ASSERT_TRUE(stream_status.ok()) << stream_status.error_message();
    EXPECT_THAT(streamed.token_ids(), ElementsAreArray(expected[i].token_ids));
    EXPECT_EQ(streamed.logprobs_size(), streamed.token_ids_size());
    EXPECT_EQ(streamed.finish_reason(), reason);
    EXPECT_GE(messages, 1);
    EXPECT_EQ(streamed.usage().completion_tokens(), streamed.token_ids_size());
  }

  // Logprobs and top logprobs come only when asked.
  v1::InferRequest plain = requests[0];
  plain.set_top_logprobs(3);
  v1::InferResponse response;
  ASSERT_TRUE(CallInfer(*stub_, plain, &response).ok());
  EXPECT_EQ(response.logprobs_size(), 0);
  ASSERT_EQ(response.top_logprobs_size(), response.token_ids_size());
  for (int t = 0; t < response.top_logprobs_size(); ++t) {
    ASSERT_EQ(response.top_logprobs(t).token_ids_size(), 3);
    EXPECT_EQ(response.top_logprobs(t).token_ids(0), response.token_ids(t));  // greedy
  }
}

TEST_F(DaemonTest, SixtyFourConcurrentStreamsAllCompleteWithTheRightTokens) {
  constexpr int kStreams = 64;
  std::vector<v1::InferRequest> requests;
  std::vector<GenerationRequest> reference_requests;
  for (int i = 0; i < kStreams; ++i) {
    v1::InferRequest request = MakeRequest(Prompt(1 + (i * 37) % 90, i), 1 + (i * 13) % 48);
    if (i % 3 == 0) {
      request.mutable_sampling()->set_temperature(1.0f);
      request.mutable_sampling()->set_seed(i);
    }
    requests.push_back(request);
    reference_requests.push_back(ToGenerationRequest(request));
  }
  const std::vector<GenerationOutput> expected = GenerateInProcess(reference_requests);
  ASSERT_EQ(expected.size(), requests.size());
  const std::optional<v1::ServerInfo> before = GetServerInfo(*stub_);
  ASSERT_TRUE(before.has_value());

  std::vector<v1::InferResponse> responses(kStreams);
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      auto stub = daemon_->inference();
      statuses[i] = CallInferStream(*stub, requests[i], &responses[i]);
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(::testing::Message() << "stream " << i);
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    EXPECT_THAT(responses[i].token_ids(), ElementsAreArray(expected[i].token_ids));
    EXPECT_EQ(responses[i].finish_reason(), v1::FINISH_REASON_LENGTH);
  }
  const v1::ServerInfo info = WaitForAllBlocksFree(*stub_);
  EXPECT_EQ(info.kv_blocks_free(), info.kv_blocks_total());
  EXPECT_EQ(info.requests_completed() - before->requests_completed(), kStreams);
}

// kv_cache.dtype reaches the CPU executor, and GetServerInfo (what `convoy info` prints) reports
// the cache's type and the tokens it holds: an int8 cache holds more than three times the default
// fp32 one's in the same memory (heads of 16: 18 bytes per token and head against 64).
TEST(DaemonKvDtypeTest, InfoReportsTheCacheTypeAndItsTokens) {
  auto f32 = DaemonProcess::Start(ModelDir(), DefaultTestConfig());
  ASSERT_NE(f32, nullptr);
  const v1::ServerInfo f32_info = WaitForAllBlocksFree(*f32->inference());
  EXPECT_EQ(f32_info.kv_dtype(), "f32");
  EXPECT_EQ(f32_info.kv_tokens_total(),
            int64_t{f32_info.kv_blocks_total()} * f32_info.kv_block_size());
  f32.reset();
  auto int8 = DaemonProcess::Start(
      ModelDir(), absl::StrReplaceAll(DefaultTestConfig(), {{"memory_budget_bytes: 8388608",
                                                             "memory_budget_bytes: 8388608 "
                                                             "dtype: DTYPE_INT8"}}));
  ASSERT_NE(int8, nullptr);
  const v1::ServerInfo int8_info = WaitForAllBlocksFree(*int8->inference());
  EXPECT_EQ(int8_info.kv_dtype(), "int8");
  EXPECT_EQ(int8_info.kv_tokens_total(),
            int64_t{int8_info.kv_blocks_total()} * int8_info.kv_block_size());
  EXPECT_GT(int8_info.kv_tokens_total(), 3 * f32_info.kv_tokens_total());
}

// A Qwen, Phi-3, Mistral or Gemma 3 model served end to end, from either format: GetModelInfo (what
// `convoy info` prints) names its family, and greedy requests side by side give transformers'
// tokens (tests/fixtures/families, family_reference_test).
TEST(DaemonFamilyTest, ServesQwenModelsWithTransformersTokens) {
  const std::string fixtures = TestSourceDir() + "/tests/fixtures/families/";
  for (const auto& [model, architecture] :
       {std::pair<std::string, std::string>{"qwen2/model.gguf", "Qwen2ForCausalLM"},
        {"qwen3", "Qwen3ForCausalLM"},
        {"phi3/model.gguf", "Phi3ForCausalLM"},
        {"mistral", "MistralForCausalLM"},
        {"gemma3/model.gguf", "Gemma3ForCausalLM"}}) {
    SCOPED_TRACE(model);
    auto daemon = DaemonProcess::Start(
        fixtures + model, absl::StrReplaceAll(DefaultTestConfig(), {{"cpu_threads: 1",
                                                                     "cpu_threads: 1 "
                                                                     "cpu_weights: WEIGHTS_F32"}}));
    ASSERT_NE(daemon, nullptr);
    std::unique_ptr<v1::Inference::Stub> stub = daemon->inference();
    v1::ModelInfo info;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
    EXPECT_EQ(info.architecture(), architecture);

    std::ifstream file(fixtures + model.substr(0, model.find('/')) + "/reference.json");
    const nlohmann::json reference = nlohmann::json::parse(file);
    const auto prompts = reference["prompts"].get<std::vector<std::vector<int32_t>>>();
    const auto tokens = reference["tokens"].get<std::vector<std::vector<int32_t>>>();
    std::vector<v1::InferResponse> responses(prompts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); ++i) {
      threads.emplace_back([&, i] {
        const grpc::Status status = CallInfer(
            *stub, MakeRequest(prompts[i], static_cast<int32_t>(tokens[i].size())), &responses[i]);
        EXPECT_TRUE(status.ok()) << status.error_message();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_THAT(responses[i].token_ids(), ElementsAreArray(tokens[i])) << "prompt " << i;
    }
  }
}

TEST_F(DaemonTest, UnseededRequestsDrawTheirOwnSeedAndReportIt) {
  // Eight requests alike but for the seed they do not send, at temperature 1, side by side.
  constexpr int kRequests = 8;
  v1::InferRequest request = MakeRequest(Prompt(12, 5), 16);
  request.mutable_sampling()->set_temperature(1.0f);
  std::vector<v1::InferResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      auto stub = daemon_->inference();
      EXPECT_TRUE(i % 2 == 0 ? CallInfer(*stub, request, &responses[i]).ok()
                             : CallInferStream(*stub, request, &responses[i]).ok());
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kRequests; ++i) {
    for (int j = 0; j < i; ++j) {
      EXPECT_NE(responses[i].seed(), responses[j].seed()) << i << " and " << j;
      // 16 draws over the vocabulary of a random model: equal only if the seeds were.
      EXPECT_NE(
          std::vector<int32_t>(responses[i].token_ids().begin(), responses[i].token_ids().end()),
          std::vector<int32_t>(responses[j].token_ids().begin(), responses[j].token_ids().end()))
          << i << " and " << j;
    }
  }
  // The seed reported reproduces the answer, alone.
  v1::InferRequest again = request;
  again.mutable_sampling()->set_seed(responses[3].seed());
  v1::InferResponse replay;
  ASSERT_TRUE(CallInfer(*stub_, again, &replay).ok());
  EXPECT_EQ(replay.seed(), responses[3].seed());
  EXPECT_THAT(replay.token_ids(), ElementsAreArray(responses[3].token_ids()));
}

// A model with a long context, so that a stream is still generating when the client cancels.
const std::string& LongModelDir() {
  static const std::string* dir = [] {
    ModelConfig config = TinyModelConfig();
    config.max_position_embeddings = 8192;
    return new std::string(WriteTestModel("long", config));
  }();
  return *dir;
}

TEST(DaemonCancelTest, ACancelledStreamStopsAndFreesItsKvBlocks) {
  auto daemon = DaemonProcess::Start(LongModelDir(), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  auto stub = daemon->inference();
  const std::optional<v1::ServerInfo> before = GetServerInfo(*stub);
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->kv_blocks_free(), before->kv_blocks_total());

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto reader = stub->InferStream(&context, MakeRequest(Prompt(30, 9), 8000));
  v1::InferStreamResponse message;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&message)) tokens += message.token_ids_size();
  ASSERT_GE(tokens, 3);
  const std::optional<v1::ServerInfo> during = GetServerInfo(*stub);
  ASSERT_TRUE(during.has_value());
  EXPECT_LT(during->kv_blocks_free(), during->kv_blocks_total());
  EXPECT_EQ(during->num_running(), 1);

  context.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  const v1::ServerInfo after = WaitForAllBlocksFree(*stub, [&before](const v1::ServerInfo& info) {
    return info.requests_cancelled() > before->requests_cancelled();
  });
  EXPECT_EQ(after.kv_blocks_free(), after.kv_blocks_total());
  EXPECT_EQ(after.num_running(), 0);
  EXPECT_EQ(after.requests_cancelled() - before->requests_cancelled(), 1);
  EXPECT_EQ(after.requests_completed(), before->requests_completed());

  // A unary call whose deadline passes mid-generation is cancelled in the engine too.
  grpc::ClientContext short_context;
  short_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(300)));
  v1::InferResponse response;
  const grpc::Status status =
      stub->Infer(&short_context, MakeRequest(Prompt(10, 3), 8000), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const v1::ServerInfo end = WaitForAllBlocksFree(*stub);
  EXPECT_EQ(end.kv_blocks_free(), end.kv_blocks_total());
  EXPECT_EQ(end.requests_completed(), before->requests_completed());

  // The server goes on serving.
  v1::InferResponse ok;
  ASSERT_TRUE(CallInfer(*stub, MakeRequest(Prompt(4, 1), 3), &ok).ok());
  EXPECT_EQ(ok.token_ids_size(), 3);
}

TEST(DaemonQueueTest, AFullQueueRefusesWithResourceExhausted) {
  // One running sequence at most and one waiting: the third request finds the queue full.
  auto daemon = DaemonProcess::Start(
      LongModelDir(),
      DefaultTestConfig("", "max_batch_size: 1 max_num_batched_tokens: 64 max_queue_size: 1"));
  ASSERT_NE(daemon, nullptr);
  auto stub = daemon->inference();
  grpc::ClientContext running_context, waiting_context;
  running_context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  waiting_context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto running = stub->InferStream(&running_context, MakeRequest(Prompt(8, 1), 8000));
  v1::InferStreamResponse message;
  ASSERT_TRUE(running->Read(&message));
  auto waiting = stub->InferStream(&waiting_context, MakeRequest(Prompt(8, 2), 8000));
  const absl::Time give_up = absl::Now() + kLiveness;
  while (absl::Now() < give_up) {
    const std::optional<v1::ServerInfo> info = GetServerInfo(*stub);
    if (info && info->num_waiting() == 1) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  v1::InferResponse response;
  const grpc::Status refused = CallInfer(*stub, MakeRequest(Prompt(4, 3), 2), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("full"));

  running_context.TryCancel();
  waiting_context.TryCancel();
  while (running->Read(&message)) {
  }
  while (waiting->Read(&message)) {
  }
  running->Finish();
  waiting->Finish();
  const v1::ServerInfo after = WaitForAllBlocksFree(*stub);
  EXPECT_EQ(after.kv_blocks_free(), after.kv_blocks_total());
  EXPECT_EQ(after.num_waiting(), 0);
}

TEST(DaemonShutdownTest, SigtermDrainsAdmittedRequestsRefusesNewOnesAndExitsZero) {
  auto daemon = DaemonProcess::Start(ModelDir(), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);

  // Health watchers see SERVING now and NOT_SERVING once the signal arrives.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto health_stub = daemon->health();
  auto watch = health_stub->Watch(&watch_context, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse health;
  ASSERT_TRUE(watch->Read(&health));
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  constexpr int kStreams = 16;
  std::vector<v1::InferRequest> requests;
  std::vector<GenerationRequest> reference_requests;
  for (int i = 0; i < kStreams; ++i) {
    requests.push_back(MakeRequest(Prompt(3 + i * 4, i), 100 + i * 5));
    reference_requests.push_back(ToGenerationRequest(requests.back()));
  }
  const std::vector<GenerationOutput> expected = GenerateInProcess(reference_requests);
  ASSERT_EQ(expected.size(), requests.size());

  // Every stream is admitted (has its first token) before the signal.
  absl::Mutex mu;
  int started = 0;
  std::vector<std::vector<int32_t>> tokens(kStreams);
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<v1::FinishReason> reasons(kStreams, v1::FINISH_REASON_UNSPECIFIED);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      auto stub = daemon->inference();
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
      auto reader = stub->InferStream(&context, requests[i]);
      v1::InferStreamResponse message;
      bool counted = false;
      while (reader->Read(&message)) {
        tokens[i].insert(tokens[i].end(), message.token_ids().begin(), message.token_ids().end());
        if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
          reasons[i] = message.finish_reason();
        }
        if (!counted && !tokens[i].empty()) {
          counted = true;
          absl::MutexLock lock(&mu);
          ++started;
        }
      }
      statuses[i] = reader->Finish();
      if (!counted) {
        absl::MutexLock lock(&mu);
        ++started;
      }
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all_started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return started == kStreams; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_started), kLiveness));
  }
  daemon->Signal(SIGTERM);

  ASSERT_TRUE(watch->Read(&health));
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // New calls are refused: by the draining server, or by nobody once it has exited.
  auto late_stub = daemon->inference();
  v1::InferResponse late;
  const grpc::Status refused = CallInfer(*late_stub, MakeRequest(Prompt(3, 1), 2), &late);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();

  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(::testing::Message() << "stream " << i);
    EXPECT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    EXPECT_THAT(tokens[i], ElementsAreArray(expected[i].token_ids));
    EXPECT_EQ(reasons[i], v1::FINISH_REASON_LENGTH);
  }
  EXPECT_EQ(daemon->WaitForExit(kLiveness), std::optional<int>(0)) << daemon->Log();
  EXPECT_THAT(daemon->Log(), HasSubstr("draining"));
}

TEST(DaemonShutdownTest, ASecondSignalExitsAtOnce) {
  auto daemon = DaemonProcess::Start(LongModelDir(), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  auto stub = daemon->inference();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
  auto reader = stub->InferStream(&context, MakeRequest(Prompt(30, 2), 8000));
  v1::InferStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  daemon->Signal(SIGTERM);
  // The first signal is seen once health turns NOT_SERVING.
  auto health = daemon->health();
  const absl::Time give_up = absl::Now() + kLiveness;
  while (absl::Now() < give_up) {
    grpc::ClientContext check_context;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        health->Check(&check_context, grpc::health::v1::HealthCheckRequest(), &response);
    if (status.ok() && response.status() != grpc::health::v1::HealthCheckResponse::SERVING) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  daemon->Signal(SIGTERM);
  const std::optional<int> code = daemon->WaitForExit(kLiveness);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGTERM);
  context.TryCancel();
}

}  // namespace
}  // namespace convoy::testing
