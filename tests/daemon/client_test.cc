// The `convoy` command-line client against a real convoyd: generate (unary and streamed, plain
// and JSON), health and info, as a user runs them; output parsed, exit codes checked.
#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"

namespace convoy::testing {
namespace {

using ::testing::HasSubstr;

// Runs the convoy client with `args`; its stdout only.
ProcessResult Client(const std::string& args) {
  return Execute(std::string(CONVOY_CLIENT_PATH) + " " + args,
                 /*with_stderr=*/false);
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = DaemonProcess::Start(WriteTestModel("client", TinyModelConfig()), DefaultTestConfig())
                  .release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }
  std::string Addr() const { return "--addr " + daemon_->address(); }

  static DaemonProcess* daemon_;
};
DaemonProcess* ClientTest::daemon_ = nullptr;

TEST_F(ClientTest, GenerateJsonMatchesTheApiAndStreamingGivesTheSameTokens) {
  auto stub = daemon_->inference();
  v1::InferRequest request = MakeRequest({1, 2, 3}, 6);
  request.set_return_logprobs(true);
  v1::InferResponse expected;
  ASSERT_TRUE(CallInfer(*stub, request, &expected).ok());
  const std::vector<int32_t> tokens(expected.token_ids().begin(), expected.token_ids().end());

  const ProcessResult unary =
      Client("generate " + Addr() + " --token-ids 1,2,3 --max-tokens 6 --logprobs --json");
  ASSERT_EQ(unary.exit_code, 0) << unary.out;
  const auto lines = JsonLines(unary.out);
  ASSERT_EQ(lines.size(), 1u) << unary.out;
  EXPECT_EQ(lines[0]["token_ids"].get<std::vector<int32_t>>(), tokens);
  ASSERT_EQ(lines[0]["logprobs"].size(), 6u);
  EXPECT_NEAR(lines[0]["logprobs"][0].get<double>(), expected.logprobs(0), 1e-5);
  EXPECT_EQ(lines[0]["finish_reason"], "length");

  const ProcessResult streamed =
      Client("generate " + Addr() + " --token-ids 1,2,3 --max-tokens 6 --stream --json");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.out;
  const auto stream_lines = JsonLines(streamed.out);
  ASSERT_GE(stream_lines.size(), 2u) << streamed.out;
  EXPECT_EQ(stream_lines.back()["token_ids"].get<std::vector<int32_t>>(), tokens);
  EXPECT_EQ(stream_lines.back()["finish_reason"], "length");

  // The seed is printed: the one given, or the one the server drew.
  const ProcessResult seeded = Client("generate " + Addr() +
                                      " --token-ids 1,2,3 --max-tokens 2 --temperature 1 "
                                      "--seed 77 --stream --json");
  ASSERT_EQ(seeded.exit_code, 0) << seeded.out;
  EXPECT_EQ(JsonLines(seeded.out).back()["seed"].get<uint64_t>(), 77u) << seeded.out;
  ASSERT_TRUE(lines[0].contains("seed")) << unary.out;

  const ProcessResult plain =
      Client("generate " + Addr() + " --token-ids 1,2,3 --max-tokens 6 --stream");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_THAT(plain.out, HasSubstr("[length]"));
}

// --n 3: each choice under its index, whole or streamed, with the API's tokens for each.
TEST_F(ClientTest, GenerateNPrintsEveryChoiceWholeOrStreamed) {
  auto stub = daemon_->inference();
  v1::InferRequest request = MakeRequest({1, 2, 3}, 5);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_seed(21);
  request.set_n(3);
  v1::InferResponse expected;
  ASSERT_TRUE(CallInfer(*stub, request, &expected).ok());
  ASSERT_EQ(expected.choices_size(), 3);

  const std::string flags =
      " --token-ids 1,2,3 --max-tokens 5 --temperature 1 --seed 21 --n 3 --json";
  for (const char* stream : {"", " --stream"}) {
    const ProcessResult result = Client("generate " + Addr() + flags + stream);
    ASSERT_EQ(result.exit_code, 0) << result.out;
    const nlohmann::json whole = JsonLines(result.out).back();
    ASSERT_EQ(whole["choices"].size(), 3u) << result.out;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(whole["choices"][i]["index"], i);
      EXPECT_EQ(whole["choices"][i]["seed"].get<uint64_t>(), 21u + i);
      EXPECT_EQ(whole["choices"][i]["token_ids"].get<std::vector<int32_t>>(),
                std::vector<int32_t>(expected.choices(i).token_ids().begin(),
                                     expected.choices(i).token_ids().end()))
          << stream;
    }
    EXPECT_EQ(whole["usage"]["completion_tokens"], expected.usage().completion_tokens());
  }
  const ProcessResult plain =
      Client("generate " + Addr() + " --token-ids 1,2,3 --max-tokens 5 --n 3 --stream");
  ASSERT_EQ(plain.exit_code, 0);
  for (const char* label : {"[choice 0]", "[choice 1]", "[choice 2]"}) {
    EXPECT_THAT(plain.out, HasSubstr(label));
  }
  EXPECT_EQ(Client("generate " + Addr() + " --token-ids 1 --n 0").exit_code, 2);
}

TEST_F(ClientTest, ErrorsExitNonZeroAndBadUsageExitsTwo) {
  EXPECT_EQ(Client("generate " + Addr() + " --token-ids 1,2,3 --top-p 2").exit_code, 1);
  EXPECT_EQ(Client("generate " + Addr() + " --token-ids 1,x").exit_code, 2);
  EXPECT_EQ(Client("generate " + Addr()).exit_code, 2);
  EXPECT_EQ(Client("frobnicate").exit_code, 2);
  EXPECT_EQ(Client("health --addr 127.0.0.1:1 --timeout-ms 2000").exit_code, 1);
}

TEST_F(ClientTest, HealthAndInfo) {
  const ProcessResult health = Client("health " + Addr());
  EXPECT_EQ(health.exit_code, 0);
  EXPECT_THAT(health.out, HasSubstr("SERVING"));

  const ProcessResult info = Client("info " + Addr());
  ASSERT_EQ(info.exit_code, 0) << info.out;
  const auto lines = JsonLines(info.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["server"]["state"], "SERVING");
  EXPECT_EQ(lines[0]["server"]["executor"], "cpu");
  EXPECT_EQ(lines[0]["model"]["vocab_size"], "320");  // int64 prints as a JSON string
  EXPECT_EQ(lines[0]["model"]["max_context_length"], "256");
}

}  // namespace
}  // namespace convoy::testing
