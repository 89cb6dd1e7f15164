// Jinja2's tests (`x is defined`, `x is divisibleby 3`, ...), as chat templates use them.
#include <map>
#include <string>
#include <string_view>

#include "convoy/status_macros.h"
#include "text/jinja_builtins.h"
#include "text/jinja_operators.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

using TestFn = absl::StatusOr<bool> (*)(const Value&, const CallArgs&, Budget&);

absl::StatusOr<bool> CompareTest(std::string_view op, const Value& t, const CallArgs& a,
                                 Budget& b) {
  if (a.positional.empty()) return absl::InvalidArgumentError("test needs a value to compare");
  return CompareOp(op, t, a.positional[0], b);
}

const std::map<std::string_view, TestFn>& Tests() {
  static const auto* const kTests = new std::map<std::string_view, TestFn>{
      {"boolean",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_bool();
       }},
      {"callable",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_function() || t.is_undefined() ||
                (t.is_dict() && t.dict().kind == MapKind::kLoop);
       }},
      {"defined",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return !t.is_undefined();
       }},
      {"divisibleby",
       [](const Value& t, const CallArgs& a, Budget& b) -> absl::StatusOr<bool> {
         if (a.positional.empty()) return absl::InvalidArgumentError("divisibleby needs a number");
         ASSIGN_OR_RETURN(Value rest, BinaryOp("%", t, a.positional[0], b));
         return !Truthy(rest);
       }},
      {"eq",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest("==", t, a, b); }},
      {"even",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<bool> {
         ASSIGN_OR_RETURN(Value rest, BinaryOp("%", t, Value::Int(2), b));
         return !Truthy(rest);
       }},
      {"false",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_bool() && !t.bool_value();
       }},
      {"float",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_float();
       }},
      {"ge",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest(">=", t, a, b); }},
      {"gt",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest(">", t, a, b); }},
      {"in",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest("in", t, a, b); }},
      {"integer",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.type() == Value::Type::kInt;
       }},
      {"iterable",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return Iterate(t).ok();
       }},
      {"le",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest("<=", t, a, b); }},
      {"lower",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<bool> {
         ASSIGN_OR_RETURN(std::string s, ToStr(t, b));
         return PyLower(s) == s && PyUpper(s) != s;
       }},
      {"lt",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest("<", t, a, b); }},
      {"mapping",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_dict() && t.dict().kind == MapKind::kDict;
       }},
      {"ne",
       [](const Value& t, const CallArgs& a, Budget& b) { return CompareTest("!=", t, a, b); }},
      {"none",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_none();
       }},
      {"number",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<bool> {
         return t.is_number();
       }},
      {"odd",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<bool> {
         ASSIGN_OR_RETURN(Value rest, BinaryOp("%", t, Value::Int(2), b));
         ASSIGN_OR_RETURN(bool equal, Equals(rest, Value::Int(1), b));
         return equal;
       }},
      {"sameas",
       [](const Value& t, const CallArgs& a, Budget& b) -> absl::StatusOr<bool> {
         if (a.positional.empty()) return absl::InvalidArgumentError("sameas needs a value");
         const Value& other = a.positional[0];
         if (t.type() != other.type()) return false;
         if (t.identity() != nullptr) return t.identity() == other.identity();
         return Equals(t, other, b);
       }},
      {"sequence",
       [](const Value& t, const CallArgs&, Budget&) -> absl::
                                                        StatusOr<bool> {
                                                          return t.is_string() || t.is_list() ||
                                                                 t.is_undefined() ||
                                                                 (t.is_dict() &&
                                                                  t.dict().kind == MapKind::kDict);
                                                        }},
      {"string",
       [](const Value& t, const CallArgs&,
          Budget&) -> absl::StatusOr<bool> { return t.is_string(); }},
      {"true",
       [](const Value& t, const CallArgs&,
          Budget&) -> absl::StatusOr<bool> { return t.is_bool() && t.bool_value(); }},
      {"undefined",
       [](const Value& t, const CallArgs&,
          Budget&) -> absl::StatusOr<bool> { return t.is_undefined(); }},
      {"upper",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::
                                                          StatusOr<bool> {
                                                            ASSIGN_OR_RETURN(std::string s,
                                                                             ToStr(t, b));
                                                            return PyUpper(s) == s &&
                                                                   PyLower(s) != s;
                                                          }},
  };
  return *kTests;
}

std::string_view CanonicalTest(std::string_view name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == ">") return "gt";
  if (name == ">=") return "ge";
  if (name == "greaterthan") return "gt";
  if (name == "lessthan") return "lt";
  return name;
}

}  // namespace

bool IsKnownTest(std::string_view name) { return Tests().count(CanonicalTest(name)) > 0; }

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& target, const CallArgs& args,
                               Budget& budget) {
  const auto& tests = Tests();
  const auto it = tests.find(CanonicalTest(name));
  if (it == tests.end()) return absl::InvalidArgumentError(Cat("No test named '", name, "'."));
  RETURN_IF_ERROR(budget.Spend(1));
  return it->second(target, args, budget);
}

}  // namespace convoy::jinja
