#include "text/jinja_parser.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_expression_parser.h"
#include "text/jinja_lexer.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

constexpr std::string_view kUnsupportedTags[] = {
    "macro",   "call",  "filter",     "with", "include", "import",   "from",
    "extends", "block", "autoescape", "do",   "trans",   "pluralize"};
constexpr std::string_view kReserved[] = {"true", "false", "none", "True", "False", "None", "and",
                                          "or",   "not",   "in",   "is",   "if",    "else"};

bool Contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The statement parser: tags and template text, with expressions from ExpressionParser.
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  absl::StatusOr<Body> ParseAll() {
    ASSIGN_OR_RETURN(Body body, ParseBody({}));
    return body;
  }

 private:
  // An open block, for messages about where it should have been closed.
  struct OpenBlock {
    std::string name;
    std::string closer;
    int line;
    int column;
  };

  absl::Status ExpectBlockEnd() {
    return ExpectType(TokenType::kBlockEnd, "end of statement '%}'");
  }

  static Stmt MakeStmt(Stmt::Kind kind, const Token& at) {
    Stmt stmt;
    stmt.kind = kind;
    stmt.line = at.line;
    stmt.column = at.column;
    return stmt;
  }
  // ---------------------------------------------------------------------------------------------
  // Statements.

  // Parses until `{% name` with `name` in `end_tags`, leaving that name as the next token; at the
  // top level (no end tags) until the end of the template.
  absl::StatusOr<Body> ParseBody(const std::vector<std::string_view>& end_tags) {
    Nest nest(&depth_);
    RETURN_IF_ERROR(CheckDepth());
    Body body;
    while (true) {
      const Token& token = Peek();
      switch (token.type) {
        case TokenType::kData: {
          Stmt stmt = MakeStmt(Stmt::Kind::kText, token);
          stmt.text = Next().text;
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kVariableBegin: {
          Stmt stmt = MakeStmt(Stmt::Kind::kOutput, Next());
          ASSIGN_OR_RETURN(stmt.expr, ParseTuple(/*with_condition=*/true, {}, false));
          RETURN_IF_ERROR(ExpectType(TokenType::kVariableEnd, "end of print statement '}}'"));
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kBlockBegin: {
          Next();
          if (Peek().type != TokenType::kName) return Unexpected("a tag name");
          if (Contains(end_tags, Peek().text)) return body;
          ASSIGN_OR_RETURN(Stmt stmt, ParseStatement());
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kEnd:
          if (end_tags.empty()) return body;
          return UnclosedBlock();
        default:
          return Unexpected("template text or a tag");
      }
    }
  }

  absl::Status UnclosedBlock() const {
    const OpenBlock& open = open_blocks_.back();
    return ErrorAt(Peek(),
                   Cat("unexpected end of template: '", open.name, "' opened at line ", open.line,
                       ", column ", open.column, " is never closed with '", open.closer, "'"));
  }

  // Parses the body of a block opened by `tag`, up to one of `end_tags`, and consumes that
  // end tag's name; returns it.
  absl::StatusOr<std::string> ParseBlockBody(const Token& tag, std::string closer,
                                             const std::vector<std::string_view>& end_tags,
                                             Body* body) {
    open_blocks_.push_back({tag.text, std::move(closer), tag.line, tag.column});
    ASSIGN_OR_RETURN(*body, ParseBody(end_tags));
    open_blocks_.pop_back();
    return Next().text;
  }

  absl::StatusOr<Stmt> ParseStatement() {
    const Token& tag = Peek();
    const std::string name = tag.text;
    if (name == "if") return ParseIf();
    if (name == "for") return ParseFor();
    if (name == "set") return ParseSet();
    if (name == "break" || name == "continue") {
      Stmt stmt = MakeStmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, Next());
      if (loop_depth_ == 0) return ErrorAt(tag, Cat("'", name, "' outside of a loop"));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    if (name == "generation") {
      const Token token = Next();
      Stmt stmt = MakeStmt(Stmt::Kind::kGeneration, token);
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(
          ParseBlockBody(token, "endgeneration", {"endgeneration"}, &stmt.body).status());
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    for (std::string_view unsupported : kUnsupportedTags) {
      if (name == unsupported) {
        return ErrorAt(tag, Cat("'", name, "' tags are not supported"));
      }
    }
    if (!open_blocks_.empty() && (name.rfind("end", 0) == 0 || name == "elif" || name == "else")) {
      const OpenBlock& open = open_blocks_.back();
      return ErrorAt(
          tag, Cat("unexpected '", name, "': the innermost open block is '", open.name, "' (line ",
                   open.line, ", column ", open.column, "), closed by '", open.closer, "'"));
    }
    return ErrorAt(tag, Cat("unknown tag '", name, "'"));
  }

  absl::StatusOr<Stmt> ParseIf() {
    const Token tag = Next();
    Stmt stmt = MakeStmt(Stmt::Kind::kIf, tag);
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr condition, ParseTuple(/*with_condition=*/false, {}, false));
      RETURN_IF_ERROR(ExpectBlockEnd());
      Body body;
      ASSIGN_OR_RETURN(std::string end,
                       ParseBlockBody(tag, "endif", {"elif", "else", "endif"}, &body));
      stmt.branches.emplace_back(std::move(condition), std::move(body));
      if (end == "elif") continue;
      if (end == "else") {
        RETURN_IF_ERROR(ExpectBlockEnd());
        RETURN_IF_ERROR(ParseBlockBody(tag, "endif", {"endif"}, &stmt.else_body).status());
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
  }

  // Names assigned by for and set: `a`, `a, b` or `(a, b)`.
  absl::StatusOr<std::vector<std::string>> ParseTargets() {
    const bool parenthesized = AtOp("(");
    if (parenthesized) Next();
    std::vector<std::string> names;
    do {
      if (Peek().type != TokenType::kName) return Unexpected("a variable name");
      for (std::string_view reserved : kReserved) {
        if (Peek().text == reserved) {
          return ErrorAt(Peek(), Cat("cannot assign to '", reserved, "'"));
        }
      }
      names.push_back(Next().text);
    } while (AtOp(",") && (Next(), Peek().type == TokenType::kName));
    if (parenthesized) RETURN_IF_ERROR(ExpectOp(")"));
    return names;
  }

  absl::StatusOr<Stmt> ParseFor() {
    const Token tag = Next();
    Stmt stmt = MakeStmt(Stmt::Kind::kFor, tag);
    ASSIGN_OR_RETURN(stmt.targets, ParseTargets());
    if (!AtName("in")) return Unexpected("'in'");
    Next();
    ASSIGN_OR_RETURN(stmt.expr, ParseTuple(/*with_condition=*/false, {"recursive"}, false));
    if (AtName("if")) {
      Next();
      ASSIGN_OR_RETURN(stmt.filter, ParseExpression(/*with_condition=*/true));
    }
    if (AtName("recursive")) return ErrorAt(Peek(), "recursive loops are not supported");
    RETURN_IF_ERROR(ExpectBlockEnd());
    ++loop_depth_;
    ASSIGN_OR_RETURN(std::string end,
                     ParseBlockBody(tag, "endfor", {"else", "endfor"}, &stmt.body));
    --loop_depth_;
    if (end == "else") {
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBlockBody(tag, "endfor", {"endfor"}, &stmt.else_body).status());
    }
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  absl::StatusOr<Stmt> ParseSet() {
    const Token tag = Next();
    Stmt stmt = MakeStmt(Stmt::Kind::kSet, tag);
    if (Peek().type == TokenType::kName && Peek(1).type == TokenType::kOperator &&
        Peek(1).text == ".") {
      stmt.targets.push_back(Next().text);
      Next();
      if (Peek().type != TokenType::kName) return Unexpected("an attribute name");
      stmt.attribute = Next().text;
    } else {
      ASSIGN_OR_RETURN(stmt.targets, ParseTargets());
    }
    if (AtOp("=")) {
      Next();
      ASSIGN_OR_RETURN(stmt.expr, ParseTuple(/*with_condition=*/true, {}, false));
      RETURN_IF_ERROR(ExpectBlockEnd());
      return stmt;
    }
    if (AtOp("|")) return ErrorAt(Peek(), "filtered set blocks are not supported");
    if (stmt.targets.size() != 1 || !stmt.attribute.empty()) return Unexpected("'='");
    RETURN_IF_ERROR(ExpectBlockEnd());
    stmt.kind = Stmt::Kind::kSetBlock;
    RETURN_IF_ERROR(ParseBlockBody(tag, "endset", {"endset"}, &stmt.body).status());
    RETURN_IF_ERROR(ExpectBlockEnd());
    return stmt;
  }

  int loop_depth_ = 0;
  std::vector<OpenBlock> open_blocks_;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  return Parser(std::move(tokens)).ParseAll();
}

}  // namespace convoy::jinja
