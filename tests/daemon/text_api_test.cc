// Text in and out through convoyd: chat messages rendered by the model's chat template, stop
// strings, and the errors of both. The model is a random-weight Llama directory with SmolLM2's
// tokenizer (tests/fixtures/tokenizer) and SmolLM2's chat template in its tokenizer_config.json,
// so its answers are random text: the tests compare the server with itself across its APIs
// (messages against the text the template makes of them; a stop string against the output
// without it), never with fixed strings.
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace convoy::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A random model with SmolLM2's vocabulary, tokenizer and chat template.
const std::string& ModelDir() {
  static const std::string* dir =
      new std::string(WriteSmolLm2VocabModel("smollm2_vocab", 512, /*chat_template=*/true));
  return *dir;
}

class TextApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = DaemonProcess::Start(ModelDir(), DefaultTestConfig()).release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->inference();
  }

  static v1::InferRequest Chat(std::vector<std::pair<std::string, std::string>> turns,
                               int32_t max_tokens) {
    v1::InferRequest r;
    for (const auto& [role, content] : turns) {
      v1::ChatMessage* m = r.add_messages();
      m->set_role(role);
      m->set_content(content);
    }
    r.mutable_sampling()->set_max_tokens(max_tokens);
    r.set_return_prompt_token_ids(true);
    return r;
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};
DaemonProcess* TextApiTest::daemon_ = nullptr;

TEST_F(TextApiTest, ChatMessagesAnswerAsTheTextTheTemplateMakesOfThem) {
  const v1::InferRequest chat = Chat({{"system", "You are terse."},
                                      {"user", "Name a colour."},
                                      {"assistant", "Blue."},
                                      {"user", "Another one?"}},
                                     24);
  v1::InferRequest text;
  text.set_prompt_text(
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n"
      "<|im_start|>assistant\nBlue.<|im_end|>\n<|im_start|>user\nAnother one?<|im_end|>\n"
      "<|im_start|>assistant\n");
  text.mutable_sampling()->set_max_tokens(24);
  text.set_return_prompt_token_ids(true);

  v1::InferResponse from_chat, from_text, streamed;
  ASSERT_TRUE(CallInfer(*stub_, chat, &from_chat).ok());
  ASSERT_TRUE(CallInfer(*stub_, text, &from_text).ok());
  ASSERT_TRUE(CallInferStream(*stub_, chat, &streamed).ok());
  EXPECT_THAT(from_chat.prompt_token_ids(), ElementsAreArray(from_text.prompt_token_ids()));
  EXPECT_EQ(from_chat.prompt_token_ids(0), 1);  // <|im_start|>, no BOS added before it
  EXPECT_EQ(from_chat.usage().prompt_tokens(), from_chat.prompt_token_ids_size());
  EXPECT_THAT(from_chat.token_ids(), ElementsAreArray(from_text.token_ids()));
  EXPECT_EQ(from_chat.text(), from_text.text());
  EXPECT_THAT(streamed.token_ids(), ElementsAreArray(from_chat.token_ids()));
  EXPECT_EQ(streamed.text(), from_chat.text());
  EXPECT_THAT(streamed.prompt_token_ids(), ElementsAreArray(from_chat.prompt_token_ids()));
}

TEST_F(TextApiTest, AStopStringEndsTheTextJustBeforeIt) {
  v1::InferRequest request = Chat({{"user", "Tell me a story."}}, 48);
  v1::InferResponse free_run;
  ASSERT_TRUE(CallInfer(*stub_, request, &free_run).ok());
  const std::string& text = free_run.text();
  ASSERT_GE(text.size(), 12u) << "the random model's answer is too short to cut";
  // A stop string from the middle of the answer, starting on a character boundary.
  size_t at = text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  size_t len = 1;
  while (at + len < text.size() && len < 3) ++len;
  while (at + len < text.size() && (static_cast<unsigned char>(text[at + len]) & 0xC0) == 0x80) {
    ++len;
  }
  const std::string stop = text.substr(at, len);
  const std::string expected = text.substr(0, text.find(stop));
  SCOPED_TRACE("stop string '" + stop + "' in '" + text + "'");

  request.mutable_sampling()->add_stop(stop);
  request.mutable_sampling()->add_stop("a stop string that never comes");
  v1::InferResponse unary, streamed;
  ASSERT_TRUE(CallInfer(*stub_, request, &unary).ok());
  ASSERT_TRUE(CallInferStream(*stub_, request, &streamed).ok());
  for (const v1::InferResponse* r : {&unary, &streamed}) {
    EXPECT_EQ(r->text(), expected);
    EXPECT_EQ(r->finish_reason(), v1::FINISH_REASON_STOP);
    // The tokens up to the one that completed the stop string.
    ASSERT_LE(r->token_ids_size(), free_run.token_ids_size());
    EXPECT_THAT(r->token_ids(),
                ElementsAreArray(free_run.token_ids().begin(),
                                 free_run.token_ids().begin() + r->token_ids_size()));
    EXPECT_LT(r->token_ids_size(), free_run.token_ids_size());
    EXPECT_EQ(r->usage().completion_tokens(), r->token_ids_size());
  }
}

TEST_F(TextApiTest, BadChatRequestsNameTheFieldAndTheServerServesOn) {
  struct Case {
    std::string name;
    v1::InferRequest request;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({"unknown role", Chat({{"user", "hi"}, {"wizard", "abracadabra"}}, 4),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "messages[1].role: unknown role 'wizard'; expected system, user, assistant or "
                   "tool"});
  v1::InferRequest empty_stop = Chat({{"user", "hi"}}, 4);
  empty_stop.mutable_sampling()->add_stop("");
  cases.push_back({"empty stop string", empty_stop, grpc::StatusCode::INVALID_ARGUMENT,
                   "sampling.stop[0]: a stop string may not be empty"});
  v1::InferRequest both = Chat({{"user", "hi"}}, 4);
  both.set_prompt_text("hi");
  cases.push_back({"messages and text", both, grpc::StatusCode::INVALID_ARGUMENT,
                   "messages: set exactly one of prompt_token_ids, prompt_text and messages"});
  cases.push_back({"a conversation over the context",
                   Chat({{"user", std::string(4000, 'x') + " y z"}}, 4),
                   grpc::StatusCode::INVALID_ARGUMENT, "messages: the prompt has"});
  v1::InferRequest empty;
  empty.mutable_sampling()->set_max_tokens(4);
  cases.push_back({"an empty prompt", empty, grpc::StatusCode::INVALID_ARGUMENT,
                   "prompt_token_ids: the prompt is empty"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::InferResponse response;
    const grpc::Status status = CallInfer(*stub_, c.request, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  v1::InferResponse fine;
  EXPECT_TRUE(CallInfer(*stub_, Chat({{"user", "hi"}}, 4), &fine).ok());
  EXPECT_EQ(fine.usage().completion_tokens(), fine.token_ids_size());
}

// The end-of-turn tokens of a real vocabulary end generation through the server. The family
// fixtures (scripts/fixtures/family_fixtures.py) carry a byte-level BPE vocabulary with Qwen's
// special tokens and ChatML template, as llama.cpp writes them into GGUF; the ids come from the
// Hugging Face tokenizer that made them (tests/fixtures/families/tokenizer.json). A logit bias
// forces the token: <|im_end|> (the template's end of turn) and <|endoftext|> stop with nothing
// in the text; <|im_start|>, special but no stop, is generated to the length limit and left out
// of the text.
class FamilyStopTokenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyStopTokenTest, EndOfTurnTokensOfItsVocabularyStopAChat) {
  const std::string fixtures = TestSourceDir() + "/tests/fixtures/families/";
  const nlohmann::json special =
      nlohmann::json::parse(ReadBytes(fixtures + "tokenizer.json"))["special_tokens"];
  std::unique_ptr<DaemonProcess> daemon =
      DaemonProcess::Start(fixtures + GetParam() + "/model.gguf", DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  std::unique_ptr<v1::Inference::Stub> stub = daemon->inference();
  auto forced = [&](const std::string& token) {
    v1::InferRequest request;
    v1::ChatMessage* m = request.add_messages();
    m->set_role("user");
    m->set_content("Say something.");
    request.mutable_sampling()->set_max_tokens(6);
    (*request.mutable_sampling()->mutable_logit_bias())[special.at(token).get<int32_t>()] = 100;
    v1::InferResponse response;
    const grpc::Status status = CallInfer(*stub, request, &response);
    EXPECT_TRUE(status.ok()) << token << ": " << status.error_message();
    return response;
  };
  for (const std::string stop : {"<|im_end|>", "<|endoftext|>"}) {
    SCOPED_TRACE(stop);
    const v1::InferResponse response = forced(stop);
    EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_STOP);
    EXPECT_EQ(response.text(), "");
    EXPECT_LE(response.token_ids_size(), 1);
  }
  const v1::InferResponse start = forced("<|im_start|>");
  EXPECT_EQ(start.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(start.token_ids_size(), 6);
  EXPECT_EQ(start.text(), "");
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyStopTokenTest,
                         ::testing::Values("qwen2", "qwen3", "mistral", "gemma3", "phi3"));

}  // namespace
}  // namespace convoy::testing
