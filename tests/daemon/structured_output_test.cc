// Structured output through convoyd, on a random model with SmolLM2's tokenizer (a random model
// is the hardest case: only the constraint keeps its output in shape): choices, a regular
// expression, a GBNF grammar and a JSON schema, greedy and sampled, unary and streamed, through
// the gRPC API and the `convoy` client's flags; refusals that name the field and the place; a
// model without a tokenizer refuses constraints; the server keeps serving throughout.
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"
#include "test_models.h"

namespace convoy::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ =
        DaemonProcess::Start(WriteSmolLm2VocabModel("structured", 1024, /*chat_template=*/true),
                             DefaultTestConfig())
            .release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->inference();
  }

  // A text prompt, `max_tokens`, sampled when `temperature` > 0.
  static v1::InferRequest Prompt(float temperature, uint64_t seed, int32_t max_tokens = 200) {
    v1::InferRequest request;
    request.set_prompt_text("Answer the question.");
    request.mutable_sampling()->set_max_tokens(max_tokens);
    request.mutable_sampling()->set_temperature(temperature);
    request.mutable_sampling()->set_seed(seed);
    return request;
  }

  // The text of `request`'s answer, unary and streamed (which must agree), finished by the
  // constraint.
  std::string Answer(const v1::InferRequest& request) {
    v1::InferResponse unary, streamed;
    const grpc::Status a = CallInfer(*stub_, request, &unary);
    const grpc::Status b = CallInferStream(*stub_, request, &streamed);
    EXPECT_TRUE(a.ok()) << a.error_message();
    EXPECT_TRUE(b.ok()) << b.error_message();
    EXPECT_EQ(unary.text(), streamed.text());
    EXPECT_EQ(unary.finish_reason(), v1::FINISH_REASON_STOP) << unary.text();
    return unary.text();
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};
DaemonProcess* StructuredOutputTest::daemon_ = nullptr;

TEST_F(StructuredOutputTest, ChoicesRegexAndGrammarHoldGreedyAndSampledAnswers) {
  for (float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(absl::StrCat("temperature ", temperature, " seed ", seed));
      v1::InferRequest choices = Prompt(temperature, seed);
      for (const char* c : {"yes", "no", "maybe later"}) {
        choices.mutable_constraint()->mutable_choices()->add_choices(c);
      }
      EXPECT_THAT(Answer(choices), AnyOf("yes", "no", "maybe later"));

      v1::InferRequest regex = Prompt(temperature, seed);
      regex.mutable_constraint()->set_regex("\\+1 [0-9]{3}-[0-9]{4}");
      const std::string phone = Answer(regex);
      EXPECT_TRUE(std::regex_match(phone, std::regex("\\+1 [0-9]{3}-[0-9]{4}"))) << phone;

      v1::InferRequest grammar = Prompt(temperature, seed);
      grammar.mutable_constraint()->set_grammar(
          "root ::= \"Answer: \" letter (\", \" letter)? \".\"\nletter ::= [A-D]\n");
      const std::string letters = Answer(grammar);
      EXPECT_TRUE(std::regex_match(letters, std::regex("Answer: [A-D](, [A-D])?\\."))) << letters;
    }
  }
}

TEST_F(StructuredOutputTest, JsonSchemaAnswersParseAndHoldTheSchema) {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": false
  })";
  for (float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed : {4u, 5u}) {
      SCOPED_TRACE(absl::StrCat("temperature ", temperature, " seed ", seed));
      v1::InferRequest request = Prompt(temperature, seed, 400);
      request.mutable_constraint()->set_json_schema(schema);
      const std::string text = Answer(request);
      const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(value.is_object()) << text;
      EXPECT_EQ(value.size(), 3u) << text;
      ASSERT_TRUE(value["name"].is_string()) << text;
      EXPECT_LE(value["name"].get<std::string>().size(), 12u)
          << text;  // ASCII or not: bytes >= chars
      ASSERT_TRUE(value["age"].is_number_integer()) << text;
      EXPECT_THAT(value["age"].get<int>(), ::testing::AllOf(::testing::Ge(0), ::testing::Le(120)));
      ASSERT_TRUE(value["tags"].is_array()) << text;
      EXPECT_LE(value["tags"].size(), 3u) << text;
    }
  }
  // json_object: any object.
  v1::InferRequest object = Prompt(0.0f, 1, 400);
  object.mutable_constraint()->set_json_object(true);
  v1::InferResponse response;
  ASSERT_TRUE(CallInfer(*stub_, object, &response).ok());
  if (response.finish_reason() == v1::FINISH_REASON_STOP) {
    EXPECT_TRUE(nlohmann::json::parse(response.text(), nullptr, false).is_object())
        << response.text();
  } else {
    // Cut at max_tokens: still the start of an object.
    EXPECT_EQ(response.text().front(), '{') << response.text();
  }
}

TEST_F(StructuredOutputTest, BadConstraintsAreRefusedNamingWhatAndWhere) {
  struct Case {
    v1::OutputConstraint constraint;
    std::string message;
  };
  std::vector<Case> cases(4);
  cases[0].constraint.set_grammar("root ::= \"a\" undefined_rule\n");
  cases[0].message = "constraint.grammar";
  cases[1].constraint.set_json_schema(R"({"type": "string", "multipleOf": 3})");
  cases[1].message = "multipleOf";
  cases[2].constraint.set_regex("(unclosed");
  cases[2].message = "constraint.regex";
  cases[3].constraint.set_json_schema("{not json");
  cases[3].message = "constraint.json_schema";
  for (const Case& c : cases) {
    v1::InferRequest request = Prompt(0.0f, 1);
    *request.mutable_constraint() = c.constraint;
    v1::InferResponse response;
    const grpc::Status status = CallInfer(*stub_, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  v1::InferRequest fine = Prompt(0.0f, 1, 4);
  v1::InferResponse response;
  EXPECT_TRUE(CallInfer(*stub_, fine, &response).ok());
}

TEST_F(StructuredOutputTest, TheClientsFlagsAskForStructuredOutput) {
  const std::string client = absl::StrCat(CONVOY_CLIENT_PATH, " generate --addr ",
                                          daemon_->address(), " --prompt hello --json ");
  const ProcessResult choices = Execute(client + "--choices 'red|green|blue'", false);
  ASSERT_EQ(choices.exit_code, 0) << choices.out;
  EXPECT_THAT(JsonLines(choices.out)[0]["text"].get<std::string>(), AnyOf("red", "green", "blue"));

  const std::string schema_file = ProcessDir("convoy_structured_schema") + "/schema.json";
  std::ofstream(schema_file) << R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                   "required": ["ok"], "additionalProperties": false})";
  const ProcessResult json = Execute(client + "--json-schema " + schema_file, false);
  ASSERT_EQ(json.exit_code, 0) << json.out;
  const nlohmann::json value =
      nlohmann::json::parse(JsonLines(json.out)[0]["text"].get<std::string>());
  EXPECT_TRUE(value["ok"].is_boolean());

  EXPECT_EQ(Execute(client + "--regex a --choices b", false).exit_code, 2);
}

TEST(StructuredOutputWithoutTokenizerTest, IsRefusedAsAPrecondition) {
  std::unique_ptr<DaemonProcess> daemon =
      DaemonProcess::Start(WriteTestModel("no_tokenizer", TinyModelConfig()), DefaultTestConfig());
  ASSERT_NE(daemon, nullptr);
  v1::InferRequest request = MakeRequest({1, 2, 3}, 4);
  request.mutable_constraint()->set_regex("[a-z]+");
  v1::InferResponse response;
  const grpc::Status status = CallInfer(*daemon->inference(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("needs a model with a tokenizer"));
}

}  // namespace
}  // namespace convoy::testing
