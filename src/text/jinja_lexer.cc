#include "text/jinja_lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code point at `pos` and its length in bytes (an invalid byte counts as one character).
char32_t CodePointAt(std::string_view s, size_t pos, size_t* length) {
  const auto byte = static_cast<unsigned char>(s[pos]);
  size_t n = byte < 0x80 ? 1 : (byte & 0xE0) == 0xC0 ? 2 : (byte & 0xF0) == 0xE0 ? 3 : 4;
  n = std::min(n, s.size() - pos);
  const std::u32string decoded = DecodeUtf8(s.substr(pos, n));
  *length = decoded.size() == 1 ? n : 1;
  return decoded.empty() ? 0xFFFD : decoded[0];
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      size_t tag = src_.find('{', pos_);
      while (tag != std::string::npos && tag + 1 < src_.size() && src_[tag + 1] != '{' &&
             src_[tag + 1] != '%' && src_[tag + 1] != '#') {
        tag = src_.find('{', tag + 1);
      }
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        EmitData(src_.substr(pos_), pos_);
        break;
      }
      RETURN_IF_ERROR(LexTagAt(tag));
    }
    Push(TokenType::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  absl::Status Error(size_t pos, std::string_view message) const {
    int line = 0;
    int column = 0;
    Locate(pos, &line, &column);
    return absl::InvalidArgumentError(Cat("line ", line, ", column ", column, ": ", message));
  }

  void Locate(size_t pos, int* line, int* column) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    *line = static_cast<int>(it - line_starts_.begin()) + 1;
    *column = 1 + static_cast<int>(CodePointCount(std::string_view(src_).substr(*it, pos - *it)));
  }

  Token MakeToken(TokenType type, std::string text, size_t pos) const {
    Token token;
    token.type = type;
    token.text = std::move(text);
    Locate(pos, &token.line, &token.column);
    return token;
  }

  void Push(TokenType type, std::string text, size_t pos) {
    tokens_.push_back(MakeToken(type, std::move(text), pos));
  }

  void EmitData(std::string text, size_t pos) {
    if (!text.empty()) Push(TokenType::kData, std::move(text), pos);
  }

  bool StartsWith(size_t pos, std::string_view prefix) const {
    return std::string_view(src_).substr(pos, prefix.size()) == prefix;
  }

  // Skips Python whitespace (newlines included) from `pos`; records whether the last character
  // skipped was a newline, which is what lstrip_blocks asks of the next text.
  size_t SkipSpace(size_t pos, bool* ended_with_newline) const {
    *ended_with_newline = false;
    while (pos < src_.size()) {
      size_t length = 0;
      const char32_t c = CodePointAt(src_, pos, &length);
      if (!IsPythonSpace(c)) break;
      *ended_with_newline = c == '\n';
      pos += length;
    }
    return pos;
  }

  // Applies the whitespace control of a tag with `modifier` ('-', '+' or 0) to the text before it.
  std::string ControlledText(std::string text, char modifier, bool lstrip) const {
    if (modifier == '-') {
      return PyStrip(text, std::nullopt, /*left=*/false, /*right=*/true);
    }
    if (modifier == '+' || !lstrip) return text;
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    const std::u32string tail = DecodeUtf8(std::string_view(text).substr(line_start));
    if (std::all_of(tail.begin(), tail.end(), IsPythonSpace)) text.resize(line_start);
    return text;
  }

  // If a `{% raw %}` tag starts at `tag`, the position after it; else npos.
  size_t RawBeginEnd(size_t tag, bool* strip_after) const {
    bool unused = false;
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpace(p, &unused);
    if (!StartsWith(p, "raw")) return std::string::npos;
    p = SkipSpace(p + 3, &unused);
    *strip_after = StartsWith(p, "-%}");
    if (*strip_after) return p + 3;
    return StartsWith(p, "%}") ? p + 2 : std::string::npos;
  }

  absl::Status LexTagAt(size_t tag) {
    const char kind = src_[tag + 1];
    const char modifier =
        tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    std::string text = ControlledText(src_.substr(pos_, tag - pos_), modifier, kind != '{');
    EmitData(std::move(text), pos_);
    if (kind == '#') return LexComment(tag, tag + 2 + (modifier ? 1 : 0));
    if (kind == '%') {
      bool strip_after = false;
      const size_t raw_end = RawBeginEnd(tag, &strip_after);
      if (raw_end != std::string::npos) return LexRaw(tag, raw_end, strip_after);
    }
    Push(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag);
    pos_ = tag + 2 + (modifier ? 1 : 0);
    return LexInsideTag(tag, kind);
  }

  absl::Status LexComment(size_t tag, size_t body) {
    const size_t end = src_.find("#}", body);
    if (end == std::string::npos) return Error(tag, "comment '{#' is never closed with '#}'");
    const char modifier =
        end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    FinishTag(end + 2, modifier, /*trim_newline=*/true);
    return absl::OkStatus();
  }

  // Moves past a tag's end at `pos`, applying `-` (skip whitespace) or trim_blocks.
  void FinishTag(size_t pos, char modifier, bool trim_newline) {
    pos_ = pos;
    line_starting_ = false;
    if (modifier == '-') {
      pos_ = SkipSpace(pos_, &line_starting_);
    } else if (modifier != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      line_starting_ = true;
    }
  }

  absl::Status LexRaw(size_t tag, size_t content, bool strip_after) {
    line_starting_ = false;
    if (strip_after) content = SkipSpace(content, &line_starting_);
    for (size_t end = src_.find("{%", content); end != std::string::npos;
         end = src_.find("{%", end + 2)) {
      bool unused = false;
      size_t p = end + 2;
      const char modifier = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (modifier) ++p;
      p = SkipSpace(p, &unused);
      if (!StartsWith(p, "endraw")) continue;
      p = SkipSpace(p + 6, &unused);
      const char end_modifier = StartsWith(p, "-%}") ? '-' : StartsWith(p, "+%}") ? '+' : 0;
      if (end_modifier) ++p;
      if (!StartsWith(p, "%}")) continue;
      EmitData(ControlledText(src_.substr(content, end - content), modifier, true), content);
      FinishTag(p + 2, end_modifier, /*trim_newline=*/true);
      return absl::OkStatus();
    }
    return Error(tag, "'{% raw %}' is never closed with '{% endraw %}'");
  }

  absl::Status LexInsideTag(size_t tag, char kind) {
    std::vector<char> closers;
    while (true) {
      bool unused = false;
      pos_ = SkipSpace(pos_, &unused);
      if (pos_ >= src_.size()) {
        return Error(tag, kind == '%' ? "tag '{%' is never closed with '%}'"
                                      : "tag '{{' is never closed with '}}'");
      }
      if (closers.empty()) {
        const std::string_view end = kind == '%' ? "%}" : "}}";
        const TokenType type = kind == '%' ? TokenType::kBlockEnd : TokenType::kVariableEnd;
        const char modifier = src_[pos_];
        if ((modifier == '-' || (modifier == '+' && kind == '%')) && StartsWith(pos_ + 1, end)) {
          Push(type, "", pos_);
          FinishTag(pos_ + 3, modifier, kind == '%');
          return absl::OkStatus();
        }
        if (StartsWith(pos_, end)) {
          Push(type, "", pos_);
          FinishTag(pos_ + 2, 0, kind == '%');
          return absl::OkStatus();
        }
      }
      RETURN_IF_ERROR(LexToken(&closers));
    }
  }

  absl::Status LexToken(std::vector<char>* closers) {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (IsNameStart(c)) {
      while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
      Push(TokenType::kName, src_.substr(start, pos_ - start), start);
      return absl::OkStatus();
    }
    if (IsDigit(c)) return LexNumber();
    if (c == '\'' || c == '"') return LexString();
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (StartsWith(pos_, op)) {
        Push(TokenType::kOperator, std::string(op), start);
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    if (std::string_view("+-*/%~<>=.:|,;").find(c) != std::string_view::npos) {
      Push(TokenType::kOperator, std::string(1, c), start);
      ++pos_;
      return absl::OkStatus();
    }
    if (c == '(' || c == '[' || c == '{') {
      closers->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      Push(TokenType::kOperator, std::string(1, c), start);
      ++pos_;
      return absl::OkStatus();
    }
    if (c == ')' || c == ']' || c == '}') {
      if (closers->empty()) return Error(start, Cat("unexpected '", std::string(1, c), "'"));
      if (closers->back() != c) {
        return Error(start, Cat("unexpected '", std::string(1, c), "', expected '",
                                std::string(1, closers->back()), "'"));
      }
      closers->pop_back();
      Push(TokenType::kOperator, std::string(1, c), start);
      ++pos_;
      return absl::OkStatus();
    }
    size_t length = 0;
    const char32_t code_point = CodePointAt(src_, pos_, &length);
    std::string shown;
    AppendUtf8(code_point, &shown);
    return Error(start, Cat("unexpected character '", shown, "'"));
  }

  // Digits with single underscores between them, from pos_.
  size_t ScanDigits(size_t p) const {
    while (p < src_.size() && IsDigit(src_[p])) {
      ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && IsDigit(src_[p + 1])) ++p;
    }
    return p;
  }

  absl::Status LexNumber() {
    const size_t start = pos_;
    size_t p = ScanDigits(pos_);
    bool is_float = false;
    // As in Jinja, a number right after '.' (msgs.0.1) is never a float.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
      p = ScanDigits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        p = ScanDigits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < p; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token token = MakeToken(is_float ? TokenType::kFloat : TokenType::kInteger, text, start);
    const char* first = text.data();
    const char* last = text.data() + text.size();
    if (is_float) {
      const auto result = std::from_chars(first, last, token.float_value);
      if (result.ec != std::errc() && result.ec != std::errc::result_out_of_range) {
        return Error(start, "malformed number");
      }
    } else if (std::from_chars(first, last, token.int_value).ec != std::errc()) {
      return Error(start, Cat("integer ", text, " does not fit in 64 bits"));
    }
    tokens_.push_back(std::move(token));
    pos_ = p;
    return absl::OkStatus();
  }

  absl::Status LexString() {
    const size_t start = pos_;
    const char quote = src_[pos_];
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) return Error(start, "string literal is never closed");
    ASSIGN_OR_RETURN(std::string text, DecodeEscapes(start, src_.substr(start + 1, p - start - 1)));
    Push(TokenType::kString, std::move(text), start);
    pos_ = p + 1;
    return absl::OkStatus();
  }

  // Python's 'unicode-escape' decoding, which Jinja applies to string literals.
  absl::StatusOr<std::string> DecodeEscapes(size_t start, std::string_view body) const {
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out.push_back(body[i]);
        continue;
      }
      const char e = body[++i];
      switch (e) {
        case '\n':
          continue;
        case '\\':
          out.push_back('\\');
          continue;
        case '\'':
          out.push_back('\'');
          continue;
        case '"':
          out.push_back('"');
          continue;
        case 'a':
          out.push_back('\a');
          continue;
        case 'b':
          out.push_back('\b');
          continue;
        case 'f':
          out.push_back('\f');
          continue;
        case 'n':
          out.push_back('\n');
          continue;
        case 'r':
          out.push_back('\r');
          continue;
        case 't':
          out.push_back('\t');
          continue;
        case 'v':
          out.push_back('\v');
          continue;
        default:
          break;
      }
      if (e >= '0' && e <= '7') {
        char32_t value = 0;
        int digits = 0;
        while (digits < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') {
          value = value * 8 + static_cast<char32_t>(body[i] - '0');
          ++i;
          ++digits;
        }
        --i;
        AppendUtf8(value, &out);
        continue;
      }
      if (e == 'x' || e == 'u' || e == 'U') {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t value = 0;
        for (int k = 1; k <= digits; ++k) {
          const int d = i + k < body.size() ? HexDigit(body[i + k]) : -1;
          if (d < 0) {
            return Error(start, Cat("truncated \\", std::string(1, e), " escape"));
          }
          value = value * 16 + static_cast<char32_t>(d);
        }
        if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
          return Error(start, "escape is not a valid Unicode character");
        }
        AppendUtf8(value, &out);
        i += digits;
        continue;
      }
      if (e == 'N') return Error(start, "\\N{...} escapes are not supported");
      // Unknown escapes stay as written. Python first turned a non-ASCII character after the
      // backslash into its own \x, \u or \U escape, whose backslash then escapes nothing.
      out.push_back('\\');
      if (static_cast<unsigned char>(e) < 0x80) {
        out.push_back(e);
        continue;
      }
      size_t length = 0;
      const char32_t c = CodePointAt(body, i, &length);
      i += length - 1;
      char hex[16];
      std::snprintf(hex, sizeof(hex),
                    c <= 0xFF     ? "x%02x"
                    : c <= 0xFFFF ? "u%04x"
                                  : "U%08x",
                    static_cast<unsigned>(c));
      out.append(hex);
    }
    return out;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  // Whether the text that follows starts a line (lstrip_blocks strips it then even without a
  // newline in it): true at the start and after a tag end that consumed a newline.
  bool line_starting_ = true;
};

// Jinja2 normalizes "\r\n" and "\r" to "\n" and drops one trailing newline.
std::string Normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(Normalize(source)).Run();
}

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template text";
    case TokenType::kVariableBegin:
      return "'{{'";
    case TokenType::kVariableEnd:
      return "end of print statement '}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block '%}'";
    case TokenType::kName:
      return Cat("'", token.text, "'");
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat:
      return Cat("number ", token.text);
    case TokenType::kOperator:
      return Cat("'", token.text, "'");
    case TokenType::kEnd:
      return "end of template";
  }
  return "token";
}

}  // namespace convoy::jinja
