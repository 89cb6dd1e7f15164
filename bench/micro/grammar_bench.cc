// GrammarMatcher::FillNextTokenMask over SmolLM2's 49,152-token vocabulary (the default model's;
// a synthetic one when the tokenizer fixture is missing), while a random model generates from a
// grammar: each iteration is one whole sequence with a fresh matcher, so cold masks count. Reports
// the p50 / p99 / max of the per-token mask time (µs) over every token of every iteration.
//
//   build/bench/micro/grammar_bench [--benchmark_filter=...]
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/random_model.h"
#include "grammar/smollm2_vocabulary.h"

namespace convoy::grammar {
namespace {

const std::shared_ptr<const TokenVocabulary>& Vocabulary() {
  static const auto* vocab =
      new std::shared_ptr<const TokenVocabulary>(testing::SmolLm2Vocabulary(CONVOY_SOURCE_DIR));
  return *vocab;
}

std::shared_ptr<const Grammar> BenchGrammar(int which) {
  switch (which) {
    case 0:
      return AnyJsonObject();
    case 1:  // an object with formats, bounds, arrays and enums
      return *CompileJsonSchema(R"({"type":"object","properties":{
        "id":{"type":"string","format":"uuid"},"title":{"type":"string","maxLength":30},
        "start":{"type":"string","format":"date-time"},
        "attendees":{"type":"array","items":{"type":"string","format":"email"},"maxItems":3},
        "priority":{"type":"integer","minimum":1,"maximum":5},
        "status":{"enum":["draft","confirmed","cancelled"]},
        "notes":{"type":"string"}},"required":["id","title","start","attendees"],
        "additionalProperties":false})");
    case 2:  // recursion through $ref
      return *CompileJsonSchema(R"({"$defs":{"node":{"type":"object","properties":{
        "value":{"type":"integer"},"label":{"type":"string"},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],
        "additionalProperties":false}},"$ref":"#/$defs/node"})");
    default:
      return *CompileGbnf(R"(root ::= sentence ("." ws sentence)* "."
sentence ::= word (" " word)*
word ::= [a-zA-Z]+
ws ::= [ \n]?)");
  }
}

void BM_FillNextTokenMask(benchmark::State& state) {
  const auto& vocab = Vocabulary();
  const auto grammar = BenchGrammar(static_cast<int>(state.range(0)));
  std::vector<double> micros;
  std::chrono::steady_clock::time_point start;
  uint64_t seed = 1;
  for (auto _ : state) {
    GrammarMatcher matcher(grammar, vocab);
    testing::RunRandomModel(
        matcher, *vocab, seed++, 48, 400, [&] { start = std::chrono::steady_clock::now(); },
        [&] {
          micros.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count());
        });
  }
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) return;
  state.counters["tokens"] = static_cast<double>(micros.size());
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[micros.size() * 99 / 100];
  state.counters["max_us"] = micros.back();
}
BENCHMARK(BM_FillNextTokenMask)
    ->ArgName("grammar")  // 0 any JSON object, 1 event schema, 2 recursive tree, 3 GBNF text
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace convoy::grammar
