// Jinja2's operators with Python's semantics: int arithmetic that floors, true division to float,
// str and list concatenation and repetition, chained comparisons, `in`. Integers are 64-bit:
// a result that Python would grow into a big integer fails instead.
#ifndef CONVOY_TEXT_JINJA_OPERATORS_H_
#define CONVOY_TEXT_JINJA_OPERATORS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "text/jinja_value.h"

namespace convoy::jinja {

// op: + - * / // % ** ~
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b, Budget& budget);
// op: - +
absl::StatusOr<Value> UnaryOp(std::string_view op, const Value& operand);
// op: == != < <= > >= in notin
absl::StatusOr<bool> CompareOp(std::string_view op, const Value& a, const Value& b, Budget& budget);

// The error for using an undefined value where a value is needed (Jinja's UndefinedError).
absl::Status UndefinedError(const Value& undefined);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_OPERATORS_H_
