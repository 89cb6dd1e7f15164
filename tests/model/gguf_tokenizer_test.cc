// The tokenizer a GGUF file carries, read into a TokenizerSpec and built by the text module: with
// SmolLM2's vocabulary written into a GGUF file the way llama.cpp's converter writes it, the ids
// are Hugging Face tokenizers' (fixtures of scripts/fixtures/tokenizer_fixtures.py). Bad metadata
// gives an error naming the key.
#include "model/gguf_tokenizer.h"

#include <string>
#include <vector>

#include "gguf_test_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace convoy {
namespace {

using ::convoy::testing::GgufBuilder;
using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::convoy::testing::WriteBytes;
using ::testing::HasSubstr;

nlohmann::json Fixture(const std::string& name) {
  return nlohmann::json::parse(ReadBytes(TestSourceDir() + "/tests/fixtures/tokenizer/" + name));
}

// SmolLM2's tokenizer metadata as llama.cpp writes it: tokens in id order, merges, token types,
// special ids, and the chat template.
GgufBuilder SmolLm2Metadata() {
  const nlohmann::json tokenizer = Fixture("smollm2/tokenizer.json");
  const nlohmann::json spec = Fixture("smollm2/gguf_spec.json");
  std::vector<std::string> tokens(tokenizer["model"]["vocab"].size());
  for (const auto& [token, id] : tokenizer["model"]["vocab"].items()) {
    tokens.at(id.get<size_t>()) = token;
  }
  std::vector<std::string> merges;
  for (const auto& merge : tokenizer["model"]["merges"]) {
    merges.push_back(merge.is_string()
                         ? merge.get<std::string>()
                         : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  }
  GgufBuilder b;
  b.String("general.architecture", "llama")
      .String("tokenizer.ggml.model", spec["model"].get<std::string>())
      .String("tokenizer.ggml.pre", spec["pre"].get<std::string>())
      .StringArray("tokenizer.ggml.tokens", tokens)
      .I32Array("tokenizer.ggml.token_type", spec["token_types"].get<std::vector<int32_t>>())
      .StringArray("tokenizer.ggml.merges", merges)
      .U32("tokenizer.ggml.bos_token_id", spec["bos_id"].get<uint32_t>())
      .U32("tokenizer.ggml.eos_token_id", spec["eos_id"].get<uint32_t>())
      .U32("tokenizer.ggml.unknown_token_id", spec["unk_id"].get<uint32_t>())
      .U32("tokenizer.ggml.padding_token_id", spec["pad_id"].get<uint32_t>())
      .Bool("tokenizer.ggml.add_bos_token", spec["add_bos"].get<bool>())
      .String("tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  return b;
}

absl::StatusOr<std::unique_ptr<GgufFile>> Open(const TestDir& dir, const GgufBuilder& b) {
  WriteBytes(dir.Join("t.gguf"), b.Build());
  return GgufFile::Open(dir.Join("t.gguf"));
}

TEST(GgufTokenizerTest, SmolLm2FromGgufMetadataGivesHuggingFacesIds) {
  TestDir dir;
  auto file = Open(dir, SmolLm2Metadata());
  ASSERT_OK(file);
  auto spec = TokenizerSpecFromGguf(**file);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->model, "gpt2");
  EXPECT_EQ(spec->pre, "smollm");
  EXPECT_EQ(spec->tokens.size(), 49152u);
  EXPECT_EQ(spec->bos_id, 1);
  EXPECT_EQ(spec->eos_id, 2);
  EXPECT_EQ(spec->add_bos, false);
  auto tokenizer = Tokenizer::FromSpec(*spec);
  ASSERT_OK(tokenizer);
  const nlohmann::json strings = Fixture("strings.json");
  const nlohmann::json cases = Fixture("smollm2/ids.json");
  ASSERT_EQ(strings.size(), cases.size());
  int exact = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    auto ids = (*tokenizer)->Encode(strings[i].get<std::string>(), /*add_special=*/false);
    ASSERT_TRUE(ids.ok()) << i << ": " << ids.status();
    if (*ids == cases[i]["ids"].get<std::vector<int32_t>>()) ++exact;
  }
  EXPECT_EQ(exact, static_cast<int>(strings.size()));
  auto chat_template = ChatTemplateFromGguf(**file);
  ASSERT_OK(chat_template);
  EXPECT_THAT(chat_template->value_or(""), HasSubstr("for m in messages"));
}

TEST(GgufTokenizerTest, BadMetadataNamesTheKey) {
  TestDir dir;
  {
    GgufBuilder b = SmolLm2Metadata();
    b.Remove("tokenizer.ggml.model");
    auto file = Open(dir, b);
    ASSERT_OK(file);
    EXPECT_THAT(TokenizerSpecFromGguf(**file),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("tokenizer.ggml.model")));
  }
  {
    GgufBuilder b = SmolLm2Metadata();
    b.I32Array("tokenizer.ggml.token_type", {1, 1, 1});
    auto file = Open(dir, b);
    ASSERT_OK(file);
    EXPECT_THAT(TokenizerSpecFromGguf(**file),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("tokenizer.ggml.token_type: expected 49152 values (one per "
                                   "token), found 3")));
  }
  {
    GgufBuilder b = SmolLm2Metadata();
    b.String("tokenizer.ggml.tokens", "not an array");
    auto file = Open(dir, b);
    ASSERT_OK(file);
    EXPECT_THAT(TokenizerSpecFromGguf(**file),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("tokenizer.ggml.tokens: expected an array of strings")));
  }
  {
    GgufBuilder b = SmolLm2Metadata();
    b.String("tokenizer.ggml.bos_token_id", "1");
    auto file = Open(dir, b);
    ASSERT_OK(file);
    EXPECT_THAT(TokenizerSpecFromGguf(**file),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("tokenizer.ggml.bos_token_id: expected a token id")));
  }
  {
    GgufBuilder b = SmolLm2Metadata();
    b.U32("tokenizer.chat_template", 7);
    auto file = Open(dir, b);
    ASSERT_OK(file);
    EXPECT_THAT(ChatTemplateFromGguf(**file),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("tokenizer.chat_template: expected a string")));
  }
}

}  // namespace
}  // namespace convoy
