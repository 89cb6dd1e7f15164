// The flat form of a compiled grammar, and the builder that lowers rule expressions to it.
//
// A program is a list of rules; a rule is a list of alternatives; an alternative is a run of
// elements in `elements` ending with a kEnd element. An element matches one byte of a byte set, or
// calls a rule. A position is an index into `elements`.
#ifndef CONVOY_GRAMMAR_PROGRAM_H_
#define CONVOY_GRAMMAR_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grammar/expr.h"

namespace convoy::grammar {

struct Element {
  enum Kind : uint8_t { kSet, kRef, kEnd };
  Kind kind = kEnd;
  int32_t arg = 0;  // kSet: index into sets; kRef: the rule
};

struct Program {
  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  // Rule r's alternatives start at alt_starts[rule_alts[r]] .. alt_starts[rule_alts[r + 1] - 1].
  std::vector<int32_t> rule_alts;
  std::vector<int32_t> alt_starts;
  std::vector<std::string> rule_names;
  int32_t root = 0;

  int32_t rule_count() const { return static_cast<int32_t>(rule_names.size()); }
};

// Collects rules as expressions and lowers them: nested alternatives and repetitions become helper
// rules, character classes become UTF-8 byte sequences. Not thread-safe.
class GrammarBuilder {
 public:
  // A new rule; `name` is for error messages and need not be unique.
  int32_t AddRule(std::string name);
  // REQUIRES: `rule` came from AddRule.
  void SetBody(int32_t rule, Expr body);
  bool HasBody(int32_t rule) const { return has_body_[rule]; }
  const std::string& name(int32_t rule) const { return names_[rule]; }
  int32_t rule_count() const { return static_cast<int32_t>(names_.size()); }

  // Lowers every rule. INVALID_ARGUMENT when a rule has no body, when a rule can reach itself
  // without consuming a byte (left recursion), or past a limit of limits.h.
  absl::StatusOr<Program> Build(int32_t root);

 private:
  absl::Status LowerRule(int32_t rule, const Expr& body);
  absl::Status AppendSequence(int32_t owner, const Expr& e, std::vector<Element>& out);
  absl::StatusOr<Element> SingleElement(int32_t owner, const Expr& e);
  absl::StatusOr<int32_t> HelperRule(int32_t owner, const char* what, Expr body);
  absl::StatusOr<int32_t> ClassRule(int32_t owner, const std::vector<CodepointRange>& ranges);
  absl::Status AddAlternative(int32_t rule, const std::vector<Element>& elements);
  Element SetElement(const ByteSet& set);
  absl::Status CheckLeftRecursion() const;

  std::vector<std::string> names_;
  std::vector<Expr> bodies_;
  std::vector<bool> has_body_;
  std::vector<std::vector<int32_t>> alts_;  // per rule: element index of each alternative
  std::vector<std::pair<int32_t, Expr>> pending_;
  absl::flat_hash_map<std::string, int32_t> class_rules_;
  absl::flat_hash_map<std::string, int32_t> set_ids_;
  Program program_;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_PROGRAM_H_
