// The tokenizer and chat template that the Qwen fixtures' GGUF files carry as llama.cpp writes
// them (byte-level BPE, tokenizer.ggml.pre "qwen2", ChatML in tokenizer.chat_template; made by
// scripts/fixtures/family_fixtures.py): ids as Hugging Face `tokenizers` gives them with Qwen2's
// pre-tokenizer, the template rendered as Jinja2 renders it, and <|im_end|>, which ends an
// assistant turn, among the tokens that end generation.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"
#include "text/chat_prompt.h"
#include "text/chat_template.h"

namespace convoy {
namespace {

std::string FixtureDir() { return TestSourceDir() + "/tests/fixtures/families/"; }

class FamilyTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyTokenizerTest, IdsTemplateAndStopsMatchHuggingFace) {
  const nlohmann::json ref =
      nlohmann::json::parse(testing::ReadBytes(FixtureDir() + "tokenizer.json"));
  auto weights = ModelWeights::Load(FixtureDir() + GetParam() + "/model.gguf");
  ASSERT_OK(weights);
  auto tokenizer = LoadModelTokenizer(**weights);
  ASSERT_OK(tokenizer);
  ASSERT_NE(*tokenizer, nullptr);
  EXPECT_EQ((*tokenizer)->vocab_size(), (*weights)->config().vocab_size);

  const auto strings = ref["strings"].get<std::vector<std::string>>();
  const auto ids = ref["ids"].get<std::vector<std::vector<int32_t>>>();
  ASSERT_EQ(strings.size(), ids.size());
  ASSERT_GT(strings.size(), 200u);
  int mismatches = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> got = (*tokenizer)->Encode(strings[i], false);
    ASSERT_OK(got);
    if (*got != ids[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "string " << i << " \"" << strings[i] << "\"";
    }
  }
  EXPECT_EQ(mismatches, 0);

  auto source = LoadModelChatTemplateSource(**weights);
  ASSERT_OK(source);
  ASSERT_TRUE(source->has_value());
  auto chat_template = ChatTemplate::Parse(**source);
  ASSERT_OK(chat_template);
  for (const nlohmann::json& chat : ref["chats"]) {
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : chat["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    absl::StatusOr<std::string> prompt = RenderChatPrompt(*chat_template, **tokenizer, messages);
    ASSERT_OK(prompt);
    EXPECT_EQ(*prompt, chat["rendered"].get<std::string>());
    absl::StatusOr<std::vector<int32_t>> prompt_ids = (*tokenizer)->Encode(*prompt, false);
    ASSERT_OK(prompt_ids);
    EXPECT_EQ(*prompt_ids, chat["ids"].get<std::vector<int32_t>>());
  }

  // The file's eos is <|im_end|>: a chat's answer stops at the end of its turn, and at the end of
  // text (<|endoftext|>, found by its text as llama.cpp finds it).
  const std::vector<int32_t> stops = ModelEndOfGenerationIds(**weights, tokenizer->get());
  for (const char* text : {"<|im_end|>", "<|endoftext|>"}) {
    const int32_t id = ref["special_tokens"][text].get<int32_t>();
    EXPECT_NE(std::find(stops.begin(), stops.end(), id), stops.end()) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FamilyTokenizerTest, ::testing::Values("qwen2", "qwen3"));

}  // namespace
}  // namespace convoy
