// Renders a parsed template against a set of variables.
//
// Scoping follows Jinja2: each iteration of a for loop has its own scope, so `{% set %}` inside a
// loop is gone by the next iteration and after the loop (templates carry state out of loops in a
// namespace()); `if` bodies share the enclosing scope.
#ifndef CONVOY_TEXT_JINJA_EVAL_H_
#define CONVOY_TEXT_JINJA_EVAL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/jinja_ast.h"
#include "text/jinja_builtins.h"
#include "text/jinja_value.h"

namespace convoy::jinja {

struct RenderLimits {
  // Evaluation steps (expressions, statements, elements visited by deep operations).
  int64_t max_steps = 20'000'000;
  // The longest string a render builds, its output included.
  size_t max_string_bytes = 64 << 20;
  size_t max_list_items = 1 << 20;
};

// Renders `body` with `variables` (and the global functions) in scope. Errors are
// INVALID_ARGUMENT with "line L, column C: ..." (raise_exception's carry only the template's
// message, and kRaisedPayload), or RESOURCE_EXHAUSTED past `limits`.
absl::StatusOr<std::string> RenderTemplate(
    const Body& body, const std::vector<std::pair<std::string, Value>>& variables,
    const CallEnvironment& environment, const RenderLimits& limits);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_EVAL_H_
