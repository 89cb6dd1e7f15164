// Tokenizer contracts beyond the reference fixtures: invalid UTF-8, random bytes, large inputs,
// bad ids, loader errors, and the pieces underneath (UTF-8, the Oniguruma-compatible regexes).
#include "text/tokenizer.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_paths.h"
#include "text/pretokenizer_regex.h"
#include "text/utf8.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

const std::string kFixtures = TestSourceDir() + "/tests/fixtures/tokenizer/";

const Tokenizer& SmolLm2() {
  static const Tokenizer* const tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "smollm2/tokenizer.json")->release();
  return *tokenizer;
}

const Tokenizer& SentencePiece() {
  static const Tokenizer* const tokenizer =
      Tokenizer::FromHuggingFaceJsonFile(kFixtures + "sp/tokenizer.json")->release();
  return *tokenizer;
}

std::vector<int32_t> Ids(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.Encode(text, /*add_special=*/false).value_or(std::vector<int32_t>{-1});
}

std::string RandomBytes(std::mt19937& rng, size_t length) {
  std::string bytes(length, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
  return bytes;
}

// Random code points, most from the scripts the fixtures cover, some from anywhere.
std::string RandomText(std::mt19937& rng, size_t characters) {
  std::string text;
  for (size_t i = 0; i < characters; ++i) {
    char32_t cp;
    switch (rng() % 6) {
      case 0:
        cp = 0x20 + rng() % 0x5F;
        break;
      case 1:
        cp = " \t\n"[rng() % 3];
        break;
      case 2:
        cp = 0x3040 + rng() % 0x60;
        break;
      case 3:
        cp = 0x4E00 + rng() % 0x5000;
        break;
      case 4:
        cp = 0x1F600 + rng() % 0x50;
        break;
      default:
        // Anywhere up to U+3FFFF: SmolLM2's vocabulary has no token for the bytes 0xF1 and 0xF2
        // (which begin U+40000..U+BFFFF) and a few control characters, and drops them as
        // Hugging Face does, so those would not come back.
        do {
          cp = 0x80 + rng() % (0x40000 - 0x80);
        } while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    tokenizer_internal::AppendUtf8(cp, &text);
  }
  return text;
}

TEST(TokenizerTest, InvalidUtf8IsRejectedWithItsOffset) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const std::vector<Case> cases = {
      {"abc\xC3", 3},              // truncated
      {"ab\xED\xA0\x80", 2},       // a surrogate
      {"\xC0\xAF", 0},             // overlong
      {"x\xE0\x80\xAF", 1},        // overlong
      {"ok \xF4\x90\x80\x80", 3},  // above U+10FFFF
      {"\xFF", 0},                 // never valid
      {"h\xC3\xA9llo\x80", 6},     // a lone continuation byte after valid text
      {"\xF0\x9F\x98", 0},         // an emoji cut short
  };
  for (const Case& c : cases) {
    for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
      EXPECT_THAT(tokenizer->Encode(c.text, false),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr("byte offset " + std::to_string(c.offset))));
    }
  }
}

TEST(TokenizerTest, RandomBytesGiveIdsOrAClearError) {
  std::mt19937 rng(7);
  int valid = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = RandomBytes(rng, rng() % 48);
    const bool is_utf8 = tokenizer_internal::ValidateUtf8(bytes).ok();
    valid += is_utf8;
    for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
      absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(bytes, true);
      if (!is_utf8) {
        EXPECT_THAT(ids, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
        continue;
      }
      ASSERT_OK(ids);
      EXPECT_OK(tokenizer->Decode(*ids));
    }
  }
  EXPECT_GT(valid, 0);  // the short ones
}

TEST(TokenizerTest, RandomTextRoundTrips) {
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    const std::string text = RandomText(rng, rng() % 64);
    absl::StatusOr<std::vector<int32_t>> ids = SmolLm2().Encode(text, false);
    ASSERT_OK(ids);
    absl::StatusOr<std::string> decoded = SmolLm2().Decode(*ids);
    ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, text);
    // SentencePiece with byte fallback too: the space it prepends is dropped again.
    ids = SentencePiece().Encode(text, false);
    ASSERT_OK(ids);
    decoded = SentencePiece().Decode(*ids);
    ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, text);
  }
}

// Inputs that would be quadratic for a BPE that rescans a piece after each merge, or for a regex
// that backtracks: they must simply finish (no time limit is asserted here; bench/ measures).
TEST(TokenizerTest, LargeInputsEncode) {
  constexpr size_t kSize = 1 << 20;
  std::mt19937 rng(3);
  std::string prose;
  std::ifstream strings(kFixtures + "strings.json");
  std::stringstream contents;
  contents << strings.rdbuf();
  while (prose.size() < kSize) prose += contents.str();
  const std::vector<std::string> inputs = {
      prose.substr(0, kSize),     std::string(kSize, 'a'),  // one piece of a million letters
      std::string(kSize, ' '),                              // one run of white space
      std::string(kSize, '7'),                              // digits, split one by one
      RandomText(rng, kSize / 3),
  };
  for (const std::string& input : inputs) {
    for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
      absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(input, false);
      ASSERT_OK(ids);
      EXPECT_GT(ids->size(), 0u);
      absl::StatusOr<std::string> decoded = tokenizer->Decode(*ids);
      ASSERT_OK(decoded);
      if (tokenizer == &SmolLm2()) {
        EXPECT_TRUE(*decoded == input);
      }
    }
  }
}

TEST(TokenizerTest, UnknownIdsAreRejected) {
  EXPECT_THAT(SmolLm2().Decode({1, 49152}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("49152")));
  EXPECT_THAT(SmolLm2().Decode({-1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-1")));
  EXPECT_FALSE(SmolLm2().IdToToken(49152).has_value());
  EXPECT_FALSE(SmolLm2().TokenToId("no such token").has_value());
}

TEST(TokenizerTest, SpecialTokensAreMatchedInText) {
  absl::StatusOr<std::vector<int32_t>> ids =
      SmolLm2().Encode("<|im_start|>user\nhi<|im_end|>", false);
  ASSERT_OK(ids);
  ASSERT_GE(ids->size(), 3u);
  EXPECT_EQ(ids->front(), 1);
  EXPECT_EQ(ids->back(), 2);
  EXPECT_EQ(SmolLm2().Decode(*ids, /*skip_special=*/true).value_or(""), "user\nhi");
}

TEST(TokenizerTest, ExtrasNameBosAndEos) {
  std::ifstream file(kFixtures + "smollm2/tokenizer.json");
  std::stringstream json;
  json << file.rdbuf();
  HuggingFaceTokenizerExtras extras;
  extras.bos_token = "<|im_start|>";
  extras.eos_token = "<|im_end|>";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromHuggingFaceJson(json.str(), extras);
  ASSERT_OK(tokenizer);
  EXPECT_EQ((*tokenizer)->bos_id(), 1);
  EXPECT_EQ((*tokenizer)->eos_id(), 2);
  EXPECT_FALSE((*tokenizer)->add_bos());
  extras.eos_token = "<|nope|>";
  EXPECT_THAT(Tokenizer::FromHuggingFaceJson(json.str(), extras),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("<|nope|>")));
  // Without extras, tokenizer.json names no EOS.
  EXPECT_FALSE(SmolLm2().eos_id().has_value());
}

constexpr char kTinyJson[] = R"({
  "added_tokens": [{"id": 0, "content": "<s>", "special": true, "normalized": false}],
  "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
  "model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1, "b": 2, "ab": 3}, "merges": ["a b"]}})";

TEST(TokenizerLoaderTest, HuggingFaceJsonErrorsNameTheField) {
  ASSERT_OK(Tokenizer::FromHuggingFaceJson(kTinyJson));
  EXPECT_THAT(Tokenizer::FromHuggingFaceJson("{not json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON")));
  std::string json = kTinyJson;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string changed = json;
    changed.replace(changed.find(from), from.size(), to);
    return Tokenizer::FromHuggingFaceJson(changed);
  };
  ASSERT_OK(with("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}"));
  EXPECT_THAT(with("\"normalizer\": null", "\"normalizer\": {\"type\": \"Lowercase\"}"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("normalizer \"Lowercase\"")));
  EXPECT_THAT(with("\"type\": \"BPE\"", "\"type\": \"WordPiece\""),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("WordPiece")));
  EXPECT_THAT(with("\"a b\"", "\"a c\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merge 0")));
  EXPECT_THAT(with("\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("pre_tokenizer")));
  EXPECT_THAT(with("\"pre_tokenizer\": null",
                   R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("},
                      "behavior": "Isolated", "invert": false})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("((")));
  EXPECT_THAT(with("\"decoder\": null",
                   R"("decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"},
                      {"type": "ByteFallback"}]})"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("after Fuse")));
  EXPECT_THAT(with("\"vocab\"", "\"vocabulary\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.vocab")));
  EXPECT_THAT(Tokenizer::FromHuggingFaceJsonFile("/nonexistent/tokenizer.json"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/tokenizer.json")));
}

TEST(TokenizerLoaderTest, TinyTokenizerEncodesAndDecodes) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromHuggingFaceJson(kTinyJson);
  ASSERT_OK(tokenizer);
  EXPECT_EQ(Ids(**tokenizer, "aab<s>ba"), (std::vector<int32_t>{1, 3, 0, 2, 1}));
  // Characters outside the vocabulary, without byte fallback or an unknown token, are dropped.
  EXPECT_EQ(Ids(**tokenizer, "azb"), std::vector<int32_t>{3});
  // Without a decoder, tokens are joined with spaces.
  EXPECT_EQ((*tokenizer)->Decode({3, 0, 1}).value_or(""), "ab <s> a");
}

TokenizerSpec TinySpec() {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  spec.tokens = {"<|end|>", "a", "b", "ab", "Ġ"};
  spec.token_types = {TokenType::kControl, TokenType::kNormal, TokenType::kNormal,
                      TokenType::kNormal, TokenType::kNormal};
  spec.merges = {"a b"};
  spec.eos_id = 0;
  return spec;
}

TEST(TokenizerLoaderTest, SpecErrorsNameTheField) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(TinySpec());
  ASSERT_OK(tokenizer);
  EXPECT_EQ(Ids(**tokenizer, "ab a<|end|>"), (std::vector<int32_t>{3, 4, 1, 0}));
  TokenizerSpec spec = TinySpec();
  spec.model = "bert";
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("bert")));
  spec = TinySpec();
  spec.pre = "klingon";
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("smollm")));
  spec = TinySpec();
  spec.token_types.pop_back();
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token_types")));
  spec = TinySpec();
  spec.bos_id = 5;
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bos_id")));
  spec = TinySpec();
  spec.add_bos = true;
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add_bos")));
  spec = TinySpec();
  spec.merges = {"a c"};
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merges")));
  spec = TinySpec();
  spec.merges = {"ab"};
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merges[0]")));
  spec = TinySpec();
  spec.tokens[1] = "\xC3";
  EXPECT_THAT(Tokenizer::FromSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tokens[1]")));
}

TEST(Utf8Test, LossyFollowsTheMaximalSubpartRule) {
  using tokenizer_internal::Utf8Lossy;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Utf8Lossy("\xE3\x81"), fffd);
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"
                      "A"),
            fffd + "A");
  EXPECT_EQ(Utf8Lossy("\xE0\x80"), fffd + fffd);
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), fffd + fffd + fffd);
  EXPECT_EQ(Utf8Lossy("a\xFF"
                      "b\xC3\xA9"),
            "a" + fffd + "b\xC3\xA9");
}

TEST(Utf8Test, StreamedLossyEqualsWholeLossy) {
  std::mt19937 rng(5);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = RandomBytes(rng, rng() % 24);
    // Mostly valid text with damage, so that characters do span the pieces.
    if (i % 2 == 0) bytes = RandomText(rng, rng() % 8) + bytes.substr(0, rng() % 3);
    tokenizer_internal::Utf8LossyStream stream;
    std::string streamed;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t n = std::min<size_t>(bytes.size() - pos, 1 + rng() % 5);
      std::string piece;
      stream.Feed(std::string_view(bytes).substr(pos, n), &piece);
      EXPECT_OK(tokenizer_internal::ValidateUtf8(piece));
      streamed += piece;
      pos += n;
    }
    stream.Finish(&streamed);
    EXPECT_EQ(streamed, tokenizer_internal::Utf8Lossy(bytes));
  }
}

TEST(PretokenizerRegexTest, WhiteSpaceIsOniguruma) {
  using tokenizer_internal::PretokenizerRegex;
  absl::StatusOr<std::unique_ptr<PretokenizerRegex>> space = PretokenizerRegex::Compile("\\s+");
  ASSERT_OK(space);
  std::vector<std::pair<size_t, size_t>> matches;
  // NEL (U+0085) is white space; the Mongolian vowel separator (U+180E) is not.
  ASSERT_OK(
      (*space)->ForEachMatch("a\xC2\x85"
                             "b\xE1\xA0\x8E"
                             "c",
                             [&](size_t b, size_t e) { matches.emplace_back(b, e); }));
  EXPECT_THAT(matches, ::testing::ElementsAre(std::make_pair(1, 3)));
  EXPECT_THAT(tokenizer_internal::TranslateOnigurumaPattern("[^\\S]"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("\\S")));
  absl::StatusOr<std::string> translated =
      tokenizer_internal::TranslateOnigurumaPattern("[^\\s\\p{L}]|\\S");
  ASSERT_OK(translated);
  EXPECT_THAT(*translated, ::testing::Not(HasSubstr("\\s")));
  EXPECT_THAT(*translated, HasSubstr("[^\\t\\n"));
}

}  // namespace
}  // namespace convoy
