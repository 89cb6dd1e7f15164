// Regular expressions (a subset of Python's `re` and ECMAScript syntax) as grammar expressions that
// match the whole text.
//
// Supported: literals, `.` (any code point but \n), classes [...] and [^...] with ranges and
// escapes, \d \w \s (ASCII) and \D \W \S (ASCII characters outside them), \n \r \t \f \v \0 \xHH
// \uHHHH and escaped punctuation, groups (...), (?:...), (?P<name>...), (?<name>...),
// alternation |, quantifiers * + ? {m} {m,} {m,n} (a lazy `?` after one is accepted: it matches
// the same texts), and ^ at the very start and $ at the very end. Refused, naming what: back
// references, lookaround, word boundaries, inline flags, possessive quantifiers, anchors elsewhere.
#ifndef CONVOY_GRAMMAR_REGEX_PARSER_H_
#define CONVOY_GRAMMAR_REGEX_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/expr.h"

namespace convoy::grammar {

// The texts that `pattern` matches in full. With `json_string`, each matched character is written
// as it must appear inside a JSON string ("\"", "\\", "\n", "\u001f", ...), for a schema's
// "pattern". INVALID_ARGUMENT "regular expression at offset N: what".
absl::StatusOr<Expr> ParseRegex(std::string_view pattern, bool json_string);

// One code point of `ranges` as it appears inside a JSON string: plain where JSON allows it,
// escaped otherwise.
Expr JsonStringChar(std::vector<CodepointRange> ranges);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_REGEX_PARSER_H_
