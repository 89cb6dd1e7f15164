#include "frontend/request_validation.h"

#include <fstream>
#include <initializer_list>
#include <set>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The engine request PrepareRequest makes, for the tests that only look at it.
absl::StatusOr<Request> ToEngineRequest(const v1::InferRequest& request,
                                        const ServingLimits& limits) {
  absl::StatusOr<PreparedRequest> prepared = PrepareRequest(request, limits);
  if (!prepared.ok()) return prepared.status();
  return prepared->engine_request;
}

ServingLimits Limits() {
  ServingLimits limits;
  limits.model_name = "tiny";
  limits.vocab_size = 100;
  limits.max_context_length = 64;
  limits.priority_levels = 3;
  limits.max_top_logprobs = 5;
  return limits;
}

v1::InferRequest Valid() {
  v1::InferRequest request;
  request.add_prompt_token_ids(1);
  request.add_prompt_token_ids(99);
  return request;
}

TEST(RequestValidationTest, UnsetFieldsTakeTheEngineDefaults) {
  auto request = ToEngineRequest(Valid(), Limits());
  ASSERT_OK(request);
  EXPECT_THAT(request->prompt_tokens, ElementsAre(1, 99));
  EXPECT_EQ(request->max_tokens, 0);  // the server's default
  EXPECT_EQ(request->priority, 0);
  EXPECT_TRUE(request->use_prefix_cache);
  EXPECT_EQ(request->sampling.temperature, 0.0f);
  EXPECT_EQ(request->sampling.top_p, 1.0f);
  EXPECT_EQ(request->sampling.num_top_logprobs, 0);
}

TEST(RequestValidationTest, SetFieldsAreCarriedOver) {
  v1::InferRequest r = Valid();
  r.set_model("tiny");
  r.mutable_sampling()->set_max_tokens(63);
  r.mutable_sampling()->set_temperature(0.7f);
  r.mutable_sampling()->set_top_k(9);
  r.mutable_sampling()->set_top_p(0.5f);
  r.mutable_sampling()->set_seed(42);
  r.mutable_sampling()->add_stop_token_ids(7);
  r.set_priority(3);
  r.set_top_logprobs(5);
  r.set_cache_prompt(false);
  auto request = ToEngineRequest(r, Limits());
  ASSERT_OK(request);
  EXPECT_EQ(request->max_tokens, 63);
  EXPECT_EQ(request->sampling.temperature, 0.7f);
  EXPECT_EQ(request->sampling.top_k, 9);
  EXPECT_EQ(request->sampling.top_p, 0.5f);
  EXPECT_EQ(request->sampling.seed, 42u);
  EXPECT_EQ(request->sampling.num_top_logprobs, 5);
  EXPECT_THAT(request->stop_token_ids, ElementsAre(7));
  EXPECT_EQ(request->priority, 3);
  EXPECT_FALSE(request->use_prefix_cache);
}

TEST(RequestValidationTest, AnUnseededRequestDrawsItsOwnSeed) {
  // Without a seed every request samples on its own; 64 draws of 64 bits never repeat unless the
  // source is broken.
  std::set<uint64_t> seeds;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<Request> request = ToEngineRequest(Valid(), Limits());
    ASSERT_OK(request);
    seeds.insert(request->sampling.seed);
  }
  EXPECT_EQ(seeds.size(), 64u);
  v1::InferRequest seeded = Valid();
  seeded.mutable_sampling()->set_seed(0);
  EXPECT_EQ(ToEngineRequest(seeded, Limits())->sampling.seed, 0u);
}

TEST(RequestValidationTest, MessagesStartWithTheField) {
  struct Case {
    void (*edit)(v1::InferRequest*);
    const char* field;
  };
  const Case cases[] = {
      {[](v1::InferRequest* r) { r->clear_prompt_token_ids(); }, "prompt_token_ids: "},
      {[](v1::InferRequest* r) { r->set_prompt_token_ids(1, 100); }, "prompt_token_ids[1]: "},
      {[](v1::InferRequest* r) {
         for (int i = 0; i < 62; ++i) r->add_prompt_token_ids(3);
       },
       "prompt_token_ids: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_max_tokens(0); },
       "sampling.max_tokens: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_max_tokens(65); },
       "sampling.max_tokens: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_temperature(-1); },
       "sampling.temperature: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_top_k(-2); }, "sampling.top_k: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_top_p(0); }, "sampling.top_p: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->add_stop_token_ids(-1); },
       "sampling.stop_token_ids[0]: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_min_p(1.5f); }, "sampling.min_p: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_presence_penalty(2.5f); },
       "sampling.presence_penalty: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_frequency_penalty(-3.0f); },
       "sampling.frequency_penalty: "},
      {[](v1::InferRequest* r) { r->mutable_sampling()->set_repetition_penalty(0.0f); },
       "sampling.repetition_penalty: "},
      {[](v1::InferRequest* r) { (*r->mutable_sampling()->mutable_logit_bias())[100] = 1.0f; },
       "sampling.logit_bias[100]: "},
      {[](v1::InferRequest* r) { (*r->mutable_sampling()->mutable_logit_bias())[5] = 101.0f; },
       "sampling.logit_bias[5]: "},
      {[](v1::InferRequest* r) { r->set_priority(4); }, "priority: "},
      {[](v1::InferRequest* r) { r->set_top_logprobs(6); }, "top_logprobs: "},
      {[](v1::InferRequest* r) { r->set_model("other"); }, "model: "},
  };
  for (const Case& c : cases) {
    v1::InferRequest r = Valid();
    c.edit(&r);
    EXPECT_THAT(ToEngineRequest(r, Limits()),
                StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.field)));
  }
  v1::InferRequest text;
  text.set_prompt_text("hi");
  EXPECT_THAT(ToEngineRequest(text, Limits()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "prompt_text: this model has no tokenizer; send prompt_token_ids"));
}

TEST(RequestValidationTest, PenaltiesAndLogitBiasBecomeTheRequestsAdjustments) {
  v1::InferRequest r = Valid();
  r.mutable_sampling()->set_presence_penalty(1.0f);
  r.mutable_sampling()->set_repetition_penalty(1.5f);
  r.mutable_sampling()->set_min_p(0.1f);
  (*r.mutable_sampling()->mutable_logit_bias())[7] = 100.0f;
  absl::StatusOr<Request> request = ToEngineRequest(r, Limits());
  ASSERT_OK(request);
  EXPECT_FLOAT_EQ(request->sampling.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(request->sampling.repetition_penalty, 1.5f);
  EXPECT_FLOAT_EQ(request->sampling.min_p, 0.1f);
  ASSERT_NE(request->logit_adjustments, nullptr);
  // The bias and the repetition penalty over the prompt's tokens (1 and 99) are in it.
  std::vector<float> logits(100, 2.0f);
  request->logit_adjustments->Apply(logits.data(), 100);
  EXPECT_FLOAT_EQ(logits[7], 102.0f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f / 1.5f);
  EXPECT_FLOAT_EQ(logits[99], 2.0f / 1.5f);
  EXPECT_FLOAT_EQ(logits[2], 2.0f);
  // None of it asked for: no adjustments.
  absl::StatusOr<Request> plain = ToEngineRequest(Valid(), Limits());
  ASSERT_OK(plain);
  EXPECT_EQ(plain->logit_adjustments, nullptr);
  v1::InferRequest too_many = Valid();
  ServingLimits big = Limits();
  big.vocab_size = 5000;
  for (int32_t t = 0; t < 1100; ++t) (*too_many.mutable_sampling()->mutable_logit_bias())[t] = 1;
  EXPECT_THAT(ToEngineRequest(too_many, big),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sampling.logit_bias: 1100 entries; at most 1024 are allowed"));
}

// An executor that does not apply them refuses each, naming the field, before anything is queued.
TEST(RequestValidationTest, PenaltiesAreRefusedWhereTheExecutorCannotApplyThem) {
  ServingLimits limits = Limits();
  limits.no_extended_sampling =
      absl::UnimplementedError("the CUDA executor does not apply min_p, penalties or logit_bias");
  v1::InferRequest r = Valid();
  r.mutable_sampling()->set_frequency_penalty(0.5f);
  EXPECT_THAT(ToEngineRequest(r, limits),
              StatusIs(absl::StatusCode::kUnimplemented,
                       StartsWith("sampling.frequency_penalty: the CUDA executor")));
  r = Valid();
  (*r.mutable_sampling()->mutable_logit_bias())[3] = -100.0f;
  EXPECT_THAT(ToEngineRequest(r, limits),
              StatusIs(absl::StatusCode::kUnimplemented, StartsWith("sampling.logit_bias: ")));
  // Neutral values ask for nothing and pass.
  r = Valid();
  r.mutable_sampling()->set_presence_penalty(0.0f);
  r.mutable_sampling()->set_repetition_penalty(1.0f);
  EXPECT_OK(ToEngineRequest(r, limits));
}

// Text prompts through SmolLM2's tokenizer (tests/fixtures/tokenizer, written from Hugging Face's).
class TextPromptTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    HuggingFaceTokenizerExtras extras;  // as SmolLM2's tokenizer_config.json names them
    extras.bos_token = "<|im_start|>";
    extras.eos_token = "<|im_end|>";
    auto loaded = Tokenizer::FromHuggingFaceJsonFile(
        TestSourceDir() + "/tests/fixtures/tokenizer/smollm2/tokenizer.json", extras);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->release();
    std::ifstream in(TestSourceDir() + "/tests/fixtures/chat_template/smollm2.json");
    const nlohmann::json fixture = nlohmann::json::parse(in);
    auto parsed = ChatTemplate::Parse(fixture["template"].get<std::string>());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    chat_template_ = new ChatTemplate(*std::move(parsed));
  }
  ServingLimits TextLimits() const {
    ServingLimits limits = Limits();
    limits.vocab_size = 49152;
    limits.tokenizer = tokenizer_;
    return limits;
  }
  ServingLimits ChatLimits() const {
    ServingLimits limits = TextLimits();
    limits.max_context_length = 8192;
    limits.chat_template = chat_template_;
    return limits;
  }
  static v1::InferRequest Chat(std::initializer_list<std::pair<const char*, const char*>> turns) {
    v1::InferRequest r;
    for (const auto& [role, content] : turns) {
      v1::ChatMessage* m = r.add_messages();
      m->set_role(role);
      m->set_content(content);
    }
    return r;
  }
  static const Tokenizer* tokenizer_;
  static const ChatTemplate* chat_template_;
};
const Tokenizer* TextPromptTest::tokenizer_ = nullptr;
const ChatTemplate* TextPromptTest::chat_template_ = nullptr;

TEST_F(TextPromptTest, TextIsTokenizedByTheModelsTokenizer) {
  v1::InferRequest r;
  r.set_prompt_text("Hello, world!");
  absl::StatusOr<Request> request = ToEngineRequest(r, TextLimits());
  ASSERT_OK(request);
  EXPECT_EQ(request->prompt_tokens, *tokenizer_->Encode("Hello, world!", true));
  EXPECT_THAT(request->prompt_tokens, ElementsAre(19556, 28, 905, 17));
  // It stops at the tokenizer's end of sequence; a prompt of ids does not.
  EXPECT_THAT(request->stop_token_ids, ElementsAre(2));
  v1::InferRequest ids;
  ids.add_prompt_token_ids(19556);
  EXPECT_THAT(ToEngineRequest(ids, TextLimits())->stop_token_ids, ::testing::IsEmpty());
}

TEST_F(TextPromptTest, TextStopsAtEveryEndOfGenerationTokenOfTheModel) {
  // As Llama 3's config lists <|end_of_text|>, <|eot_id|> and <|eom_id|>: every one ends it,
  // with the tokenizer's own end of sequence, each once.
  ServingLimits limits = TextLimits();
  limits.end_of_generation_ids = {0, 2, 7};
  v1::InferRequest r;
  r.set_prompt_text("Hello, world!");
  r.mutable_sampling()->add_stop_token_ids(7);
  absl::StatusOr<Request> request = ToEngineRequest(r, limits);
  ASSERT_OK(request);
  EXPECT_THAT(request->stop_token_ids, ElementsAre(7, 0, 2));
}

TEST_F(TextPromptTest, ATokenOutsideTheModelsVocabularyIsTheRequestsError) {
  // The tokenizer knows 49,152 tokens; a model with fewer embeddings cannot take the last ones.
  ServingLimits limits = TextLimits();
  limits.vocab_size = 1000;
  v1::InferRequest r;
  r.set_prompt_text("Hello, world!");  // 19556, 28, 905, 17
  EXPECT_THAT(ToEngineRequest(r, limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("prompt_text: "), HasSubstr("token 19556 (at position 0)"),
                             HasSubstr("vocabulary [0, 1000)"))));
  EXPECT_THAT(ToEngineRequest(Chat({{"user", "Hello"}}),
                              [&] {
                                ServingLimits chat = ChatLimits();
                                chat.vocab_size = 1000;
                                return chat;
                              }()),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("messages: ")));
}

TEST_F(TextPromptTest, BadTextPromptsNameTheField) {
  v1::InferRequest both;
  both.set_prompt_text("hi");
  both.add_prompt_token_ids(1);
  EXPECT_THAT(ToEngineRequest(both, TextLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "prompt_text: set exactly one of prompt_token_ids, prompt_text and "
                       "messages"));
  v1::InferRequest invalid;
  invalid.set_prompt_text("ok \xC3");
  EXPECT_THAT(ToEngineRequest(invalid, TextLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("prompt_text: "), HasSubstr("byte offset 3"))));
  v1::InferRequest too_long;
  too_long.set_prompt_text(std::string(200, 'a') + " b c d e f g h i j k l m n o p q r s t u v w");
  EXPECT_THAT(ToEngineRequest(too_long, TextLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("prompt_text: the prompt has "), HasSubstr("at most 63"))));
}

TEST(RequestValidationTest, APromptOfContextMinusOneFits) {
  v1::InferRequest r;
  for (int i = 0; i < 63; ++i) r.add_prompt_token_ids(i);
  EXPECT_OK(ToEngineRequest(r, Limits()));
  r.add_prompt_token_ids(0);
  EXPECT_THAT(ToEngineRequest(r, Limits()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 63")));
}

TEST(RequestValidationTest, StopTokenIdsAreCappedByTheConfig) {
  ServingLimits limits = Limits();
  limits.max_stop_token_ids = 4;
  v1::InferRequest r = Valid();
  for (int i = 0; i < 4; ++i) r.mutable_sampling()->add_stop_token_ids(i);
  EXPECT_OK(ToEngineRequest(r, limits));
  r.mutable_sampling()->add_stop_token_ids(5);
  EXPECT_THAT(ToEngineRequest(r, limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sampling.stop_token_ids: 5 ids; at most 4 are allowed "
                       "(request_limits.max_stop_token_ids)"));
}

TEST(RequestValidationTest, AnUnknownModelNameIsQuotedShortAndEscaped) {
  v1::InferRequest r = Valid();
  r.set_model(std::string(1 << 20, 'x'));
  absl::StatusOr<Request> refused = ToEngineRequest(r, Limits());
  ASSERT_FALSE(refused.ok());
  EXPECT_LT(refused.status().message().size(), 200u);
  EXPECT_THAT(refused.status().message(), HasSubstr("(1048576 bytes)"));
  r.set_model("a\nb\x01");
  EXPECT_THAT(ToEngineRequest(r, Limits()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'a\\nb\\x01'")));
}

TEST(RequestValidationTest, HugeTimeoutsNeverWrapIntoThePast) {
  const absl::Time arrival = absl::FromUnixSeconds(1000000);
  EXPECT_EQ(RequestDeadline(absl::InfiniteFuture(), 0, arrival), absl::InfiniteFuture());
  EXPECT_EQ(RequestDeadline(absl::InfiniteFuture(), 5, arrival), arrival + absl::Microseconds(5));
  for (uint64_t huge : {uint64_t{1} << 63, ~uint64_t{0}, (uint64_t{1} << 63) - 1}) {
    const absl::Time deadline = RequestDeadline(absl::InfiniteFuture(), huge, arrival);
    EXPECT_GT(deadline, arrival + absl::Hours(24 * 364)) << huge;
  }
  // The call's own deadline wins when it is earlier.
  EXPECT_EQ(RequestDeadline(arrival + absl::Seconds(1), ~uint64_t{0}, arrival),
            arrival + absl::Seconds(1));
}

}  // namespace
}  // namespace convoy

namespace convoy {
namespace {

TEST_F(TextPromptTest, MessagesAreRenderedByTheChatTemplateAndTokenizedAsTheyAre) {
  absl::StatusOr<Request> request =
      ToEngineRequest(Chat({{"system", "Be brief."}, {"user", "Hi!"}}), ChatLimits());
  ASSERT_OK(request);
  // As transformers' apply_chat_template(add_generation_prompt=True, tokenize=True) gives them: no
  // BOS added to what the template wrote.
  const std::string rendered =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(request->prompt_tokens, *tokenizer_->Encode(rendered, /*add_special=*/false));
  EXPECT_EQ(request->prompt_tokens.front(), 1);  // <|im_start|>
  EXPECT_THAT(request->stop_token_ids, ElementsAre(2));
  // SmolLM2's template adds its own system message when there is none.
  absl::StatusOr<Request> no_system = ToEngineRequest(Chat({{"user", "Hi!"}}), ChatLimits());
  ASSERT_OK(no_system);
  EXPECT_GT(no_system->prompt_tokens.size(), request->prompt_tokens.size());
}

TEST_F(TextPromptTest, BadMessagesNameTheField) {
  EXPECT_THAT(ToEngineRequest(Chat({{"user", "a"}, {"wizard", "b"}}), ChatLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "messages[1].role: unknown role 'wizard'; expected system, user, "
                       "assistant or tool"));
  EXPECT_THAT(ToEngineRequest(Chat({{"user", "ok \xC3"}}), ChatLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("messages[0].content: "), HasSubstr("byte offset 3"))));
  v1::InferRequest both = Chat({{"user", "a"}});
  both.set_prompt_text("b");
  EXPECT_THAT(
      ToEngineRequest(both, ChatLimits()),
      StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("messages: set exactly one")));
  // Without a chat template the reason is given.
  ServingLimits no_template = TextLimits();
  no_template.no_chat_template_reason = "the model's chat template could not be parsed: line 1";
  EXPECT_THAT(ToEngineRequest(Chat({{"user", "a"}}), no_template),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("messages: the model's chat template could not be parsed")));
  // A conversation longer than the context after rendering.
  ServingLimits small = ChatLimits();
  small.max_context_length = 16;
  EXPECT_THAT(ToEngineRequest(Chat({{"user", "a"}}), small),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("messages: the prompt has")));
}

TEST_F(TextPromptTest, StopStringsAreCheckedAndKeptForTheOutputPath) {
  v1::InferRequest r;
  r.set_prompt_text("Hello");
  r.mutable_sampling()->add_stop("\n\n");
  r.mutable_sampling()->add_stop("END");
  absl::StatusOr<PreparedRequest> prepared = PrepareRequest(r, TextLimits());
  ASSERT_OK(prepared);
  EXPECT_THAT(prepared->stop_strings, ElementsAre("\n\n", "END"));

  v1::InferRequest empty = r;
  empty.mutable_sampling()->add_stop("");
  EXPECT_THAT(PrepareRequest(empty, TextLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sampling.stop[2]: a stop string may not be empty"));
  v1::InferRequest invalid = r;
  invalid.mutable_sampling()->add_stop("\xFF");
  EXPECT_THAT(PrepareRequest(invalid, TextLimits()),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("sampling.stop[2]: ")));
  v1::InferRequest many = r;
  const std::string x = "x";
  for (int i = 0; i < 20; ++i) *many.mutable_sampling()->add_stop() = x;
  EXPECT_THAT(
      PrepareRequest(many, TextLimits()),
      StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("sampling.stop: 22 strings")));
  // Stop strings need text out.
  v1::InferRequest ids;
  ids.add_prompt_token_ids(1);
  ids.mutable_sampling()->add_stop("x");
  EXPECT_THAT(PrepareRequest(ids, Limits()),
              StatusIs(absl::StatusCode::kFailedPrecondition, StartsWith("sampling.stop: ")));
}

}  // namespace
}  // namespace convoy
