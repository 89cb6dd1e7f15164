// Streaming detokenization: for any ids, what IncrementalDetokenizer returns, joined, is what
// Decode returns, and each piece is valid UTF-8 on its own.
#include "text/tokenizer.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "test_paths.h"
#include "text/detokenizer.h"
#include "text/utf8.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;

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

int32_t Id(const Tokenizer& tokenizer, const std::string& token) {
  std::optional<int32_t> id = tokenizer.TokenToId(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(0);
}

// Streams `ids`; returns the pieces (the last one is Flush's).
std::vector<std::string> Stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                bool skip_special) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    absl::StatusOr<std::string> piece = detokenizer.Next(id);
    EXPECT_OK(piece);
    pieces.push_back(piece.value_or(""));
  }
  pieces.push_back(detokenizer.Flush());
  EXPECT_FALSE(detokenizer.holding());
  return pieces;
}

void ExpectStreamEqualsDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (bool skip_special : {false, true}) {
    std::string joined;
    for (const std::string& piece : Stream(tokenizer, ids, skip_special)) {
      EXPECT_OK(tokenizer_internal::ValidateUtf8(piece));
      joined += piece;
    }
    absl::StatusOr<std::string> decoded = tokenizer.Decode(ids, skip_special);
    ASSERT_OK(decoded);
    EXPECT_EQ(joined, *decoded) << "skip_special=" << skip_special;
  }
}

TEST(DetokenizerTest, RandomIdsStreamAsTheyDecode) {
  std::mt19937 rng(13);
  for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
    // SentencePiece's byte tokens are ids 5..260 here; draw them often, so that runs of them
    // (valid or not) come up, between ordinary and special tokens.
    const bool byte_fallback = tokenizer == &SentencePiece();
    for (int round = 0; round < 2000; ++round) {
      std::vector<int32_t> ids(rng() % 12);
      for (int32_t& id : ids) {
        id = byte_fallback && rng() % 2 == 0
                 ? 5 + static_cast<int32_t>(rng() % 256)
                 : static_cast<int32_t>(rng() % tokenizer->vocab_size());
      }
      SCOPED_TRACE(::testing::PrintToString(ids));
      ExpectStreamEqualsDecode(*tokenizer, ids);
    }
  }
}

TEST(DetokenizerTest, EncodedTextStreamsBack) {
  const std::vector<std::string> texts = {"Hello world",
                                          "  two leading spaces",
                                          "こんにちは、今日の天気は",
                                          "AIとは 😀👨‍👩‍👧‍👦 e\xCC\x81",
                                          "<|im_start|>user\nhi<|im_end|>",
                                          "<s> after bos",
                                          "tabs\tand\nnewlines\n\n"};
  for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
    for (const std::string& text : texts) {
      absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(text, /*add_special=*/true);
      ASSERT_OK(ids);
      ExpectStreamEqualsDecode(*tokenizer, *ids);
    }
  }
}

TEST(DetokenizerTest, ByteLevelHoldsACharacterUntilItIsWhole) {
  // "😀" is F0 9F 98 80: the tokens "ðŁ" (F0 9F), "ĺ" (98) and "Ģ" (80).
  const std::vector<int32_t> ids = {Id(SmolLm2(), "ðŁ"), Id(SmolLm2(), "ĺ"), Id(SmolLm2(), "Ģ")};
  IncrementalDetokenizer detokenizer(SmolLm2(), true);
  EXPECT_EQ(detokenizer.Next(ids[0]).value_or("x"), "");
  EXPECT_TRUE(detokenizer.holding());
  EXPECT_EQ(detokenizer.Next(ids[1]).value_or("x"), "");
  EXPECT_EQ(detokenizer.Next(ids[2]).value_or("x"), "\xF0\x9F\x98\x80");
  EXPECT_FALSE(detokenizer.holding());
  // Cut short: Flush ends it as Decode does, with one U+FFFD.
  EXPECT_EQ(detokenizer.Next(ids[0]).value_or("x"), "");
  EXPECT_EQ(detokenizer.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(SmolLm2().Decode({ids[0]}).value_or(""), "\xEF\xBF\xBD");
}

TEST(DetokenizerTest, SentencePieceDropsOnlyTheFirstLeadingSpace) {
  const Tokenizer& sp = SentencePiece();
  absl::StatusOr<std::vector<int32_t>> ids = sp.Encode("Hello world", /*add_special=*/true);
  ASSERT_OK(ids);
  ASSERT_EQ(ids->front(), 1);  // BOS
  std::vector<std::string> pieces = Stream(sp, *ids, /*skip_special=*/true);
  EXPECT_EQ(pieces.front(), "");  // BOS, skipped
  std::string joined;
  for (const std::string& piece : pieces) joined += piece;
  EXPECT_EQ(joined, "Hello world");
  // With BOS kept, the space after it stays, as in Hugging Face's decode.
  pieces = Stream(sp, *ids, /*skip_special=*/false);
  EXPECT_EQ(pieces.front(), "<s>");
  EXPECT_EQ(sp.Decode(*ids).value_or(""), "<s> Hello world");
}

TEST(DetokenizerTest, ByteFallbackRunsWaitForTheirEnd) {
  const Tokenizer& sp = SentencePiece();
  const int32_t e3 = Id(sp, "<0xE3>"), x81 = Id(sp, "<0x81>"), x82 = Id(sp, "<0x82>");
  const int32_t x41 = Id(sp, "<0x41>");
  const int32_t word = Id(sp, "\xE2\x96\x81the");  // "▁the"
  IncrementalDetokenizer detokenizer(sp, true);
  EXPECT_EQ(detokenizer.Next(word).value_or("x"), "the");
  for (int32_t id : {e3, x81, x82}) EXPECT_EQ(detokenizer.Next(id).value_or("x"), "");
  EXPECT_TRUE(detokenizer.holding());
  // "あ" arrives with the token that ends the run.
  EXPECT_EQ(detokenizer.Next(word).value_or("x"), "\xE3\x81\x82 the");
  // A run that is not UTF-8 becomes one U+FFFD per byte, the valid "A" included (as Hugging
  // Face's ByteFallback decoder does).
  for (int32_t id : {x41, e3, x81}) EXPECT_EQ(detokenizer.Next(id).value_or("x"), "");
  EXPECT_EQ(detokenizer.Flush(), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  // After Flush a new text starts, and its leading space goes again.
  EXPECT_EQ(detokenizer.Next(word).value_or("x"), "the");
}

TEST(DetokenizerTest, UnknownIdIsAnErrorAndChangesNothing) {
  IncrementalDetokenizer detokenizer(SmolLm2(), false);
  const int32_t first = Id(SmolLm2(), "ðŁ");
  EXPECT_EQ(detokenizer.Next(first).value_or("x"), "");
  EXPECT_THAT(detokenizer.Next(SmolLm2().vocab_size()),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("49152")));
  EXPECT_THAT(detokenizer.Next(-3),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("-3")));
  EXPECT_TRUE(detokenizer.holding());
  EXPECT_EQ(detokenizer.Flush(), "\xEF\xBF\xBD");
}

// TokenBytes is what a token adds to a text it does not begin: after a first token, Decode of
// the ids is Decode of the first token followed by each later token's bytes (when those bytes
// are text: Decode makes invalid UTF-8 into U+FFFD), on random ids, byte tokens and
// SentencePiece pieces included; special tokens add nothing.
TEST(TokenBytesTest, LaterTokensAddTheirBytesToTheDecodedText) {
  for (const Tokenizer* tokenizer : {&SmolLm2(), &SentencePiece()}) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> any_id(0, tokenizer->vocab_size() - 1);
    const int32_t anchor = Id(*tokenizer, tokenizer == &SmolLm2() ? "a"
                                                                  : "\xE2\x96\x81"
                                                                    "a");
    int compared = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<int32_t> ids = {anchor};
      std::string bytes;
      for (int i = 0; i < 1 + trial % 5; ++i) {
        int32_t id = any_id(rng);
        if (tokenizer->IsSpecial(id)) {
          EXPECT_EQ(tokenizer->TokenBytes(id), "") << id;
          continue;
        }
        ids.push_back(id);
        bytes += tokenizer->TokenBytes(id);
      }
      if (!tokenizer_internal::ValidateUtf8(bytes).ok()) continue;
      ++compared;
      absl::StatusOr<std::string> whole = tokenizer->Decode(ids, /*skip_special=*/false);
      absl::StatusOr<std::string> first = tokenizer->Decode({anchor}, /*skip_special=*/false);
      ASSERT_OK(whole);
      ASSERT_OK(first);
      EXPECT_EQ(*whole, *first + bytes) << "trial " << trial;
    }
    EXPECT_GT(compared, 1000);
  }
}

TEST(TokenBytesTest, AByteTokenIsItsOneRawByte) {
  // Byte-level: the token spelling U+0120 is the space byte, "\xC3\xA2" a single byte 0xE2.
  EXPECT_EQ(SmolLm2().TokenBytes(Id(SmolLm2(), "\xC4\xA0")), " ");
  // Byte fallback: <0xE2> is the byte 0xE2 alone, not U+FFFD.
  EXPECT_EQ(SentencePiece().TokenBytes(Id(SentencePiece(), "<0xE2>")), "\xE2");
  EXPECT_EQ(SentencePiece().TokenBytes(Id(SentencePiece(), "<0x0A>")), "\n");
  EXPECT_EQ(SmolLm2().TokenBytes(-1), "");
  EXPECT_EQ(SmolLm2().TokenBytes(SmolLm2().vocab_size()), "");
}

}  // namespace
}  // namespace convoy
