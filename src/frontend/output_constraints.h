// Structured output for one loaded model: a request's OutputConstraint (proto/convoy/v1) compiled
// by the grammar engine (src/grammar) into the TokenMask the engine samples under
// (step/token_constraint.h). Holds the model's vocabulary as bytes, built once, and the compiled
// grammars, cached by their text: agents send the same schema again and again, and compiling one
// costs far more than a step.
//
// Thread-safe.
#ifndef CONVOY_FRONTEND_OUTPUT_CONSTRAINTS_H_
#define CONVOY_FRONTEND_OUTPUT_CONSTRAINTS_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.pb.h"
#include "grammar/grammar.h"
#include "grammar/token_vocabulary.h"
#include "step/token_constraint.h"
#include "text/tokenizer.h"

namespace convoy {

class OutputConstraints {
 public:
  // Compiled grammars kept; the least recently used goes first.
  static constexpr size_t kCacheEntries = 128;

  // `model_vocab_size`: the logits' width (ids past the tokenizer's are never allowed).
  // `end_ids`: the tokens that end generation (allowed once the output is complete).
  static absl::StatusOr<std::unique_ptr<OutputConstraints>> Create(const Tokenizer& tokenizer,
                                                                   int32_t model_vocab_size,
                                                                   std::vector<int32_t> end_ids);

  // A new TokenMask that holds one request's output to `constraint`. INVALID_ARGUMENT naming the
  // field ("constraint.json_schema: ...") when it does not compile.
  absl::StatusOr<std::shared_ptr<TokenMask>> Make(const v1::OutputConstraint& constraint);

  struct Stats {
    int64_t compiled = 0;         // grammars compiled (cache misses that compiled)
    int64_t cache_hits = 0;       // requests whose grammar was cached
    absl::Duration compile_time;  // spent compiling, in all
  };
  Stats stats() const;

 private:
  OutputConstraints(std::shared_ptr<const grammar::TokenVocabulary> vocabulary,
                    int32_t model_vocab_size)
      : vocabulary_(std::move(vocabulary)), model_vocab_size_(model_vocab_size) {}

  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> Compile(
      const v1::OutputConstraint& constraint);

  const std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  const int32_t model_vocab_size_;

  mutable absl::Mutex mu_;
  // Most recently used first; the map points into it.
  using Entry = std::pair<std::string, std::shared_ptr<const grammar::Grammar>>;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OUTPUT_CONSTRAINTS_H_
