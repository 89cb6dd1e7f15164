// GrammarMatcher::FillNextTokenMask over SmolLM2's 49,152-token vocabulary (the default model's;
// a synthetic one when the tokenizer fixture is missing), while a random model generates from a
// grammar. Reports the p50 / p99 / max of the per-token mask time (µs), each way of computing a
// mask side by side (tables:0 walks the trie for every new state, tables:1 uses the grammar's
// PositionMasks):
//   BM_ColdRequest: each iteration compiles the grammar afresh and generates one sequence, so
//     every mask is the first of its state (the first request on a schema); tables:1 also reports
//     build_ms, the time to build the tables (once per grammar and vocabulary, when the first
//     matcher is made, outside the mask times);
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
void RunSequence(const std::shared_ptr<const Grammar>& grammar, bool tables, uint64_t seed,
                 std::vector<double>* micros) {
  const auto& vocab = Vocabulary();
  GrammarMatcher matcher(grammar, vocab, grammar->MaskCacheFor(vocab),
                         tables ? grammar->PositionMasksFor(vocab) : nullptr);
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

// The tables' build time (ms) for a freshly compiled grammar, or 0 without tables.
double BuildTables(const std::shared_ptr<const Grammar>& grammar, bool tables) {
  if (!tables) return 0;
  const auto start = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(grammar->PositionMasksFor(Vocabulary()));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void BM_ColdRequest(benchmark::State& state) {
  const bool tables = state.range(1) != 0;
  std::vector<double> micros;
  double build_ms = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const auto grammar = BenchGrammar(static_cast<int>(state.range(0)));
    build_ms += BuildTables(grammar, tables);
    state.ResumeTiming();
    RunSequence(grammar, tables, seed++, &micros);
  }
  Report(state, micros);
  if (tables) state.counters["build_ms"] = build_ms / static_cast<double>(state.iterations());
}

void BM_WarmRequests(benchmark::State& state) {
  constexpr int kSequences = 20;
  std::vector<double> micros;
  uint64_t seed = 1;
  const bool tables = state.range(1) != 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto grammar = BenchGrammar(static_cast<int>(state.range(0)));
    BuildTables(grammar, tables);
    state.ResumeTiming();
    for (int i = 0; i < kSequences; ++i) {
      RunSequence(grammar, tables, seed++, i == 0 ? nullptr : &micros);
    }
  }
  Report(state, micros);
}

// Grammars: 0 any JSON object, 1 event schema, 2 recursive tree, 3 GBNF text; tables 0 or 1.
BENCHMARK(BM_ColdRequest)
    ->ArgNames({"grammar", "tables"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WarmRequests)
    ->ArgNames({"grammar", "tables"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace convoy::grammar
