// Masks from PositionMasks are bit for bit those of the trie walk: random walks of the 130-schema
// suite, the benchmark's grammars, GBNF and regular expressions over SmolLM2's vocabulary, each
// step's mask computed both ways by matchers that share no cache. Also the limits' fallback.
#include "grammar/position_masks.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/xoshiro.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/limits.h"
#include "grammar_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "smollm2_vocabulary.h"
#include "test_paths.h"

namespace convoy::grammar {
namespace {

const std::shared_ptr<const TokenVocabulary>& SmolLm2() {
  static const auto* vocab =
      new std::shared_ptr<const TokenVocabulary>(testing::SmolLm2Vocabulary(TestSourceDir()));
  return *vocab;
}

struct Walks {
  int steps = 0;
  int differences = 0;
  std::string first_difference;
};

// Drives a matcher that walks the trie and one that uses `tables` side by side, with random
// allowed tokens (ending once it may, past `end_after` steps, or at random before).
void WalkSideBySide(const std::shared_ptr<const Grammar>& grammar,
                    const std::shared_ptr<const PositionMasks>& tables, uint64_t seed,
                    int end_after, Walks& walks) {
  const auto& vocab = SmolLm2();
  GrammarMatcher fast(grammar, vocab, nullptr, tables);
  GrammarMatcher slow(grammar, vocab, nullptr, nullptr);
  Xoshiro256 rng(seed);
  std::vector<uint32_t> a(vocab->mask_words()), b(vocab->mask_words());
  std::vector<int32_t> allowed;
  std::string text;
  for (int step = 0; step < 150; ++step, ++walks.steps) {
    fast.FillNextTokenMask(a.data());
    slow.FillNextTokenMask(b.data());
    if (a != b && walks.differences++ == 0) {
      for (int32_t t = 0; t < vocab->size(); ++t) {
        if (testing::Allowed(a, t) != testing::Allowed(b, t)) {
          walks.first_difference = "after \"" + text + "\": token \"" + vocab->token_bytes(t) +
                                   "\" " + (testing::Allowed(a, t) ? "allowed" : "refused") +
                                   " by the tables only";
          break;
        }
      }
    }
    allowed.clear();
    for (int32_t t = 0; t < vocab->size(); ++t) {
      if (testing::Allowed(b, t)) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    int32_t choice = allowed[rng.Next() % allowed.size()];
    if (slow.IsComplete() && (step > end_after || rng.Next() % 16 == 0)) {
      choice = vocab->end_tokens()[0];
    }
    ASSERT_TRUE(fast.AcceptToken(choice).ok());
    ASSERT_TRUE(slow.AcceptToken(choice).ok());
    if (vocab->is_end_token(choice)) break;
    text += vocab->token_bytes(choice);
  }
}

std::shared_ptr<const PositionMasks> TablesFor(const std::shared_ptr<const Grammar>& grammar) {
  auto tables = grammar->PositionMasksFor(SmolLm2());
  EXPECT_NE(tables, nullptr);
  return tables;
}

TEST(PositionMasksTest, SameMasksAsTrieWalkOnSchemaSuite) {
  std::ifstream in(TestSourceDir() + "/tests/grammar/schemas/suite.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::ordered_json suite = nlohmann::ordered_json::parse(buffer.str());
  ASSERT_EQ(suite.size(), 130u);
  Walks walks;
  for (size_t i = 0; i < suite.size(); ++i) {
    auto grammar = CompileJsonSchema(suite[i]["schema"].dump());
    ASSERT_TRUE(grammar.ok()) << suite[i]["name"];
    const auto tables = TablesFor(*grammar);
    for (int run = 0; run < 3; ++run) {
      WalkSideBySide(*grammar, tables, 1000 * i + run, run == 0 ? 40 : 100, walks);
    }
    EXPECT_EQ(walks.differences, 0) << suite[i]["name"] << ": " << walks.first_difference;
    walks.differences = 0;
  }
  EXPECT_GT(walks.steps, 10000);
}

TEST(PositionMasksTest, SameMasksAsTrieWalkOnOtherGrammars) {
  std::vector<std::shared_ptr<const Grammar>> grammars = {
      std::make_shared<const Grammar>(AnyJsonObjectProgram()),
      *CompileJsonSchema(R"({"$defs":{"node":{"type":"object","properties":{
        "value":{"type":"integer"},"label":{"type":"string"},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],
        "additionalProperties":false}},"$ref":"#/$defs/node"})"),
      *CompileGbnf(R"(root ::= sentence ("." ws sentence)* "."
sentence ::= word (" " word)*
word ::= [a-zA-Z]+
ws ::= [ \n]?)"),
      *CompileGbnf(R"g(root ::= (expr "\n")+
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")" | name "(" (expr ("," " "? expr)*)? ")"
name ::= [a-z]+)g"),
      *CompileRegex(R"((\w+\s?){1,4}[.!?]|\d{3}-\d{4}|"[^"]*")"),
      *CompileChoices({"yes", "no", "yesterday", "maybe not", " the"}),
  };
  for (size_t g = 0; g < grammars.size(); ++g) {
    const auto tables = TablesFor(grammars[g]);
    Walks walks;
    for (int run = 0; run < 12; ++run) {
      WalkSideBySide(grammars[g], tables, 77 * g + run, run % 2 == 0 ? 30 : 120, walks);
    }
    EXPECT_EQ(walks.differences, 0) << "grammar " << g << ": " << walks.first_difference;
    EXPECT_GT(walks.steps, 30) << "grammar " << g;
  }
}

TEST(PositionMasksTest, PastItsLimitsNoTablesAndTheTrieIsWalked) {
  auto grammar = *CompileRegex("[a-z]+ [0-9]{2}");
  const Program& program = grammar->program();
  EXPECT_NE(PositionMasks::Build(program, *SmolLm2(), kMaxPositionMaskBytes, kMaxPositionMaskSteps),
            nullptr);
  EXPECT_EQ(PositionMasks::Build(program, *SmolLm2(), 1024, kMaxPositionMaskSteps), nullptr);
  EXPECT_EQ(PositionMasks::Build(program, *SmolLm2(), kMaxPositionMaskBytes, 100), nullptr);
  // A matcher without tables still masks right.
  GrammarMatcher matcher(grammar, SmolLm2(), nullptr, nullptr);
  const std::vector<uint32_t> bits = testing::Mask(matcher, *SmolLm2());
  int allowed = 0;
  for (int32_t t = 0; t < SmolLm2()->size(); ++t) allowed += testing::Allowed(bits, t);
  EXPECT_GT(allowed, 1000);
}

TEST(PositionMasksTest, BuiltOncePerGrammarAndVocabulary) {
  auto grammar = *CompileRegex("[ab]+");
  auto vocab = testing::ByteVocabulary();
  EXPECT_EQ(grammar->PositionMasksFor(vocab), grammar->PositionMasksFor(vocab));
  EXPECT_NE(grammar->PositionMasksFor(vocab), grammar->PositionMasksFor(testing::ByteVocabulary()));
}

}  // namespace
}  // namespace convoy::grammar
