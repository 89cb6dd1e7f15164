#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar_test_util.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy::grammar {
namespace {

using ::convoy::testing::StatusIs;
using testing::AllowedStrings;
using testing::ByteVocabulary;
using ::testing::ElementsAre;
using testing::EndToken;
using ::testing::HasSubstr;
using testing::Mask;
using testing::Matches;

std::shared_ptr<const Grammar> Regex(const std::string& pattern) {
  auto g = CompileRegex(pattern);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

TEST(RegexTest, Matches) {
  auto phone = Regex(R"(^\d{3}-\d{4}$)");
  EXPECT_TRUE(Matches(phone, "555-1234"));
  EXPECT_FALSE(Matches(phone, "555-123"));
  EXPECT_FALSE(Matches(phone, "5551234"));
  auto alt = Regex("(a|bc)*d+?[^x-z]\\.");
  EXPECT_TRUE(Matches(alt, "abcad!."));
  EXPECT_TRUE(Matches(alt, "dd\xc3\xa9."));
  EXPECT_FALSE(Matches(alt, "dy."));
  auto word = Regex(R"((?:\w+\s?){1,3}\S)");
  EXPECT_TRUE(Matches(word, "ab cd_9 e!"));
  EXPECT_FALSE(Matches(word, "a b c d e"));
  auto any = Regex("a.c");
  EXPECT_TRUE(Matches(any,
                      "a\xe6\x97\xa5"
                      "c"));
  EXPECT_FALSE(Matches(any, "a\nc"));
  auto braces = Regex("x{a}{2}");
  EXPECT_TRUE(Matches(braces, "x{a}}"));
}

TEST(RegexTest, RefusesWhatItDoesNotSupport) {
  for (const char* pattern : {"(a)\\1", "(?=a)", "a\\bb", "(?i)a", "a*+", "a^b", "[[:alpha:]]",
                              "(a", "a)", "*a", "a{5000}", "\\p{L}"}) {
    EXPECT_THAT(CompileRegex(pattern), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("regular expression at offset")))
        << pattern;
  }
}

TEST(ChoicesTest, MaskAndCompletion) {
  auto g = *CompileChoices({"yes", "no", "yesterday"});
  auto vocab = ByteVocabulary({"yes", "ye", "no", "nope", "terday", "s"});
  GrammarMatcher m(g, vocab);
  EXPECT_THAT(AllowedStrings(m, *vocab),
              ::testing::UnorderedElementsAre("y", "n", "yes", "ye", "no"));
  ASSERT_OK(m.AcceptToken(256));  // "yes"
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_THAT(AllowedStrings(m, *vocab), ::testing::UnorderedElementsAre("t", "terday"));
  EXPECT_TRUE(testing::Allowed(Mask(m, *vocab), EndToken(*vocab)));
  ASSERT_OK(m.AcceptToken(260));  // "terday"
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_THAT(AllowedStrings(m, *vocab), ::testing::IsEmpty());
  ASSERT_OK(m.AcceptToken(EndToken(*vocab)));
  EXPECT_TRUE(m.IsTerminated());
  for (uint32_t word : Mask(m, *vocab)) EXPECT_EQ(word, 0u);
  EXPECT_THAT(m.AcceptToken('a'),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("end token")));
  EXPECT_THAT(CompileChoices({}), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(MatcherTest, DisallowedTokenLeavesStateUnchanged) {
  auto g = *CompileChoices({"abc"});
  auto vocab = ByteVocabulary({"ab", "abd"});
  GrammarMatcher m(g, vocab);
  ASSERT_OK(m.AcceptToken('a'));
  const std::vector<uint32_t> before = Mask(m, *vocab);
  EXPECT_THAT(m.AcceptToken(257),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token 257 (\"abd\")")));
  EXPECT_THAT(
      m.AcceptToken(EndToken(*vocab)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("before the grammar is complete")));
  EXPECT_THAT(m.AcceptToken(-1), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(m.AcceptToken(1 << 20), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(Mask(m, *vocab), before);
  ASSERT_OK(m.AcceptToken('b'));
  ASSERT_OK(m.AcceptToken('c'));
  EXPECT_TRUE(m.IsTerminated());
}

TEST(MatcherTest, SpecialTokensAreNeverAllowed) {
  auto g = *CompileGbnf("root ::= [^a]*");
  std::vector<std::string> tokens = {"x", "", "", "yy"};
  auto vocab = *TokenVocabulary::Create(tokens, {2});
  GrammarMatcher m(g, vocab);
  std::vector<uint32_t> mask = Mask(m, *vocab);
  EXPECT_THAT(mask, ElementsAre(0b1101u));  // x, the end token, yy; not the special token 1
  EXPECT_THAT(m.AcceptToken(1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("special")));
}

TEST(MatcherTest, TokensSpanRules) {
  auto g = *CompileGbnf(R"(root ::= "{" ws key ws ":" ws "1" ws "}"
ws ::= [ ]?
key ::= "\"" [a-z]+ "\"")");
  auto vocab = ByteVocabulary({"{\"", "ab", "\": ", "1}", "\":1 }", "{ \"x\"", "{}", "\":2"});
  GrammarMatcher m(g, vocab);
  EXPECT_THAT(AllowedStrings(m, *vocab), ::testing::UnorderedElementsAre("{", "{\"", "{ \"x\""));
  ASSERT_OK(m.AcceptToken(256));
  EXPECT_THAT(AllowedStrings(m, *vocab).count("ab"), 1u);
  ASSERT_OK(m.AcceptToken(257));
  std::set<std::string> next = AllowedStrings(m, *vocab);
  EXPECT_TRUE(next.count("\": "));
  EXPECT_TRUE(next.count("\":1 }"));
  EXPECT_FALSE(next.count("\":2"));
  ASSERT_OK(m.AcceptToken(258));
  ASSERT_OK(m.AcceptToken(259));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.IsTerminated());
}

TEST(VocabularyTest, RefusesBadInput) {
  EXPECT_THAT(TokenVocabulary::Create({"a"}, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(TokenVocabulary::Create({std::string(5000, 'a')}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(AnyJsonObjectTest, Matches) {
  auto g = AnyJsonObject();
  EXPECT_TRUE(Matches(g, R"({})"));
  EXPECT_TRUE(Matches(g, R"({"a": [1, -2.5e3, "x\u00e9\n", {"b": null}], "c" :true})"));
  EXPECT_FALSE(Matches(g, R"([])"));
  EXPECT_FALSE(Matches(g, R"({"a":01})"));
  EXPECT_FALSE(Matches(g, R"({"a":1,})"));
  EXPECT_FALSE(Matches(g, "{\"a\":\"\x01\"}"));
  EXPECT_FALSE(Matches(g, R"({"a":"\ud800"})"));
  EXPECT_FALSE(Matches(g, "{" + std::string(17, ' ') + "}"));  // whitespace runs are bounded
  EXPECT_TRUE(Matches(g, "{" + std::string(16, ' ') + "}"));
}

}  // namespace
}  // namespace convoy::grammar
