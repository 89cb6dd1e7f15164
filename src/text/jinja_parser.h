// Parses the Jinja2 subset that chat templates use into a syntax tree. The grammar and operator
// precedence follow Jinja2's own parser (for instance `-x | f` is `f(-x)`, `not x is y` is
// `not (x is y)`, `a ** b ** c` is `(a ** b) ** c`).
//
// Supported tags: if/elif/else, for (with unpacking, an inline `if` filter and `else`), set
// (names, tuples, namespace attributes, blocks), break, continue, raw, and transformers'
// generation. Anything else (macro, call, filter blocks, include, extends, ...) and any filter or
// test this implementation lacks is refused here, with the line and column of the construct.
#ifndef CONVOY_TEXT_JINJA_PARSER_H_
#define CONVOY_TEXT_JINJA_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "text/jinja_ast.h"

namespace convoy::jinja {

// Nesting of blocks and expressions deeper than this is refused, which keeps parsing and
// evaluation off the end of the stack.
inline constexpr int kMaxNesting = 64;

// INVALID_ARGUMENT with "line L, column C: ..." for anything it cannot parse or does not support.
absl::StatusOr<Body> ParseTemplate(std::string_view source);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_PARSER_H_
