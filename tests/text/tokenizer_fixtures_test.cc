// Tokenizers against Hugging Face tokenizers: every string of tests/fixtures/tokenizer/strings.json
// must encode to the ids `tokenizers` gave, and those ids must decode (whole and streamed) to the
// text it gave. The fixtures come from scripts/fixtures/tokenizer_fixtures.py.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_paths.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

namespace convoy {
namespace {

using Json = nlohmann::json;

const std::string kFixtures = TestSourceDir() + "/tests/fixtures/tokenizer/";

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << path;
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

Json ReadJson(const std::string& name) { return Json::parse(ReadFile(kFixtures + name)); }

const std::vector<std::string>& Strings() {
  static const auto* strings = new std::vector<std::string>(ReadJson("strings.json"));
  return *strings;
}

// The GGUF view of a tokenizer. SmolLM2's spec leaves its tokens and merges out (they would double
// the fixture); they are tokenizer.json's vocabulary in id order and its merges.
TokenizerSpec SpecFromJson(const Json& json, const Json* tokenizer_json) {
  TokenizerSpec spec;
  spec.model = json.at("model").get<std::string>();
  spec.pre = json.value("pre", "");
  if (json.contains("tokens")) {
    spec.tokens = json.at("tokens").get<std::vector<std::string>>();
  } else {
    const Json& vocab = tokenizer_json->at("model").at("vocab");
    spec.tokens.resize(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      spec.tokens.at(it.value().get<size_t>()) = it.key();
    }
    spec.merges = tokenizer_json->at("model").at("merges").get<std::vector<std::string>>();
  }
  if (json.contains("merges")) spec.merges = json.at("merges").get<std::vector<std::string>>();
  for (int type : json.at("token_types").get<std::vector<int>>()) {
    spec.token_types.push_back(static_cast<TokenType>(type));
  }
  if (json.contains("scores")) spec.scores = json.at("scores").get<std::vector<float>>();
  auto optional_id = [&](const char* key) -> std::optional<int32_t> {
    if (!json.contains(key)) return std::nullopt;
    return json.at(key).get<int32_t>();
  };
  spec.bos_id = optional_id("bos_id");
  spec.eos_id = optional_id("eos_id");
  spec.unk_id = optional_id("unk_id");
  spec.pad_id = optional_id("pad_id");
  if (json.contains("add_bos")) spec.add_bos = json.at("add_bos").get<bool>();
  if (json.contains("add_eos")) spec.add_eos = json.at("add_eos").get<bool>();
  if (json.contains("add_space_prefix")) {
    spec.add_space_prefix = json.at("add_space_prefix").get<bool>();
  }
  return spec;
}

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

struct Agreement {
  int strings = 0;
  int exact = 0;
};

// Checks one tokenizer against the reference cases of `strings`; counts the strings that gave
// exactly the reference ids.
Agreement CheckCases(const Tokenizer& tokenizer, const std::vector<std::string>& strings,
                     const Json& cases, const std::string& name) {
  Agreement agreement;
  EXPECT_EQ(strings.size(), cases.size()) << name;
  for (size_t c = 0; c < cases.size() && c < strings.size(); ++c) {
    const std::string& text = strings[c];
    const Json& expected = cases[c];
    SCOPED_TRACE(::testing::Message() << name << " string #" << c << ": \"" << text << "\"");
    ++agreement.strings;
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, /*add_special=*/false);
    if (!ids.ok()) {
      ADD_FAILURE() << ids.status();
      continue;
    }
    const auto reference = expected.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(*ids, reference);
    if (*ids == reference) ++agreement.exact;
    if (expected.contains("ids_special")) {
      EXPECT_EQ(tokenizer.Encode(text, true).value_or(std::vector<int32_t>{-1}),
                expected.at("ids_special").get<std::vector<int32_t>>());
    }
    const std::string decoded = expected.value("decoded", text);
    const std::string decoded_skip = expected.value("decoded_skip", decoded);
    EXPECT_EQ(tokenizer.Decode(reference).value_or("(error)"), decoded);
    EXPECT_EQ(tokenizer.Decode(reference, /*skip_special=*/true).value_or("(error)"), decoded_skip);
    for (bool skip_special : {false, true}) {
      IncrementalDetokenizer detokenizer(tokenizer, skip_special);
      std::string streamed;
      for (int32_t id : reference) {
        const std::string piece = detokenizer.Next(id).value_or("(error)");
        EXPECT_TRUE(IsValidUtf8(piece)) << "after id " << id;
        streamed += piece;
      }
      const std::string rest = detokenizer.Flush();
      EXPECT_TRUE(IsValidUtf8(rest));
      streamed += rest;
      EXPECT_EQ(streamed, skip_special ? decoded_skip : decoded) << "skip_special=" << skip_special;
    }
  }
  std::cout << "[ agreement ] " << name << ": " << agreement.exact << "/" << agreement.strings
            << " strings exact\n";
  return agreement;
}

class SmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_json_ = new Json(ReadJson("smollm2/tokenizer.json"));
    cases_ = new Json(ReadJson("smollm2/ids.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_json_;
    delete cases_;
  }
  static Json* tokenizer_json_;
  static Json* cases_;
};
Json* SmolLm2Test::tokenizer_json_ = nullptr;
Json* SmolLm2Test::cases_ = nullptr;

TEST_F(SmolLm2Test, HuggingFaceJsonMatchesReference) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "smollm2/tokenizer.json");
  ASSERT_OK(tokenizer);
  ASSERT_EQ(cases_->size(), Strings().size());
  const Agreement agreement = CheckCases(**tokenizer, Strings(), *cases_, "smollm2 tokenizer.json");
  EXPECT_EQ(agreement.exact, agreement.strings);
  EXPECT_GE(agreement.strings, 2000);
}

TEST_F(SmolLm2Test, GgufSpecMatchesReference) {
  const TokenizerSpec spec = SpecFromJson(ReadJson("smollm2/gguf_spec.json"), tokenizer_json_);
  EXPECT_EQ(spec.pre, "smollm");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(spec);
  ASSERT_OK(tokenizer);
  const Agreement agreement = CheckCases(**tokenizer, Strings(), *cases_, "smollm2 GGUF spec");
  EXPECT_EQ(agreement.exact, agreement.strings);
  EXPECT_EQ((*tokenizer)->bos_id(), 1);
  EXPECT_EQ((*tokenizer)->eos_id(), 2);
  EXPECT_FALSE((*tokenizer)->add_bos());
  EXPECT_EQ((*tokenizer)->vocab_size(), 49152);
  EXPECT_EQ((*tokenizer)->TokenToId("<|im_end|>"), 2);
  EXPECT_EQ((*tokenizer)->IdToToken(1), "<|im_start|>");
  EXPECT_TRUE((*tokenizer)->IsSpecial(2));
}

// Byte-level BPE loses nothing: every string comes back.
TEST_F(SmolLm2Test, DecodeOfEncodeIsIdentity) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "smollm2/tokenizer.json");
  ASSERT_OK(tokenizer);
  for (const std::string& text : Strings()) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text, true);
    ASSERT_OK(ids);
    absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(*ids);
    ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, text);
  }
}

class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_json_ = new Json(ReadJson("sp/tokenizer.json"));
    cases_ = new Json(ReadJson("sp/ids.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_json_;
    delete cases_;
  }
  static Json* tokenizer_json_;
  static Json* cases_;
};
Json* SentencePieceTest::tokenizer_json_ = nullptr;
Json* SentencePieceTest::cases_ = nullptr;

TEST_F(SentencePieceTest, HuggingFaceJsonMatchesReference) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "sp/tokenizer.json");
  ASSERT_OK(tokenizer);
  ASSERT_EQ(cases_->size(), Strings().size());
  const Agreement agreement =
      CheckCases(**tokenizer, Strings(), *cases_, "sentencepiece tokenizer.json");
  EXPECT_EQ(agreement.exact, agreement.strings);
  EXPECT_EQ((*tokenizer)->bos_id(), 1);  // from the post-processor's template
  EXPECT_TRUE((*tokenizer)->add_bos());
}

// The GGUF view has no merges: they are derived from the scores.
TEST_F(SentencePieceTest, GgufSpecMatchesReference) {
  const TokenizerSpec spec = SpecFromJson(ReadJson("sp/gguf_spec.json"), nullptr);
  ASSERT_TRUE(spec.merges.empty());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(spec);
  ASSERT_OK(tokenizer);
  const Agreement agreement =
      CheckCases(**tokenizer, Strings(), *cases_, "sentencepiece GGUF spec");
  EXPECT_EQ(agreement.exact, agreement.strings);
  EXPECT_EQ((*tokenizer)->bos_id(), 1);
  EXPECT_EQ((*tokenizer)->eos_id(), 2);
  EXPECT_EQ((*tokenizer)->unk_id(), 0);
  EXPECT_TRUE((*tokenizer)->add_bos());
  EXPECT_FALSE((*tokenizer)->add_eos());
}

TEST_F(SentencePieceTest, GgufSpecWithMergesMatchesReference) {
  TokenizerSpec spec = SpecFromJson(ReadJson("sp/gguf_spec.json"), nullptr);
  spec.merges = tokenizer_json_->at("model").at("merges").get<std::vector<std::string>>();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(spec);
  ASSERT_OK(tokenizer);
  const Agreement agreement =
      CheckCases(**tokenizer, Strings(), *cases_, "sentencepiece GGUF spec with merges");
  EXPECT_EQ(agreement.exact, agreement.strings);
}

// Where Hugging Face's decode gives the string back, ours does too.
TEST_F(SentencePieceTest, DecodeOfEncodeIsIdentityWhereTheReferenceIs) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "sp/tokenizer.json");
  ASSERT_OK(tokenizer);
  int identical = 0;
  for (size_t i = 0; i < Strings().size(); ++i) {
    if ((*cases_)[i].contains("decoded") || (*cases_)[i].contains("decoded_skip")) continue;
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(Strings()[i], true);
    ASSERT_OK(ids);
    absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(*ids, /*skip_special=*/true);
    ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, Strings()[i]);
    ++identical;
  }
  EXPECT_GT(identical, 1000);
}

// Each variant is one of the two tokenizer.json files with components replaced; see the
// fixture script for the list (other GGUF pre-tokenizers, Split behaviours, post-processors,
// Metaspace, added-token flags, decoder chains).
TEST(TokenizerVariantsTest, MatchReference) {
  const Json meta = ReadJson("meta.json");
  const Json bases[] = {ReadJson("smollm2/tokenizer.json"), ReadJson("sp/tokenizer.json")};
  int checked = 0;
  for (const Json& name : meta.at("variants")) {
    const Json variant = ReadJson("variants/" + name.get<std::string>() + ".json");
    const bool smollm2 = variant.at("base") == "smollm2";
    Json json = bases[smollm2 ? 0 : 1];
    for (auto it = variant.at("replace").begin(); it != variant.at("replace").end(); ++it) {
      json[it.key()] = it.value();
    }
    for (auto it = variant.at("model").begin(); it != variant.at("model").end(); ++it) {
      json["model"][it.key()] = it.value();
    }
    std::vector<std::string> strings;
    if (variant.contains("strings")) {
      strings = variant.at("strings").get<std::vector<std::string>>();
    } else {
      for (size_t i = 0; i < Strings().size(); i += variant.at("stride").get<size_t>()) {
        strings.push_back(Strings()[i]);
      }
    }
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
        Tokenizer::FromHuggingFaceJson(json.dump());
    ASSERT_TRUE(tokenizer.ok()) << name << ": " << tokenizer.status();
    Agreement agreement = CheckCases(**tokenizer, strings, variant.at("cases"), name);
    EXPECT_EQ(agreement.exact, agreement.strings);
    if (variant.contains("gguf_pre")) {
      TokenizerSpec spec = SpecFromJson(ReadJson("smollm2/gguf_spec.json"), &bases[0]);
      spec.pre = variant.at("gguf_pre").get<std::string>();
      absl::StatusOr<std::unique_ptr<Tokenizer>> from_spec = Tokenizer::FromSpec(spec);
      ASSERT_TRUE(from_spec.ok()) << spec.pre << ": " << from_spec.status();
      agreement = CheckCases(**from_spec, strings, variant.at("cases"),
                             "smollm2 GGUF spec, pre " + spec.pre);
      EXPECT_EQ(agreement.exact, agreement.strings);
    }
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

}  // namespace
}  // namespace convoy
