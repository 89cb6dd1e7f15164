#include "text/jinja_expression_parser.h"

#include <algorithm>

#include "convoy/status_macros.h"
#include "text/jinja_builtins.h"
#include "text/jinja_parser.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

bool Contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool ExpressionParser::AtTupleEnd(const std::vector<std::string_view>& extra_end) const {
  const Token& token = Peek();
  if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd ||
      token.type == TokenType::kEnd) {
    return true;
  }
  if (token.type == TokenType::kOperator && token.text == ")") return true;
  return token.type == TokenType::kName && Contains(extra_end, token.text);
}

// `a`, or `a, b, ...` as a tuple.
absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool with_condition,
                                                     const std::vector<std::string_view>& extra_end,
                                                     bool explicit_parentheses) {
  const Token start = Peek();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (AtTupleEnd(extra_end)) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condition));
    items.push_back(std::move(item));
    if (!AtOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return Unexpected("an expression");
  }
  ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, start);
  tuple->args = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condition) {
  Nest nest(&depth_);
  RETURN_IF_ERROR(CheckDepth());
  ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  if (!with_condition) return expr;
  while (AtName("if")) {
    ExprPtr condition = MakeExpr(Expr::Kind::kCondition, Next());
    condition->args.push_back(std::move(expr));
    ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    condition->args.push_back(std::move(test));
    ExprPtr otherwise;
    if (AtName("else")) {
      Next();
      ASSIGN_OR_RETURN(otherwise, ParseExpression(/*with_condition=*/true));
    }
    condition->args.push_back(std::move(otherwise));
    expr = std::move(condition);
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (AtName("or")) {
    ExprPtr node = MakeExpr(Expr::Kind::kOr, Next());
    ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (AtName("and")) {
    ExprPtr node = MakeExpr(Expr::Kind::kAnd, Next());
    ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (!AtName("not")) return ParseCompare();
  Nest nest(&depth_);
  RETURN_IF_ERROR(CheckDepth());
  ExprPtr node = MakeExpr(Expr::Kind::kUnary, Next());
  node->name = "not";
  ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
  node->args.push_back(std::move(operand));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  const Token start = Peek();
  ASSIGN_OR_RETURN(ExprPtr first, ParseBinary(0));
  ExprPtr node;
  while (true) {
    std::string op;
    const Token& token = Peek();
    if (token.type == TokenType::kOperator &&
        (token.text == "==" || token.text == "!=" || token.text == "<" || token.text == "<=" ||
         token.text == ">" || token.text == ">=")) {
      op = Next().text;
    } else if (AtName("in")) {
      Next();
      op = "in";
    } else if (AtName("not") && Peek(1).type == TokenType::kName && Peek(1).text == "in") {
      Next();
      Next();
      op = "notin";
    } else {
      break;
    }
    if (!node) {
      node = MakeExpr(Expr::Kind::kCompare, start);
      node->args.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseBinary(0));
    node->ops.push_back(std::move(op));
    node->args.push_back(std::move(operand));
  }
  return node ? std::move(node) : std::move(first);
}

// Left-associative binary levels, loosest first: + -, ~, * / // %, **.
absl::StatusOr<ExprPtr> ExpressionParser::ParseBinary(int level) {
  static const std::vector<std::vector<std::string_view>> kLevels = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  if (level == static_cast<int>(kLevels.size())) return ParseUnary(/*with_filter=*/true);
  ASSIGN_OR_RETURN(ExprPtr left, ParseBinary(level + 1));
  while (Peek().type == TokenType::kOperator && Contains(kLevels[level], Peek().text)) {
    ExprPtr node = MakeExpr(Expr::Kind::kBinary, Peek());
    node->name = Next().text;
    ASSIGN_OR_RETURN(ExprPtr right, ParseBinary(level + 1));
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  Nest nest(&depth_);
  RETURN_IF_ERROR(CheckDepth());
  ExprPtr node;
  if (AtOp("-") || AtOp("+")) {
    node = MakeExpr(Expr::Kind::kUnary, Peek());
    node->name = Next().text;
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(/*with_filter=*/false));
    node->args.push_back(std::move(operand));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) return ParseFilters(std::move(node));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& token = Peek();
  switch (token.type) {
    case TokenType::kName: {
      ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token);
      const std::string& name = token.text;
      if (name == "true" || name == "True") {
        node->literal = Value::Bool(true);
      } else if (name == "false" || name == "False") {
        node->literal = Value::Bool(false);
      } else if (name == "none" || name == "None") {
        node->literal = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = name;
      }
      Next();
      return node;
    }
    case TokenType::kString: {
      ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token);
      std::string text;
      while (Peek().type == TokenType::kString) text += Next().text;
      node->literal = Value::String(std::move(text));
      return node;
    }
    case TokenType::kInteger:
    case TokenType::kFloat: {
      ExprPtr node = MakeExpr(Expr::Kind::kLiteral, token);
      node->literal = token.type == TokenType::kInteger ? Value::Int(token.int_value)
                                                        : Value::Float(token.float_value);
      Next();
      return node;
    }
    case TokenType::kOperator:
      if (token.text == "(") {
        Next();
        ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(/*with_condition=*/true, {}, true));
        RETURN_IF_ERROR(ExpectOp(")"));
        return node;
      }
      if (token.text == "[" || token.text == "{") return ParseContainer();
      break;
    default:
      break;
  }
  return Unexpected("an expression");
}

// [a, b, ...] or {k: v, ...}; a trailing comma is allowed.
absl::StatusOr<ExprPtr> ExpressionParser::ParseContainer() {
  const bool is_list = Peek().text == "[";
  ExprPtr node = MakeExpr(is_list ? Expr::Kind::kList : Expr::Kind::kDict, Next());
  const std::string_view close = is_list ? "]" : "}";
  while (!AtOp(close)) {
    if (!node->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (AtOp(close)) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(/*with_condition=*/true));
    node->args.push_back(std::move(item));
    if (!is_list) {
      RETURN_IF_ERROR(ExpectOp(":"));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(/*with_condition=*/true));
      node->args.push_back(std::move(value));
    }
  }
  Next();
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (AtOp(".")) {
      const Token& dot = Next();
      if (Peek().type == TokenType::kName) {
        ExprPtr attr = MakeExpr(Expr::Kind::kGetAttr, dot);
        attr->name = Next().text;
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      } else if (Peek().type == TokenType::kInteger) {
        ExprPtr item = MakeExpr(Expr::Kind::kGetItem, dot);
        ExprPtr index = MakeExpr(Expr::Kind::kLiteral, Peek());
        index->literal = Value::Int(Next().int_value);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(index));
        node = std::move(item);
      } else {
        return Unexpected("an attribute name after '.'");
      }
    } else if (AtOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (AtOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

// obj[index] or obj[start:stop:step].
absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr object) {
  const Token open = Next();
  ExprPtr bounds[3];
  bool is_slice = false;
  if (!AtOp(":")) {
    ASSIGN_OR_RETURN(bounds[0], ParseExpression(/*with_condition=*/true));
  }
  if (AtOp(":")) {
    is_slice = true;
    Next();
    if (!AtOp("]") && !AtOp(":")) {
      ASSIGN_OR_RETURN(bounds[1], ParseExpression(/*with_condition=*/true));
    }
    if (AtOp(":")) {
      Next();
      if (!AtOp("]")) {
        ASSIGN_OR_RETURN(bounds[2], ParseExpression(/*with_condition=*/true));
      }
    }
  }
  if (AtOp(",")) return ErrorAt(Peek(), "tuple subscripts are not supported");
  RETURN_IF_ERROR(ExpectOp("]"));
  ExprPtr node = MakeExpr(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, open);
  node->args.push_back(std::move(object));
  for (int i = 0; i < (is_slice ? 3 : 1); ++i) node->args.push_back(std::move(bounds[i]));
  return node;
}

// Positional and keyword arguments in parentheses, appended to `node`.
absl::Status ExpressionParser::ParseArguments(Expr* node) {
  RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!AtOp(")")) {
    if (!first) RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (AtOp(")")) break;
    if (AtOp("*") || AtOp("**")) return ErrorAt(Peek(), "*args and **kwargs are not supported");
    if (Peek().type == TokenType::kName && Peek(1).type == TokenType::kOperator &&
        Peek(1).text == "=") {
      std::string key = Next().text;
      Next();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(/*with_condition=*/true));
      node->kwargs.emplace_back(std::move(key), std::move(value));
      continue;
    }
    if (!node->kwargs.empty()) {
      return ErrorAt(Peek(), "positional argument follows keyword argument");
    }
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(/*with_condition=*/true));
    node->args.push_back(std::move(value));
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  ExprPtr node = MakeExpr(Expr::Kind::kCall, Peek());
  node->args.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseArguments(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilters(ExprPtr node) {
  while (true) {
    if (AtOp("|")) {
      Next();
      if (Peek().type != TokenType::kName) return Unexpected("a filter name");
      const Token& name = Peek();
      if (!IsKnownFilter(name.text)) {
        return ErrorAt(name, Cat("unknown filter '", name.text, "'"));
      }
      ExprPtr filter = MakeExpr(Expr::Kind::kFilter, name);
      filter->name = Next().text;
      filter->args.push_back(std::move(node));
      if (AtOp("(")) RETURN_IF_ERROR(ParseArguments(filter.get()));
      node = std::move(filter);
    } else if (AtName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (AtOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  Next();
  bool negated = false;
  if (AtName("not")) {
    Next();
    negated = true;
  }
  if (Peek().type != TokenType::kName) return Unexpected("a test name");
  const Token& name = Peek();
  if (!IsKnownTest(name.text)) return ErrorAt(name, Cat("unknown test '", name.text, "'"));
  ExprPtr test = MakeExpr(Expr::Kind::kTest, name);
  test->name = Next().text;
  test->negated = negated;
  test->args.push_back(std::move(node));
  const Token& next = Peek();
  const bool starts_argument =
      next.type == TokenType::kName || next.type == TokenType::kString ||
      next.type == TokenType::kInteger || next.type == TokenType::kFloat ||
      (next.type == TokenType::kOperator && (next.text == "[" || next.text == "{"));
  if (AtOp("(")) {
    RETURN_IF_ERROR(ParseArguments(test.get()));
  } else if (starts_argument && !AtName("else") && !AtName("or") && !AtName("and")) {
    if (AtName("is")) return ErrorAt(Peek(), "tests cannot be chained with 'is'");
    ASSIGN_OR_RETURN(ExprPtr argument, ParsePrimary());
    ASSIGN_OR_RETURN(argument, ParsePostfix(std::move(argument)));
    test->args.push_back(std::move(argument));
  }
  return test;
}

}  // namespace convoy::jinja
