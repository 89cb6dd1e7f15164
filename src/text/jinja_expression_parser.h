// The expression half of the template parser: a cursor over the lexer's tokens with the error
// helpers both halves use, and one method per precedence level as in Jinja2's own parser (so that
// `-x | f` is `f(-x)`, `not x is y` is `not (x is y)` and `a ** b ** c` is `(a ** b) ** c`).
// jinja_parser.cc builds the statement parser on top of it.
#ifndef CONVOY_TEXT_JINJA_EXPRESSION_PARSER_H_
#define CONVOY_TEXT_JINJA_EXPRESSION_PARSER_H_

#include <algorithm>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {

class ExpressionParser {
 public:
  // REQUIRES: `tokens` ends with a kEnd token.
  explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  // `a`, or `a, b, ...` as a tuple, up to the end of the tag or a name in `extra_end`;
  // with_condition allows `x if c else y` at the top.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition,
                                     const std::vector<std::string_view>& extra_end,
                                     bool explicit_parentheses);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition);

 protected:
  // Counts nesting on the way down; refuses what would go deeper than kMaxNesting.
  class Nest {
   public:
    explicit Nest(int* depth) : depth_(depth) { ++*depth_; }
    ~Nest() { --*depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    int* depth_;
  };

  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& token = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return token;
  }
  bool AtOp(std::string_view op) const {
    return Peek().type == TokenType::kOperator && Peek().text == op;
  }
  bool AtName(std::string_view name) const {
    return Peek().type == TokenType::kName && Peek().text == name;
  }

  absl::Status ErrorAt(const Token& token, std::string_view message) const {
    return absl::InvalidArgumentError(
        Cat("line ", token.line, ", column ", token.column, ": ", message));
  }
  absl::Status Unexpected(std::string_view expected) const {
    return ErrorAt(Peek(), Cat("expected ", expected, ", got ", DescribeToken(Peek())));
  }
  absl::Status CheckDepth() const {
    if (depth_ > kMaxNesting) {
      return ErrorAt(Peek(), Cat("nested deeper than ", kMaxNesting, " levels"));
    }
    return absl::OkStatus();
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!AtOp(op)) return Unexpected(Cat("'", op, "'"));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectType(TokenType type, std::string_view what) {
    if (Peek().type != type) return Unexpected(what);
    Next();
    return absl::OkStatus();
  }
  static ExprPtr MakeExpr(Expr::Kind kind, const Token& at) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = at.line;
    expr->column = at.column;
    return expr;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  // Current nesting of blocks and expressions (see kMaxNesting).
  int depth_ = 0;

 private:
  bool AtTupleEnd(const std::vector<std::string_view>& extra_end) const;
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseBinary(int level);
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseContainer();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr object);
  absl::Status ParseArguments(Expr* node);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);
};

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_EXPRESSION_PARSER_H_
