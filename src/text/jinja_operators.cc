#include "text/jinja_operators.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

absl::Status TypeError(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return TypeError(
      Cat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '", TypeName(b), "'"));
}

absl::Status Overflow() { return absl::InvalidArgumentError("integer overflow"); }

// Python's float % and //, whose results take the sign of the divisor.
double FloatMod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double FloatFloorDiv(double a, double b) {
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

absl::StatusOr<Value> IntPower(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 0) return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

absl::StatusOr<Value> FloatPower(double base, double exponent) {
  if (exponent == 0) return Value::Float(1.0);
  if (base == 0 && exponent < 0) {
    return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
  }
  if (base < 0 && exponent != std::floor(exponent)) {
    return absl::InvalidArgumentError("a negative number to a fractional power is complex");
  }
  const double result = std::pow(base, exponent);
  if (std::isinf(result) && std::isfinite(base) && std::isfinite(exponent)) {
    return absl::InvalidArgumentError("numerical result out of range");
  }
  return Value::Float(result);
}

absl::StatusOr<Value> Arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (a.is_integer() && b.is_integer()) {
    const int64_t x = a.int_value();
    const int64_t y = b.int_value();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "/") {
      if (y == 0) return absl::InvalidArgumentError("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value::Int(0);
        return Overflow();
      }
      int64_t quotient = x / y;
      int64_t remainder = x % y;
      if (remainder != 0 && ((remainder < 0) != (y < 0))) {
        --quotient;
        remainder += y;
      }
      return Value::Int(op == "//" ? quotient : remainder);
    }
    return IntPower(x, y);
  }
  const double x = a.AsDouble();
  const double y = b.AsDouble();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return absl::InvalidArgumentError("float division by zero");
    return Value::Float(x / y);
  }
  if (op == "//") {
    if (y == 0) return absl::InvalidArgumentError("float floor division by zero");
    return Value::Float(FloatFloorDiv(x, y));
  }
  if (op == "%") {
    if (y == 0) return absl::InvalidArgumentError("float modulo");
    return Value::Float(FloatMod(x, y));
  }
  return FloatPower(x, y);
}

absl::StatusOr<Value> Repeat(const Value& sequence, int64_t times, Budget& budget) {
  if (times < 0) times = 0;
  if (sequence.is_string()) {
    const std::string& text = sequence.string_value();
    if (!text.empty() && static_cast<uint64_t>(times) > budget.max_string_bytes() / text.size()) {
      return budget.CheckStringSize(budget.max_string_bytes() + 1);
    }
    RETURN_IF_ERROR(budget.SpendBytes(text.size() * static_cast<size_t>(times)));
    std::string out;
    out.reserve(text.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += text;
    return Value::String(std::move(out));
  }
  const ListData& list = sequence.list();
  if (!list.items.empty() &&
      static_cast<uint64_t>(times) > budget.max_list_items() / list.items.size()) {
    return budget.CheckListSize(budget.max_list_items() + 1);
  }
  RETURN_IF_ERROR(budget.Spend(static_cast<int64_t>(list.items.size()) * times));
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) {
    items.insert(items.end(), list.items.begin(), list.items.end());
  }
  return Value::List(std::move(items), list.kind);
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item, Budget& budget) {
  switch (container.type()) {
    case Value::Type::kString:
      if (!item.is_string()) {
        return TypeError(
            Cat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.string_value().find(item.string_value()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& element : container.list().items) {
        ASSIGN_OR_RETURN(bool equal, Equals(element, item, budget));
        if (equal) return true;
      }
      return false;
    case Value::Type::kDict:
      if (container.dict().kind == MapKind::kDict) {
        return item.is_string() && container.dict().Find(item.string_value()) != nullptr;
      }
      break;
    case Value::Type::kUndefined:
      return false;  // Jinja's Undefined iterates as empty.
    default:
      break;
  }
  return TypeError(Cat("argument of type '", TypeName(container), "' is not iterable"));
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(undefined.string_value().empty() ? "an undefined value was used"
                                                                     : undefined.string_value());
}

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               Budget& budget) {
  if (op == "~") {
    ASSIGN_OR_RETURN(std::string left, ToStr(a, budget));
    ASSIGN_OR_RETURN(std::string right, ToStr(b, budget));
    RETURN_IF_ERROR(budget.CheckStringSize(left.size() + right.size()));
    return Value::String(left + right);
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      RETURN_IF_ERROR(budget.CheckStringSize(a.string_value().size() + b.string_value().size()));
      return Value::String(a.string_value() + b.string_value());
    }
    if (a.is_list() && b.is_list() && a.list().kind == b.list().kind) {
      RETURN_IF_ERROR(budget.CheckListSize(a.list().items.size() + b.list().items.size()));
      RETURN_IF_ERROR(
          budget.Spend(static_cast<int64_t>(a.list().items.size() + b.list().items.size())));
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.list().kind);
    }
    if (a.is_string() || a.is_list()) {
      return TypeError(Cat("can only concatenate ", TypeName(a), " (not \"", TypeName(b), "\") to ",
                           TypeName(a)));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && b.is_integer()) return Repeat(a, b.int_value(), budget);
    if (a.is_integer() && (b.is_string() || b.is_list())) return Repeat(b, a.int_value(), budget);
  }
  if (op == "%" && a.is_string()) {
    return absl::InvalidArgumentError("string formatting with '%' is not supported");
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<Value> UnaryOp(std::string_view op, const Value& operand) {
  if (operand.is_undefined()) return UndefinedError(operand);
  if (operand.is_integer()) {
    if (op == "+") return Value::Int(operand.int_value());
    if (operand.int_value() == INT64_MIN) return Overflow();
    return Value::Int(-operand.int_value());
  }
  if (operand.is_float()) return Value::Float(op == "+" ? operand.AsDouble() : -operand.AsDouble());
  return TypeError(Cat("bad operand type for unary ", op, ": '", TypeName(operand), "'"));
}

absl::StatusOr<bool> CompareOp(std::string_view op, const Value& a, const Value& b,
                               Budget& budget) {
  if (op == "==" || op == "!=") {
    ASSIGN_OR_RETURN(bool equal, Equals(a, b, budget));
    return op == "==" ? equal : !equal;
  }
  if (op == "in" || op == "notin") {
    ASSIGN_OR_RETURN(bool found, Contains(b, a, budget));
    return op == "in" ? found : !found;
  }
  ASSIGN_OR_RETURN(int order, Compare(a, b, op, budget));
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace convoy::jinja
