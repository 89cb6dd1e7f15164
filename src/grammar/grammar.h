// Grammars for constrained decoding: compiled once from GBNF, a regular expression, a list of
// choices or a JSON schema, then driven token by token by a GrammarMatcher (grammar_matcher.h).
//
// Every Compile* function returns INVALID_ARGUMENT naming what is wrong and where (line:column in
// GBNF, the JSON pointer in a schema), and refuses what would pass a limit of limits.h. What each
// accepts is in docs/grammar.md.
#ifndef CONVOY_GRAMMAR_GRAMMAR_H_
#define CONVOY_GRAMMAR_GRAMMAR_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grammar/mask_cache.h"
#include "grammar/position_masks.h"
#include "grammar/program.h"
#include "grammar/token_vocabulary.h"

namespace convoy::grammar {

// An immutable compiled grammar, shared between requests and threads. Its contents are for the
// matcher; callers only pass it on. It also holds, per vocabulary, the masks its matchers computed
// (a MaskCache bounded by kMaxSharedMaskBytes) and its PositionMasks, which live as long as the
// grammar.
class Grammar {
 public:
  explicit Grammar(Program program) : program_(std::move(program)) {}
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  const Program& program() const { return program_; }
  // The masks shared by every matcher of this grammar over `vocab`, made on first use. Thread-safe.
  // A vocabulary's cache is dropped once the vocabulary is gone and another one is asked for.
  std::shared_ptr<MaskCache> MaskCacheFor(
      const std::shared_ptr<const TokenVocabulary>& vocab) const;
  // This grammar's tables over `vocab`, built on first use (within kMaxPositionMaskBytes and
  // kMaxPositionMaskSteps; nullptr past them: matchers walk the trie instead). Thread-safe; other
  // callers for this grammar wait while one builds them.
  std::shared_ptr<const PositionMasks> PositionMasksFor(
      const std::shared_ptr<const TokenVocabulary>& vocab) const;

 private:
  struct ForVocabulary {
    // The vocabulary's owner (its control block, kept alive by the weak_ptr), so a new vocabulary
    // at a freed one's address never finds the old masks.
    std::weak_ptr<const TokenVocabulary> owner;
    std::shared_ptr<MaskCache> masks;
    bool tables_built = false;
    std::shared_ptr<const PositionMasks> tables;  // or nullptr
  };
  ForVocabulary& EntryFor(const std::shared_ptr<const TokenVocabulary>& vocab) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  Program program_;
  mutable absl::Mutex mutex_;
  mutable std::vector<ForVocabulary> caches_ ABSL_GUARDED_BY(mutex_);
};

// GBNF (close to llama.cpp's): rules `name ::= alternatives`, start rule "root".
absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(std::string_view text);
// The whole text matches `pattern` (see docs/grammar.md for the syntax).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileRegex(std::string_view pattern);
// The whole text is exactly one of `choices` (at least one).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileChoices(
    const std::vector<std::string>& choices);
// A JSON text valid against the schema (given as JSON text).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json);
// OpenAI's response_format json_object: any JSON object. Built once and shared.
std::shared_ptr<const Grammar> AnyJsonObject();

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_GRAMMAR_H_
