// The syntax tree of a parsed template: expressions and statements, each with its source position
// for error messages. Built once by the parser, then only read (renders may share it).
#ifndef CONVOY_TEXT_JINJA_AST_H_
#define CONVOY_TEXT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace convoy::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // args: items
    kTuple,      // args: items
    kDict,       // args: key, value, key, value, ...
    kGetAttr,    // args[0].name
    kGetItem,    // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]]; absent bounds are nullptr
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..])
    kUnary,      // name ("-", "+", "not") args[0]
    kBinary,     // args[0] name args[1]: + - * / // % ** ~
    kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
    kAnd,        // args[0] and args[1]
    kOr,         // args[0] or args[1]
    kCondition,  // args[0] if args[1] else args[2] (args[2] may be nullptr)
  };

  Kind kind;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: `is not`
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body)...; else_body
    kFor,       // for targets in expr [if filter]: body; else_body
    kSet,       // set targets = expr, or set targets[0].attribute = expr
    kSetBlock,  // set targets[0] %} body {% endset
    kBreak,
    kContinue,
    kGeneration,  // transformers' {% generation %} body {% endgeneration %}: renders body
  };

  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
};

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_AST_H_
