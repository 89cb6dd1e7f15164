// convoyd on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF; scripts/fetch-default-model.sh)
// against Hugging Face transformers (tests/fixtures/default_model/reference.json, written by
// scripts/fixtures/default_model_reference.py): for three chat conversations, the prompt token ids
// and the 24 greedy tokens must be transformers', sent both as chat messages (convoy's chat
// template and tokenizer) and as the prompt text transformers rendered (convoy's tokenizer).
//
// The CPU executor runs in fp32 (executor.cpu_weights: WEIGHTS_F32): the reference is fp32, and
// with bf16 matrix products the first conversation's first token already differs (the reference's
// top two logits are 0.09 apart; bf16 rounding moves them by about that much).
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using ::testing::ElementsAreArray;

constexpr char kModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kFetchScript[] = "scripts/fetch-default-model.sh";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const nlohmann::json& Reference() {
  static const nlohmann::json* reference = new nlohmann::json(nlohmann::json::parse(
      ReadText(TestSourceDir() + "/tests/fixtures/default_model/reference.json")));
  return *reference;
}

std::vector<int32_t> Ids(const nlohmann::json& array) { return array.get<std::vector<int32_t>>(); }

// Where `actual` first leaves `expected`, with the reference's logit margin there (the gap
// between its first and second choice: a small one means a close call).
std::string Divergence(const std::vector<int32_t>& actual, const nlohmann::json& conversation) {
  const std::vector<int32_t> expected = Ids(conversation["greedy_token_ids"]);
  size_t i = 0;
  while (i < actual.size() && i < expected.size() && actual[i] == expected[i]) ++i;
  std::string where;
  if (i < actual.size() && i < expected.size()) {
    where = absl::StrCat("token ", i, " differs: convoy ", actual[i], ", transformers ",
                         expected[i], " (transformers' top-2 logit margin there: ",
                         conversation["margins"][i].get<double>(), ")");
  } else if (i < expected.size()) {
    where = absl::StrCat("convoy stopped after ", actual.size(), " tokens, transformers went on");
  } else {
    where = absl::StrCat("convoy went on after transformers' ", expected.size(), " tokens");
  }
  return absl::StrCat(where, "\n  convoy:       ", absl::StrJoin(actual, ","),
                      "\n  transformers: ", absl::StrJoin(expected, ","));
}

class DefaultModelTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  // One daemon for the suite, started by the first test that needs it (so that a failure to start
  // fails that test, with the daemon's log).
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(DefaultModelPath()))
        << DefaultModelPath() << " is missing: run " << kFetchScript
        << " (scripts/test.sh runs it before the tests)";
    if (daemon_ == nullptr) {
      // fp32 matrix products (see the file comment); one thread, as ctest runs tests side by side.
      daemon_ =
          DaemonProcess::Start(DefaultModelPath(),
                               "kv_cache { block_size: 16 memory_budget_bytes: 67108864 }\n"
                               "executor { device: CPU cpu_threads: 1 cpu_weights: WEIGHTS_F32 }\n"
                               "frontend { drain_timeout_microseconds: 60000000 }\n")
              .release();
    }
    ASSERT_NE(daemon_, nullptr) << "convoyd did not start on " << DefaultModelPath();
    stub_ = daemon_->inference();
  }

  // Sends `request` (greedy, the reference's max_new_tokens, prompt ids returned) through
  // InferStream or Infer and checks the prompt's token ids, the generated ids and their text
  // against `conversation`.
  void ExpectReference(v1::InferRequest request, bool stream, const nlohmann::json& conversation) {
    request.mutable_sampling()->set_max_tokens(Reference()["max_new_tokens"].get<int32_t>());
    request.set_return_prompt_token_ids(true);
    v1::InferResponse response;
    const grpc::Status status = stream ? CallInferStream(*stub_, request, &response)
                                       : CallInfer(*stub_, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();

    const std::vector<int32_t> prompt = Ids(conversation["prompt_token_ids"]);
    EXPECT_EQ(response.usage().prompt_tokens(), static_cast<int32_t>(prompt.size()));
    EXPECT_THAT(response.prompt_token_ids(), ElementsAreArray(prompt))
        << "convoy tokenized the prompt differently from transformers";

    const std::vector<int32_t> generated(response.token_ids().begin(), response.token_ids().end());
    EXPECT_EQ(generated, Ids(conversation["greedy_token_ids"]))
        << Divergence(generated, conversation);
    // transformers' generate stops after the end-of-sequence token; convoy returns it too.
    EXPECT_EQ(response.finish_reason(), conversation["stopped_at_eos"].get<bool>()
                                            ? v1::FINISH_REASON_STOP
                                            : v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(response.text(), conversation["greedy_text"].get<std::string>());
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

DaemonProcess* DefaultModelTest::daemon_ = nullptr;

TEST(DefaultModelReferenceTest, IsForTheFileTheFetchScriptChecks) {
  // The fixture and the fetched file must be the same model: a new default model needs a new
  // reference (scripts/fixtures/default_model_reference.py).
  const std::string script = ReadText(absl::StrCat(TestSourceDir(), "/", kFetchScript));
  std::smatch match;
  ASSERT_TRUE(std::regex_search(script, match, std::regex("\nsha256=([0-9a-f]{64})\n")))
      << kFetchScript << " has no sha256= line";
  EXPECT_EQ(match[1].str(), Reference()["model_sha256"].get<std::string>());
  EXPECT_EQ(Reference()["model_file"].get<std::string>(), kModelFile);
  EXPECT_EQ(Reference()["conversations"].size(), 3u);
}

TEST_F(DefaultModelTest, ChatMessagesStreamTransformersPromptAndGreedyTokens) {
  for (const auto& [name, conversation] : Reference()["conversations"].items()) {
    SCOPED_TRACE(name);
    v1::InferRequest request;
    for (const nlohmann::json& message : conversation["messages"]) {
      v1::ChatMessage* m = request.add_messages();
      m->set_role(message["role"].get<std::string>());
      m->set_content(message["content"].get<std::string>());
    }
    ExpectReference(request, /*stream=*/true, conversation);
  }
}

TEST_F(DefaultModelTest, RenderedPromptTextGivesTransformersPromptAndGreedyTokens) {
  for (const auto& [name, conversation] : Reference()["conversations"].items()) {
    SCOPED_TRACE(name);
    v1::InferRequest request;
    request.set_prompt_text(conversation["prompt_text"].get<std::string>());
    ExpectReference(request, /*stream=*/false, conversation);
  }
}

}  // namespace
}  // namespace convoy::testing
