// GBNF, close to llama.cpp's: `name ::= alternatives` rules, start rule "root".
//
//   root  ::= "{" ws pair ("," ws pair)* "}"   # comments run to the end of the line
//   pair  ::= [a-z]+ ":" [^,}\n]{1,20}
//
// Elements: "literal", [class] and [^class] with ranges, `.` (any code point), rule names,
// ( groups ), and the postfixes * + ? {m} {m,} {m,n} {,n}. Escapes in literals and classes: \n \r
// \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH (all code points, written as UTF-8). A rule may span
// lines; it ends where the next `name ::=` begins.
#ifndef CONVOY_GRAMMAR_GBNF_PARSER_H_
#define CONVOY_GRAMMAR_GBNF_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/program.h"

namespace convoy::grammar {

// Parses and lowers `text`; INVALID_ARGUMENT "line:column: what" for a syntax error, an
// undefined or doubly defined rule, or a missing root.
absl::StatusOr<Program> ParseGbnf(std::string_view text);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_GBNF_PARSER_H_
