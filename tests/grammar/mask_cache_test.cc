// The masks a matcher gets through the shared MaskCache are exactly those it would compute alone:
// the 130-schema suite walked by matchers on several threads sharing one cache per grammar, each
// beside a matcher that shares nothing, every mask compared bit for bit. Also the cache's bound,
// and that matchers of another grammar or vocabulary never see its masks.
#include "grammar/mask_cache.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/xoshiro.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
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

std::vector<std::shared_ptr<const Grammar>> SuiteGrammars() {
  std::ifstream in(TestSourceDir() + "/tests/grammar/schemas/suite.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::ordered_json suite = nlohmann::ordered_json::parse(buffer.str());
  std::vector<std::shared_ptr<const Grammar>> grammars;
  for (const auto& entry : suite) {
    auto grammar = CompileJsonSchema(entry["schema"].dump());
    EXPECT_TRUE(grammar.ok()) << entry["name"] << ": " << grammar.status();
    if (grammar.ok()) grammars.push_back(*grammar);
  }
  return grammars;
}

// Drives `shared` with random allowed tokens (ending once it may, past 40 steps), `alone` beside
// it; returns how many masks differed (0 expected) and counts the steps.
int WalkSideBySide(GrammarMatcher& shared, GrammarMatcher& alone, const TokenVocabulary& vocab,
                   uint64_t seed, int& steps) {
  Xoshiro256 rng(seed);
  std::vector<uint32_t> a(vocab.mask_words()), b(vocab.mask_words());
  std::vector<int32_t> allowed;
  int differences = 0;
  for (int step = 0; step < 120; ++step, ++steps) {
    shared.FillNextTokenMask(a.data());
    alone.FillNextTokenMask(b.data());
    if (a != b) ++differences;
    allowed.clear();
    for (int32_t t = 0; t < vocab.size(); ++t) {
      if ((b[t >> 5] >> (t & 31)) & 1) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    int32_t choice = allowed[rng.Next() % allowed.size()];
    if (alone.IsComplete() && (step > 40 || rng.Next() % 8 == 0)) choice = vocab.end_tokens()[0];
    if (!shared.AcceptToken(choice).ok() || !alone.AcceptToken(choice).ok()) return differences + 1;
    if (vocab.is_end_token(choice)) break;
  }
  return differences;
}

// Four threads walk every suite grammar at once, each with its own seeds; `cache_for` gives the
// cache the sharing matchers use.
void WalkSuiteOnThreads(
    const std::function<std::shared_ptr<MaskCache>(const std::shared_ptr<const Grammar>&)>&
        cache_for) {
  const auto& vocab = SmolLm2();
  const std::vector<std::shared_ptr<const Grammar>> grammars = SuiteGrammars();
  ASSERT_EQ(grammars.size(), 130u);
  std::vector<std::shared_ptr<MaskCache>> caches;
  for (const auto& grammar : grammars) caches.push_back(cache_for(grammar));
  constexpr int kThreads = 4;
  std::vector<int> differences(kThreads, 0), steps(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t g = 0; g < grammars.size(); ++g) {
        for (int run = 0; run < 2; ++run) {
          GrammarMatcher shared(grammars[g], vocab, caches[g]);
          GrammarMatcher alone(grammars[g], vocab, nullptr);
          differences[t] +=
              WalkSideBySide(shared, alone, *vocab, 7919 * g + 31 * t + run, steps[t]);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(differences[t], 0) << "thread " << t;
    EXPECT_GT(steps[t], 2000) << "thread " << t;
  }
}

TEST(MaskCacheTest, SharedMasksEqualUnsharedOnFourThreads) {
  WalkSuiteOnThreads([&](const std::shared_ptr<const Grammar>& grammar) {
    return grammar->MaskCacheFor(SmolLm2());
  });
}

TEST(MaskCacheTest, EvictionKeepsMasksRight) {
  // Room for about two masks per shard: shards start over all the time.
  const int64_t max_bytes = 16 * 2 * (SmolLm2()->mask_words() * 4 + 256);
  std::vector<std::shared_ptr<MaskCache>> made;
  WalkSuiteOnThreads([&](const std::shared_ptr<const Grammar>& grammar) {
    made.push_back(std::make_shared<MaskCache>(grammar.get(), SmolLm2().get(), max_bytes));
    return made.back();
  });
  int64_t evictions = 0;
  for (const auto& cache : made) {
    EXPECT_LE(cache->bytes(), max_bytes);
    evictions += cache->evictions();
  }
  EXPECT_GT(evictions, 0);
}

TEST(MaskCacheTest, OneCachePerGrammarAndVocabulary) {
  auto grammar = *CompileRegex("[ab]+");
  auto other = *CompileRegex("[cd]+");  // the same positions as `grammar`
  auto vocab = testing::ByteVocabulary();
  auto vocab2 = testing::ByteVocabulary({"ab"});
  EXPECT_EQ(grammar->MaskCacheFor(vocab), grammar->MaskCacheFor(vocab));
  EXPECT_NE(grammar->MaskCacheFor(vocab), grammar->MaskCacheFor(vocab2));
  EXPECT_NE(grammar->MaskCacheFor(vocab), other->MaskCacheFor(vocab));
  EXPECT_TRUE(grammar->MaskCacheFor(vocab)->IsFor(grammar.get(), vocab.get()));

  // A cache of another grammar is not used: its planted mask never shows.
  auto planted = std::make_shared<MaskCache>(other.get(), vocab.get(), kMaxSharedMaskBytes);
  GrammarMatcher probe(other, vocab, planted);
  testing::Mask(probe, *vocab);
  ASSERT_GT(planted->bytes(), 0);  // the initial state's mask, under its key
  GrammarMatcher matcher(grammar, vocab, planted);
  std::vector<uint32_t> bits = testing::Mask(matcher, *vocab);
  EXPECT_TRUE(testing::Allowed(bits, 'a'));
  EXPECT_FALSE(testing::Allowed(bits, 'c'));
}

TEST(MaskCacheTest, DifferentStacksDifferentKeys) {
  // The same positions on top, different returns below: '(' x ')' vs '[' x ']' with x shared.
  auto grammar = *CompileGbnf(R"g(root ::= "(" x ")" | "[" x "]"
x ::= "a" x | "a")g");
  auto vocab = testing::ByteVocabulary();
  auto cache = grammar->MaskCacheFor(vocab);
  GrammarMatcher round(grammar, vocab, cache), square(grammar, vocab, cache);
  ASSERT_TRUE(round.AcceptToken('(').ok());
  ASSERT_TRUE(round.AcceptToken('a').ok());
  ASSERT_TRUE(square.AcceptToken('[').ok());
  ASSERT_TRUE(square.AcceptToken('a').ok());
  const std::vector<uint32_t> r = testing::Mask(round, *vocab);
  const std::vector<uint32_t> s = testing::Mask(square, *vocab);
  EXPECT_TRUE(testing::Allowed(r, ')'));
  EXPECT_FALSE(testing::Allowed(r, ']'));
  EXPECT_TRUE(testing::Allowed(s, ']'));
  EXPECT_FALSE(testing::Allowed(s, ')'));
}

}  // namespace
}  // namespace convoy::grammar
