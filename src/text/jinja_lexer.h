// Splits Jinja2 template source into tokens, applying Jinja2's whitespace control as transformers
// configures it (trim_blocks and lstrip_blocks on, keep_trailing_newline off):
//   - newlines are normalized to "\n" and one trailing newline is dropped;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all after it;
//   - trim_blocks: the first newline after `%}` or `#}` is dropped (not after `+%}`);
//   - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are dropped (not
//     before `{%+`, never before `{{`);
//   - comments vanish and `{% raw %}...{% endraw %}` becomes plain text.
#ifndef CONVOY_TEXT_JINJA_LEXER_H_
#define CONVOY_TEXT_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::jinja {

enum class TokenType {
  kData,           // text outside tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords
  kString,         // text holds the decoded literal
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,       // end of the template
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  // Where the token starts in the template source (1-based; columns count characters).
  int line = 1;
  int column = 1;
};

// Fails with INVALID_ARGUMENT naming line and column for an unclosed tag, comment, string or raw
// block, a character that starts no token, or unbalanced brackets inside a tag.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

// A readable name for a token in error messages: 'end of statement block', 'name foo', '}'...
std::string DescribeToken(const Token& token);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_LEXER_H_
