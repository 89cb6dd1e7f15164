// Grammar pieces for JSON text: whitespace, strings (bounded, by format, by pattern), integers in
// a range, numbers, keys outside a set, and any JSON value. Shared rules are made once per builder.
//
// Whitespace: between JSON tokens at most kMaxJsonWhitespace bytes of space, tab, \n or \r; none
// before or after the document.
#ifndef CONVOY_GRAMMAR_JSON_VALUES_H_
#define CONVOY_GRAMMAR_JSON_VALUES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/expr.h"
#include "grammar/program.h"

namespace convoy::grammar {

// Closed integer bounds of what integers may be written: kMaxIntegerDigits digits.
int64_t MaxJsonInteger();

class JsonValues {
 public:
  // REQUIRES: `builder` outlives this.
  explicit JsonValues(GrammarBuilder* builder) : builder_(builder) {}

  Expr Whitespace();
  // A JSON string of min..max characters (code points; max -1: no bound).
  Expr String(int64_t min_length, int64_t max_length);
  // A JSON string holding `value` exactly (as nlohmann's dump writes it).
  static Expr StringLiteral(const std::string& value);
  // A string in `format` (date, time, date-time, uuid, email); NOT_FOUND for another format.
  absl::StatusOr<Expr> FormattedString(const std::string& format);
  // Integers lo..hi. REQUIRES: lo <= hi, both within +-MaxJsonInteger().
  static Expr IntegerRange(int64_t lo, int64_t hi);
  // Any number (integer part, optional fraction and exponent, each within the digit limits).
  Expr Number();
  // A JSON string other than each of `excluded` (property names); see json_values.cc.
  Expr KeyNotIn(const std::vector<std::string>& excluded);
  // Any JSON value, and any JSON object.
  Expr AnyValue();
  Expr AnyObject();

 private:
  int32_t Shared(int32_t& rule, const char* name, Expr (JsonValues::*body)());
  Expr StringCharBody();
  Expr WhitespaceBody();
  Expr AnyValueBody();
  Expr AnyObjectBody();
  Expr AnyArrayBody();
  Expr AnyStringBody();

  GrammarBuilder* builder_;
  int32_t ws_ = -1;
  int32_t string_char_ = -1;
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
  int32_t any_array_ = -1;
  int32_t any_string_ = -1;
};

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_JSON_VALUES_H_
