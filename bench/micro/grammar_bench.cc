// GrammarMatcher::FillNextTokenMask over SmolLM2's 49,152-token vocabulary (the default model's;
// a synthetic one when the tokenizer fixture is missing), while a random model generates from a
// grammar. Reports the p50 / p99 / max of the per-token mask time (µs):
//   BM_ColdRequest: each iteration compiles the grammar afresh and generates one sequence, so
//     every mask is the first of its state (the first request on a schema);
//   BM_WarmRequests: each iteration compiles the grammar afresh and generates 20 sequences in a
//     row, a new matcher each, timing sequences 2..20 only (serving: later requests on a schema
//     find the masks earlier ones computed, through the grammar's shared MaskCache).
//
//   build/bench/micro/grammar_bench [--benchmark_filter=...]
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
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
    case 0:  // AnyJsonObject()'s, but a new Grammar each time, with its own empty MaskCache
      return std::make_shared<const Grammar>(AnyJsonObjectProgram());
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

// Generates one sequence with a new matcher; appends each mask's time (µs) to `micros` if given.
void RunSequence(const std::shared_ptr<const Grammar>& grammar, uint64_t seed,
                 std::vector<double>* micros) {
  const auto& vocab = Vocabulary();
  GrammarMatcher matcher(grammar, vocab);
  std::chrono::steady_clock::time_point start;
  testing::RunRandomModel(
      matcher, *vocab, seed, 48, 400, [&] { start = std::chrono::steady_clock::now(); },
      [&] {
        if (micros == nullptr) return;
        micros->push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
      });
}

void Report(benchmark::State& state, std::vector<double>& micros) {
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) return;
  state.counters["tokens"] = static_cast<double>(micros.size());
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[micros.size() * 99 / 100];
  state.counters["max_us"] = micros.back();
}

void BM_ColdRequest(benchmark::State& state) {
  std::vector<double> micros;
  uint64_t seed = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const auto grammar = BenchGrammar(static_cast<int>(state.range(0)));
    state.ResumeTiming();
    RunSequence(grammar, seed++, &micros);
  }
  Report(state, micros);
}

void BM_WarmRequests(benchmark::State& state) {
  constexpr int kSequences = 20;
  std::vector<double> micros;
  uint64_t seed = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const auto grammar = BenchGrammar(static_cast<int>(state.range(0)));
    state.ResumeTiming();
    for (int i = 0; i < kSequences; ++i) RunSequence(grammar, seed++, i == 0 ? nullptr : &micros);
  }
  Report(state, micros);
}

// Grammars: 0 any JSON object, 1 event schema, 2 recursive tree, 3 GBNF text.
BENCHMARK(BM_ColdRequest)->ArgName("grammar")->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WarmRequests)->ArgName("grammar")->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace convoy::grammar
