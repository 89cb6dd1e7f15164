#include "grammar/gbnf_parser.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "grammar/limits.h"
#include "grammar/utf8_decode.h"

namespace convoy::grammar {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Program> Parse() {
    SkipSpace();
    while (pos_ < text_.size()) {
      const size_t start = pos_;
      const std::string name(ReadName());
      if (name.empty()) return Error(start, "expected a rule name");
      SkipSpace();
      if (text_.substr(pos_, 3) != "::=") return Error(pos_, "expected '::=' after the rule name");
      pos_ += 3;
      const int32_t rule = RuleId(name, start);
      if (builder_.HasBody(rule)) return Error(start, "rule '" + name + "' is defined twice");
      ASSIGN_OR_RETURN(Expr body, ParseAlternatives(0));
      if (pos_ < text_.size() && text_[pos_] == ')') return Error(pos_, "unmatched ')'");
      builder_.SetBody(rule, std::move(body));
    }
    for (const auto& [name, rule] : rule_ids_) {
      if (!builder_.HasBody(rule)) {
        return Error(first_use_[rule], "rule '" + name + "' is used but not defined");
      }
    }
    auto root = rule_ids_.find("root");
    if (root == rule_ids_.end())
      return absl::InvalidArgumentError("the grammar has no rule 'root'");
    return builder_.Build(root->second);
  }

 private:
  absl::Status Error(size_t at, std::string_view what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(line, ":", column, ": ", std::string(what)));
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ReadName() {
    const size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // At `name ::=`, the start of the next rule.
  bool AtRuleStart() {
    const size_t saved = pos_;
    const bool named = !ReadName().empty();
    SkipSpace();
    const bool result = named && text_.substr(pos_, 3) == "::=";
    pos_ = saved;
    return result;
  }

  int32_t RuleId(const std::string& name, size_t at) {
    auto [it, inserted] = rule_ids_.try_emplace(name, 0);
    if (inserted) {
      it->second = builder_.AddRule(name);
      first_use_[it->second] = at;
    }
    return it->second;
  }

  absl::StatusOr<Expr> ParseAlternatives(int depth) {
    if (depth > kMaxNestingDepth) {
      return Error(pos_, absl::StrCat("groups nested deeper than ", kMaxNestingDepth));
    }
    std::vector<Expr> alternatives;
    while (true) {
      ASSIGN_OR_RETURN(Expr seq, ParseSequence(depth));
      alternatives.push_back(std::move(seq));
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    return Alt(std::move(alternatives));
  }

  absl::StatusOr<Expr> ParseSequence(int depth) {
    std::vector<Expr> items;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] == '|' || text_[pos_] == ')' || AtRuleStart()) break;
      ASSIGN_OR_RETURN(Expr item, ParsePrimary(depth));
      ASSIGN_OR_RETURN(item, ParsePostfix(std::move(item)));
      items.push_back(std::move(item));
    }
    return Seq(std::move(items));
  }

  absl::StatusOr<Expr> ParsePostfix(Expr item) {
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) return item;
      const char c = text_[pos_];
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        item = c == '*'   ? Star(std::move(item))
               : c == '+' ? Plus(std::move(item))
                          : Optional(std::move(item));
      } else if (c == '{') {
        const size_t start = pos_++;
        SkipSpace();
        int64_t min = 0, max = 0;
        const bool has_min = ReadNumber(min);
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          SkipSpace();
          if (!ReadNumber(max)) max = Expr::kUnbounded;
          SkipSpace();
        } else {
          if (!has_min) return Error(start, "expected a number in '{...}'");
          max = min;
        }
        if (pos_ >= text_.size() || text_[pos_] != '}') return Error(pos_, "expected '}'");
        ++pos_;
        if (min > kMaxRepetition || max > kMaxRepetition) {
          return Error(start, absl::StrCat("repetition bound over the limit of ", kMaxRepetition));
        }
        if (max != Expr::kUnbounded && max < min) {
          return Error(start, "repetition's upper bound is below its lower bound");
        }
        item = Repeat(std::move(item), min, max);
      } else {
        return item;
      }
    }
  }

  bool ReadNumber(int64_t& value) { return ReadCount(text_, pos_, kMaxRepetition + 1, value); }

  absl::StatusOr<Expr> ParsePrimary(int depth) {
    const char c = text_[pos_];
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Class({{0, kMaxCodepoint}});
    }
    if (c == '(') {
      const size_t open = pos_++;
      ASSIGN_OR_RETURN(Expr inner, ParseAlternatives(depth + 1));
      if (pos_ >= text_.size() || text_[pos_] != ')') return Error(open, "unclosed '('");
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) {
      const size_t start = pos_;
      const std::string name(ReadName());
      return Ref(RuleId(name, start));
    }
    if (c == '<') return Error(pos_, "token references (<...>) are not supported");
    return Error(pos_,
                 absl::StrCat("unexpected character '", std::string(text_.substr(pos_, 1)), "'"));
  }

  // One code point of a literal or class at pos_, escapes decoded.
  absl::StatusOr<char32_t> ParseChar() {
    if (pos_ >= text_.size()) return Error(pos_, "unexpected end of the grammar");
    const size_t start = pos_;
    if (text_[pos_] != '\\') {
      char32_t cp;
      const size_t length = DecodeUtf8(text_, pos_, cp);
      if (length == 0) return Error(pos_, "invalid UTF-8");
      pos_ += length;
      return cp;
    }
    if (++pos_ >= text_.size()) return Error(start, "unfinished escape");
    const char e = text_[pos_++];
    int digits = 0;
    switch (e) {
      case 'n':
        return U'\n';
      case 'r':
        return U'\r';
      case 't':
        return U'\t';
      case '0':
        return U'\0';
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
      case '.':
      case '/':
      case '(':
      case ')':
      case '{':
      case '}':
      case '|':
      case '*':
      case '+':
      case '?':
        return static_cast<char32_t>(e);
      default:
        return Error(start, absl::StrCat("unknown escape '\\",
                                         std::string(text_.substr(start + 1, 1)), "'"));
    }
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size() || HexDigitValue(text_[pos_]) < 0) {
        return Error(start, "escape needs hexadecimal digits");
      }
      value = value * 16 + HexDigitValue(text_[pos_++]);
    }
    if (value > kMaxCodepoint || (value >= 0xD800 && value <= 0xDFFF)) {
      return Error(start, "escape is not a Unicode scalar value");
    }
    return value;
  }

  absl::StatusOr<Expr> ParseLiteral() {
    const size_t open = pos_++;
    std::string bytes;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') return Error(open, "unclosed string");
      if (text_[pos_] == '"') break;
      ASSIGN_OR_RETURN(const char32_t cp, ParseChar());
      AppendUtf8(cp, bytes);
    }
    ++pos_;
    return Literal(bytes);
  }

  absl::StatusOr<Expr> ParseClass() {
    const size_t open = pos_++;
    bool negated = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (pos_ >= text_.size()) return Error(open, "unclosed '['");
      if (text_[pos_] == ']') break;
      const size_t item = pos_;
      ASSIGN_OR_RETURN(const char32_t lo, ParseChar());
      char32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error(item, "range out of order in character class");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return Class(std::move(ranges), negated);
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  absl::flat_hash_map<std::string, int32_t> rule_ids_;
  absl::flat_hash_map<int32_t, size_t> first_use_;
};

}  // namespace

absl::StatusOr<Program> ParseGbnf(std::string_view text) {
  if (static_cast<int64_t>(text.size()) > kMaxGbnfBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar of ", text.size(), " bytes is over the limit of ", kMaxGbnfBytes));
  }
  return GbnfParser(text).Parse();
}

}  // namespace convoy::grammar
