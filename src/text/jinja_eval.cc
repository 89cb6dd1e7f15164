#include "text/jinja_eval.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_operators.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

// Whether storing `value` in a namespace would nest namespaces (and so allow cycles). Shared
// containers are visited once, so values that share their parts cost their distinct size.
bool HoldsNamespace(const Value& value, std::unordered_set<const void*>* seen) {
  if (value.is_namespace()) return true;
  if (value.identity() == nullptr || !seen->insert(value.identity()).second) return false;
  if (value.is_list()) {
    for (const Value& item : value.list().items) {
      if (HoldsNamespace(item, seen)) return true;
    }
  }
  if (value.is_dict()) {
    for (const auto& entry : value.dict().entries) {
      if (HoldsNamespace(entry.second, seen)) return true;
    }
  }
  return false;
}

bool HoldsNamespace(const Value& value) {
  std::unordered_set<const void*> seen;
  return HoldsNamespace(value, &seen);
}

class Evaluator {
 public:
  Evaluator(const CallEnvironment& environment, const RenderLimits& limits)
      : environment_(environment),
        budget_(limits.max_steps, limits.max_string_bytes, limits.max_list_items) {
    scopes_.emplace_back();
  }

  void Define(const std::string& name, Value value) { scopes_.front()[name] = std::move(value); }

  absl::Status Exec(const Body& body, std::string* out) {
    for (const Stmt& stmt : body) {
      RETURN_IF_ERROR(ExecStmt(stmt, out));
      if (flow_ != Flow::kNormal) break;
    }
    return absl::OkStatus();
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // A scope for the duration of one loop iteration.
  class ScopeGuard {
   public:
    explicit ScopeGuard(Evaluator* evaluator) : evaluator_(evaluator) {
      evaluator_->scopes_.emplace_back();
    }
    ~ScopeGuard() { evaluator_->scopes_.pop_back(); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    Evaluator* evaluator_;
  };

  // Prefixes an error with the position of the construct that raised it. The template's own
  // raise_exception() messages stay as the template wrote them.
  static absl::Status At(int line, int column, const absl::Status& status) {
    if (status.ok() || status.GetPayload(kRaisedPayload).has_value()) return status;
    return absl::Status(status.code(),
                        Cat("line ", line, ", column ", column, ": ", status.message()));
  }
  template <typename T>
  static absl::StatusOr<T> At(const Expr& expr, absl::StatusOr<T> result) {
    if (result.ok()) return result;
    return At(expr.line, expr.column, result.status());
  }

  Value Lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto it = scope->find(name);
      if (it != scope->end()) return it->second;
    }
    return Value::Undefined(Cat("'", name, "' is undefined"));
  }

  void Assign(const std::string& name, Value value) { scopes_.back()[name] = std::move(value); }

  // Spends for work proportional to the size of a value that an operation reads or builds, so
  // that repeating cheap-looking operations on long strings or lists stays within the budget.
  absl::Status Charge(const Expr& expr, const Value& value) {
    RETURN_IF_ERROR(At(expr.line, expr.column, CheckDepth(value)));
    if (value.is_string()) {
      return At(expr.line, expr.column, budget_.SpendBytes(value.string_value().size()));
    }
    if (value.is_list()) {
      return At(expr.line, expr.column,
                budget_.Spend(static_cast<int64_t>(value.list().items.size())));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Value> Charged(const Expr& expr, absl::StatusOr<Value> result) {
    if (!result.ok()) return At(expr.line, expr.column, result.status());
    RETURN_IF_ERROR(Charge(expr, *result));
    return result;
  }

  // Binds `targets` to `value`, unpacking it when there is more than one target.
  absl::Status Bind(const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      Assign(targets[0], value);
      return absl::OkStatus();
    }
    if (!value.is_list() && !value.is_string() && !value.is_dict()) {
      return absl::InvalidArgumentError(
          Cat("cannot unpack non-iterable ", TypeName(value), " object"));
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
    if (items.size() != targets.size()) {
      return absl::InvalidArgumentError(
          Cat(items.size() > targets.size() ? "too many" : "not enough",
              " values to unpack (expected ", targets.size(), ", got ", items.size(), ")"));
    }
    for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], items[i]);
    return absl::OkStatus();
  }

  absl::Status Emit(const Stmt& stmt, std::string* out) {
    return At(stmt.line, stmt.column, budget_.CheckStringSize(out->size()));
  }

  absl::Status ExecStmt(const Stmt& stmt, std::string* out) {
    RETURN_IF_ERROR(At(stmt.line, stmt.column, budget_.Spend(1)));
    switch (stmt.kind) {
      case Stmt::Kind::kText:
        out->append(stmt.text);
        return Emit(stmt, out);
      case Stmt::Kind::kOutput: {
        ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
        RETURN_IF_ERROR(Charge(*stmt.expr, value));
        RETURN_IF_ERROR(At(stmt.line, stmt.column, AppendStr(value, budget_, out)));
        return Emit(stmt, out);
      }
      case Stmt::Kind::kIf:
        for (const auto& [condition, body] : stmt.branches) {
          ASSIGN_OR_RETURN(Value test, Eval(*condition));
          if (Truthy(test)) return Exec(body, out);
        }
        return Exec(stmt.else_body, out);
      case Stmt::Kind::kFor:
        return ExecFor(stmt, out);
      case Stmt::Kind::kSet:
        return ExecSet(stmt);
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        RETURN_IF_ERROR(Exec(stmt.body, &captured));
        Assign(stmt.targets[0], Value::String(std::move(captured)));
        return absl::OkStatus();
      }
      case Stmt::Kind::kBreak:
        flow_ = Flow::kBreak;
        return absl::OkStatus();
      case Stmt::Kind::kContinue:
        flow_ = Flow::kContinue;
        return absl::OkStatus();
      case Stmt::Kind::kGeneration:
        return Exec(stmt.body, out);
    }
    return absl::OkStatus();
  }

  absl::Status ExecSet(const Stmt& stmt) {
    ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
    if (stmt.attribute.empty()) return At(stmt.line, stmt.column, Bind(stmt.targets, value));
    const Value target = Lookup(stmt.targets[0]);
    if (!target.is_namespace()) {
      return At(stmt.line, stmt.column,
                absl::InvalidArgumentError("cannot assign attribute on non-namespace object"));
    }
    if (HoldsNamespace(value)) {
      return At(stmt.line, stmt.column,
                absl::InvalidArgumentError("a namespace cannot hold a namespace"));
    }
    target.mutable_namespace()->Set(stmt.attribute, std::move(value));
    return absl::OkStatus();
  }

  absl::Status ExecFor(const Stmt& stmt, std::string* out) {
    ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr));
    RETURN_IF_ERROR(Charge(*stmt.expr, iterable));
    ASSIGN_OR_RETURN(std::vector<Value> items, At(*stmt.expr, Iterate(iterable)));
    if (stmt.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        ScopeGuard scope(this);
        RETURN_IF_ERROR(At(stmt.line, stmt.column, Bind(stmt.targets, item)));
        ASSIGN_OR_RETURN(Value test, Eval(*stmt.filter));
        if (Truthy(test)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(stmt.else_body, out);
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      RETURN_IF_ERROR(At(stmt.line, stmt.column, budget_.Spend(1)));
      ScopeGuard scope(this);
      RETURN_IF_ERROR(At(stmt.line, stmt.column, Bind(stmt.targets, items[i])));
      const auto index = static_cast<size_t>(i);
      Assign("loop",
             Value::Dict({{"index", Value::Int(i + 1)},
                          {"index0", Value::Int(i)},
                          {"revindex", Value::Int(length - i)},
                          {"revindex0", Value::Int(length - i - 1)},
                          {"first", Value::Bool(i == 0)},
                          {"last", Value::Bool(i == length - 1)},
                          {"length", Value::Int(length)},
                          {"depth", Value::Int(1)},
                          {"depth0", Value::Int(0)},
                          {"previtem", i > 0 ? items[index - 1]
                                             : Value::Undefined("there is no previous item")},
                          {"nextitem", i + 1 < length ? items[index + 1]
                                                      : Value::Undefined("there is no next item")}},
                         MapKind::kLoop));
      RETURN_IF_ERROR(Exec(stmt.body, out));
      if (flow_ == Flow::kBreak) {
        flow_ = Flow::kNormal;
        break;
      }
      flow_ = Flow::kNormal;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& expr, size_t first_positional) {
    CallArgs args;
    for (size_t i = first_positional; i < expr.args.size(); ++i) {
      ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i]));
      args.positional.push_back(std::move(value));
    }
    for (const auto& [name, value_expr] : expr.kwargs) {
      ASSIGN_OR_RETURN(Value value, Eval(*value_expr));
      args.keyword.emplace_back(name, std::move(value));
    }
    return args;
  }

  absl::StatusOr<Value> EvalCall(const Expr& expr) {
    const Expr& callee = *expr.args[0];
    if (callee.kind == Expr::Kind::kGetAttr) {
      ASSIGN_OR_RETURN(Value object, Eval(*callee.args[0]));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
      const Value* member = object.is_dict() ? object.dict().Find(callee.name) : nullptr;
      if (member != nullptr && member->is_function()) {
        return Charged(expr, CallFunction(member->string_value(), args, environment_, budget_));
      }
      RETURN_IF_ERROR(Charge(expr, object));
      return Charged(expr, CallMethod(object, callee.name, args, budget_));
    }
    ASSIGN_OR_RETURN(Value function, Eval(callee));
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
    if (function.is_function()) {
      return Charged(expr, CallFunction(function.string_value(), args, environment_, budget_));
    }
    if (function.is_undefined()) return At(expr.line, expr.column, UndefinedError(function));
    return At(expr.line, expr.column,
              absl::InvalidArgumentError(Cat("'", TypeName(function), "' object is not callable")));
  }

  absl::StatusOr<Value> Eval(const Expr& expr) {
    RETURN_IF_ERROR(At(expr.line, expr.column, budget_.Spend(1)));
    switch (expr.kind) {
      case Expr::Kind::kLiteral:
        return expr.literal;
      case Expr::Kind::kName:
        return Lookup(expr.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const ExprPtr& item : expr.args) {
          ASSIGN_OR_RETURN(Value value, Eval(*item));
          items.push_back(std::move(value));
        }
        return Charged(
            expr, Value::List(std::move(items),
                              expr.kind == Expr::Kind::kTuple ? SeqKind::kTuple : SeqKind::kList));
      }
      case Expr::Kind::kDict: {
        DictData dict;
        for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
          ASSIGN_OR_RETURN(Value key, Eval(*expr.args[i]));
          if (!key.is_string()) {
            return At(expr.line, expr.column,
                      absl::InvalidArgumentError("dict keys must be strings"));
          }
          ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i + 1]));
          dict.Set(key.string_value(), std::move(value));
        }
        return Charged(expr, Value::Dict(std::move(dict.entries)));
      }
      case Expr::Kind::kGetAttr: {
        ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
        return At(expr, GetAttribute(object, expr.name));
      }
      case Expr::Kind::kGetItem: {
        ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
        ASSIGN_OR_RETURN(Value key, Eval(*expr.args[1]));
        if (object.is_string()) RETURN_IF_ERROR(Charge(expr, object));
        return At(expr, GetItem(object, key));
      }
      case Expr::Kind::kSlice: {
        ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (expr.args[i + 1]) {
            ASSIGN_OR_RETURN(bounds[i], Eval(*expr.args[i + 1]));
          }
        }
        RETURN_IF_ERROR(Charge(expr, object));
        return Charged(expr, Slice(object, bounds[0], bounds[1], bounds[2], budget_));
      }
      case Expr::Kind::kCall:
        return EvalCall(expr);
      case Expr::Kind::kFilter: {
        ASSIGN_OR_RETURN(Value target, Eval(*expr.args[0]));
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
        RETURN_IF_ERROR(Charge(expr, target));
        return Charged(expr, ApplyFilter(expr.name, target, args, budget_));
      }
      case Expr::Kind::kTest: {
        ASSIGN_OR_RETURN(Value target, Eval(*expr.args[0]));
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
        RETURN_IF_ERROR(Charge(expr, target));
        ASSIGN_OR_RETURN(bool passed, At(expr, ApplyTest(expr.name, target, args, budget_)));
        return Value::Bool(passed != expr.negated);
      }
      case Expr::Kind::kUnary: {
        ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0]));
        if (expr.name == "not") return Value::Bool(!Truthy(operand));
        return At(expr, UnaryOp(expr.name, operand));
      }
      case Expr::Kind::kBinary: {
        ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
        ASSIGN_OR_RETURN(Value right, Eval(*expr.args[1]));
        return Charged(expr, BinaryOp(expr.name, left, right, budget_));
      }
      case Expr::Kind::kCompare: {
        ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
        for (size_t i = 0; i < expr.ops.size(); ++i) {
          ASSIGN_OR_RETURN(Value right, Eval(*expr.args[i + 1]));
          ASSIGN_OR_RETURN(bool holds, At(expr, CompareOp(expr.ops[i], left, right, budget_)));
          if (!holds) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
        if (Truthy(left) == (expr.kind == Expr::Kind::kOr)) return left;
        return Eval(*expr.args[1]);
      }
      case Expr::Kind::kCondition: {
        ASSIGN_OR_RETURN(Value test, Eval(*expr.args[1]));
        if (Truthy(test)) return Eval(*expr.args[0]);
        if (expr.args[2]) return Eval(*expr.args[2]);
        return Value::Undefined(Cat("the inline if-expression on line ", expr.line,
                                    " evaluated to false and no else section was "
                                    "defined."));
      }
    }
    return absl::InternalError("unknown expression kind");
  }

  const CallEnvironment& environment_;
  Budget budget_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  Flow flow_ = Flow::kNormal;
};

}  // namespace

absl::StatusOr<std::string> RenderTemplate(
    const Body& body, const std::vector<std::pair<std::string, Value>>& variables,
    const CallEnvironment& environment, const RenderLimits& limits) {
  Evaluator evaluator(environment, limits);
  for (const std::string& name : GlobalFunctionNames()) {
    evaluator.Define(name, Value::Function(name));
  }
  for (const auto& [name, value] : variables) evaluator.Define(name, value);
  std::string out;
  RETURN_IF_ERROR(evaluator.Exec(body, &out));
  return out;
}

}  // namespace convoy::jinja
