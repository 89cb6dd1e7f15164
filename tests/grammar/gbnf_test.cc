#include <string>

#include "gmock/gmock.h"
#include "grammar/grammar.h"
#include "grammar_test_util.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy::grammar {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using testing::Matches;

std::shared_ptr<const Grammar> Gbnf(const std::string& text) {
  auto g = CompileGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

TEST(GbnfTest, LiteralsClassesAndRepetition) {
  auto g = Gbnf(R"(root ::= "a" [0-9]+ ("x" | "yz")? [a-c]{2,3})");
  EXPECT_TRUE(Matches(g, "a1ab"));
  EXPECT_TRUE(Matches(g, "a123xabc"));
  EXPECT_TRUE(Matches(g, "a0yzcc"));
  EXPECT_FALSE(Matches(g, "a"));
  EXPECT_FALSE(Matches(g, "a1a"));
  EXPECT_FALSE(Matches(g, "a1abcc"));
  EXPECT_FALSE(Matches(g, "b1ab"));
  EXPECT_FALSE(Matches(g, "a1yab"));
}

TEST(GbnfTest, RulesCommentsAndLines) {
  auto g = Gbnf(R"(# a list
root ::= item ("," item)*   # items
item ::=
    "on"
  | "off"
  | num
num ::= [1-9] [0-9]{0,2}
)");
  EXPECT_TRUE(Matches(g, "on"));
  EXPECT_TRUE(Matches(g, "on,off,999,1"));
  EXPECT_FALSE(Matches(g, "on,"));
  EXPECT_FALSE(Matches(g, "1000"));
  EXPECT_FALSE(Matches(g, "01"));
}

TEST(GbnfTest, UnicodeClassesAndEscapes) {
  auto g = Gbnf(R"(root ::= "\"" [^"\\\n]* "\"" [α-ω] "\u00e9\x41" .)");
  EXPECT_TRUE(Matches(g, "\"日本 é\"βéA!"));
  EXPECT_TRUE(Matches(g, "\"\"ωéA😀"));
  EXPECT_FALSE(Matches(g, "\"a\"b\"éA!"));
  EXPECT_FALSE(Matches(g, "\"a\"AéA!"));
  // Only valid UTF-8: a lone continuation byte or a surrogate's encoding never matches.
  EXPECT_FALSE(Matches(g, "\"\x80\"βéA!"));
  EXPECT_FALSE(Matches(g, "\"\xed\xa0\x80\"βéA!"));
}

TEST(GbnfTest, RecursionRunsDeep) {
  auto g = Gbnf(R"g(root ::= "(" root ")" | "x")g");
  std::string text = std::string(5000, '(') + "x" + std::string(5000, ')');
  EXPECT_TRUE(Matches(g, text));
  EXPECT_FALSE(Matches(g, text + ")"));
  // Right recursion in tail position keeps the stack flat.
  auto list = Gbnf(R"(root ::= "a" root | "")");
  EXPECT_TRUE(Matches(list, std::string(100000, 'a')));
}

TEST(GbnfTest, ErrorsNameLineAndColumn) {
  EXPECT_THAT(CompileGbnf("root ::= foo"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("1:10: rule 'foo' is used but not defined")));
  EXPECT_THAT(CompileGbnf("root ::= \"a\"\nx := \"b\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2:")));
  EXPECT_THAT(CompileGbnf("root ::= \"abc"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:10: unclosed string")));
  EXPECT_THAT(CompileGbnf("root ::= (\"a\" | \"b\"\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:10: unclosed '('")));
  EXPECT_THAT(CompileGbnf("root ::= [a-"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:10")));
  EXPECT_THAT(
      CompileGbnf("root ::= \"a\"\nroot ::= \"b\""),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2:1: rule 'root' is defined twice")));
  EXPECT_THAT(CompileGbnf("start ::= \"a\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no rule 'root'")));
  EXPECT_THAT(CompileGbnf("root ::= \"\\q\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:11: unknown escape")));
  EXPECT_THAT(CompileGbnf("root ::= [z-a]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:11: range out of order")));
  EXPECT_THAT(CompileGbnf("root ::= \"a\"{2000}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:13: repetition bound")));
  EXPECT_THAT(CompileGbnf("root ::= \"a\" )"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1:14: unmatched ')'")));
  EXPECT_THAT(CompileGbnf("root ::= <eos>"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token references")));
}

TEST(GbnfTest, LeftRecursionIsRefused) {
  EXPECT_THAT(CompileGbnf("root ::= root \"a\" | \"b\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("left recursion")));
  EXPECT_THAT(CompileGbnf("root ::= x\nx ::= y? root\ny ::= \"y\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("left recursion")));
}

TEST(GbnfTest, NestingDepthIsLimited) {
  std::string deep = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_THAT(CompileGbnf(deep),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
}

}  // namespace
}  // namespace convoy::grammar
