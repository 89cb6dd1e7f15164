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
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/program.h"

namespace convoy::grammar {

// An immutable compiled grammar, shared between requests and threads. Its contents are for the
// matcher; callers only pass it on.
class Grammar {
 public:
  explicit Grammar(Program program) : program_(std::move(program)) {}
  const Program& program() const { return program_; }

 private:
  Program program_;
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
