// Drives a random model over every schema of a suite and writes what it produced, for
// validate_json_schema_suite.py to check with Python's jsonschema.
//
//   json_schema_suite SOURCE_DIR SUITE_JSON OUT_DIR [SEEDS]
//
// Writes OUT_DIR/<index>_<seed>.json (the text, when the run ended with an end token) and exits 1
// when a schema does not compile, a run breaks a matcher contract, or too few runs finish.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "nlohmann/json.hpp"
#include "random_model.h"
#include "smollm2_vocabulary.h"

int main(int argc, char** argv) {
  using namespace convoy::grammar;
  if (argc < 4) {
    std::cerr << "usage: json_schema_suite SOURCE_DIR SUITE_JSON OUT_DIR [SEEDS]\n";
    return 2;
  }
  const int seeds = argc > 4 ? std::atoi(argv[4]) : 4;
  bool real = false;
  auto vocab = testing::SmolLm2Vocabulary(argv[1], &real);
  std::cout << "vocabulary: " << (real ? "SmolLM2" : "synthetic") << ", " << vocab->size()
            << " tokens\n";
  std::ifstream in(argv[2]);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::ordered_json suite = nlohmann::ordered_json::parse(buffer.str());
  std::filesystem::create_directories(argv[3]);
  int failures = 0, finished = 0, runs = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < suite.size(); ++i) {
    const std::string name = suite[i]["name"];
    auto grammar = CompileJsonSchema(suite[i]["schema"].dump());
    if (!grammar.ok()) {
      std::cout << "FAIL " << name << ": " << grammar.status() << "\n";
      ++failures;
      continue;
    }
    int done = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      GrammarMatcher matcher(*grammar, vocab);
      testing::RandomRun run = testing::RunRandomModel(matcher, *vocab, 1000 * i + seed);
      ++runs;
      if (!run.error.ok()) {
        std::cout << "FAIL " << name << " seed " << seed << ": " << run.error << "\n";
        ++failures;
        continue;
      }
      if (!run.finished) continue;
      ++done;
      std::ofstream out(
          std::string(argv[3]) + "/" + std::to_string(i) + "_" + std::to_string(seed) + ".json",
          std::ios::binary);
      out << run.text;
    }
    finished += done;
    if (done == 0) {
      std::cout << "FAIL " << name << ": no run finished\n";
      ++failures;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << suite.size() << " schemas, " << runs << " runs, " << finished << " finished, "
            << failures << " failures, " << seconds << " s\n";
  return failures == 0 ? 0 : 1;
}
