#include "grammar/regex_parser.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "grammar/limits.h"
#include "grammar/utf8_decode.h"

namespace convoy::grammar {
namespace {

const std::vector<CodepointRange>& Digits() {
  static const auto* r = new std::vector<CodepointRange>{{'0', '9'}};
  return *r;
}
const std::vector<CodepointRange>& WordChars() {
  static const auto* r =
      new std::vector<CodepointRange>{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return *r;
}
const std::vector<CodepointRange>& Spaces() {
  static const auto* r = new std::vector<CodepointRange>{{'\t', '\r'}, {' ', ' '}};
  return *r;
}

// ASCII characters outside `ranges`: what \D, \W and \S match here (Python's would also take
// Unicode digits, letters and spaces outside them: these are a subset either way).
std::vector<CodepointRange> AsciiComplement(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : NormalizeRanges(ranges, true)) {
    if (r.lo < 0x80) out.push_back({r.lo, std::min<char32_t>(r.hi, 0x7F)});
  }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, bool json_string)
      : text_(pattern), json_string_(json_string) {}

  absl::StatusOr<Expr> Parse() {
    if (pos_ < text_.size() && text_[pos_] == '^') ++pos_;
    ASSIGN_OR_RETURN(Expr e, ParseAlternatives(0));
    if (pos_ < text_.size()) {
      if (text_[pos_] == ')') return Error("unmatched ')'");
      return Error("unexpected character");
    }
    return e;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regular expression at offset ", pos_, ": ", std::string(what)));
  }
  bool AtEndAnchor() const { return pos_ + 1 == text_.size() && text_[pos_] == '$'; }

  absl::StatusOr<Expr> ParseAlternatives(int depth) {
    if (depth > kMaxNestingDepth) {
      return Error(absl::StrCat("groups nested deeper than ", kMaxNestingDepth));
    }
    std::vector<Expr> alternatives;
    while (true) {
      std::vector<Expr> items;
      while (pos_ < text_.size() && text_[pos_] != '|' && text_[pos_] != ')') {
        if (AtEndAnchor()) {
          ++pos_;
          break;
        }
        ASSIGN_OR_RETURN(Expr atom, ParseAtom(depth));
        ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
        items.push_back(std::move(atom));
      }
      alternatives.push_back(Seq(std::move(items)));
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return Alt(std::move(alternatives));
    }
  }

  absl::StatusOr<Expr> ParseQuantifiers(Expr atom) {
    bool quantified = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      int64_t min = 0, max = 0;
      if (c == '*' || c == '+' || c == '?') {
        if (quantified && c == '?') {  // lazy: the same texts
          ++pos_;
          continue;
        }
        if (quantified) return Error("possessive quantifiers are not supported");
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : Expr::kUnbounded;
      } else if (c == '{' && ReadBraces(min, max)) {
        if (quantified) return Error("a quantifier cannot follow another");
      } else {
        break;
      }
      if (min > kMaxRepetition || max > kMaxRepetition) {
        return Error(absl::StrCat("repetition bound over the limit of ", kMaxRepetition));
      }
      if (max != Expr::kUnbounded && max < min) return Error("repetition bounds out of order");
      atom = Repeat(std::move(atom), min, max);
      quantified = true;
    }
    return atom;
  }

  // {m}, {m,}, {m,n} at pos_; false (pos_ unchanged) when the brace is a literal.
  bool ReadBraces(int64_t& min, int64_t& max) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t& value) { return ReadCount(text_, p, kMaxRepetition + 1, value); };
    if (!number(min)) return false;
    max = min;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(max)) max = Expr::kUnbounded;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  Expr Char(std::vector<CodepointRange> ranges) {
    if (json_string_) return JsonStringChar(std::move(ranges));
    return Class(std::move(ranges));
  }

  absl::StatusOr<Expr> ParseAtom(int depth) {
    const char c = text_[pos_];
    switch (c) {
      case '(':
        return ParseGroup(depth);
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return Char(NormalizeRanges({{'\n', '\n'}}, true));
      case '^':
      case '$':
        return Error("anchors are supported only at the start (^) and the end ($)");
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '\\': {
        std::vector<CodepointRange> ranges;
        RETURN_IF_ERROR(ParseEscape(/*in_class=*/false, ranges));
        return Char(std::move(ranges));
      }
      default: {
        char32_t cp;
        const size_t length = DecodeUtf8(text_, pos_, cp);
        if (length == 0) return Error("invalid UTF-8");
        pos_ += length;
        return Char({{cp, cp}});
      }
    }
  }

  absl::StatusOr<Expr> ParseGroup(int depth) {
    ++pos_;
    if (text_.substr(pos_, 2) == "?:") {
      pos_ += 2;
    } else if (text_.substr(pos_, 3) == "?P<" ||
               (text_.substr(pos_, 2) == "?<" && text_.substr(pos_, 3) != "?<=" &&
                text_.substr(pos_, 3) != "?<!")) {
      const size_t close = text_.find('>', pos_);
      if (close == std::string_view::npos) return Error("unclosed group name");
      pos_ = close + 1;
    } else if (pos_ < text_.size() && text_[pos_] == '?') {
      return Error("lookaround, inline flags and other (?...) groups are not supported");
    }
    ASSIGN_OR_RETURN(Expr inner, ParseAlternatives(depth + 1));
    if (pos_ >= text_.size() || text_[pos_] != ')') return Error("unclosed '('");
    ++pos_;
    return inner;
  }

  // An escape at pos_ (the backslash) as the code points it matches.
  absl::Status ParseEscape(bool in_class, std::vector<CodepointRange>& ranges) {
    if (pos_ + 1 >= text_.size()) return Error("unfinished escape");
    const char e = text_[pos_ + 1];
    pos_ += 2;
    auto add = [&](char32_t cp) { ranges.push_back({cp, cp}); };
    int digits = 0;
    switch (e) {
      case 'd':
        ranges.insert(ranges.end(), Digits().begin(), Digits().end());
        return {};
      case 'w':
        ranges.insert(ranges.end(), WordChars().begin(), WordChars().end());
        return {};
      case 's':
        ranges.insert(ranges.end(), Spaces().begin(), Spaces().end());
        return {};
      case 'D':
        for (auto r : AsciiComplement(Digits())) ranges.push_back(r);
        return {};
      case 'W':
        for (auto r : AsciiComplement(WordChars())) ranges.push_back(r);
        return {};
      case 'S':
        for (auto r : AsciiComplement(Spaces())) ranges.push_back(r);
        return {};
      case 'n':
        add('\n');
        return {};
      case 'r':
        add('\r');
        return {};
      case 't':
        add('\t');
        return {};
      case 'f':
        add('\f');
        return {};
      case 'v':
        add('\v');
        return {};
      case '0':
        add('\0');
        return {};
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'b':
        if (in_class) {
          add('\b');
          return {};
        }
        return Error("word boundaries (\\b) are not supported");
      default:
        if (e >= '1' && e <= '9') return Error("back references are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          return Error(absl::StrCat("escape \\", std::string(1, e), " is not supported"));
        }
        if (static_cast<unsigned char>(e) >= 0x80) return Error("escaped non-ASCII character");
        add(static_cast<unsigned char>(e));
        return {};
    }
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size() || HexDigitValue(text_[pos_]) < 0) {
        return Error("escape needs hexadecimal digits");
      }
      value = value * 16 + HexDigitValue(text_[pos_++]);
    }
    if (value >= 0xD800 && value <= 0xDFFF) return Error("escape is a surrogate");
    add(value);
    return {};
  }

  // One code point (or a shorthand class) inside [...]; `single` tells whether it was one.
  absl::Status ParseClassItem(std::vector<CodepointRange>& ranges, bool& single, bool& shorthand) {
    if (text_[pos_] == '\\') {
      std::vector<CodepointRange> item;
      const char e = pos_ + 1 < text_.size() ? text_[pos_ + 1] : 0;
      RETURN_IF_ERROR(ParseEscape(/*in_class=*/true, item));
      single = item.size() == 1 && item[0].lo == item[0].hi;
      shorthand = std::string_view("dwsDWS").find(e) != std::string_view::npos;
      ranges.insert(ranges.end(), item.begin(), item.end());
      return {};
    }
    if (text_.substr(pos_, 2) == "[:") return Error("POSIX classes are not supported");
    char32_t cp;
    const size_t length = DecodeUtf8(text_, pos_, cp);
    if (length == 0) return Error("invalid UTF-8");
    pos_ += length;
    ranges.push_back({cp, cp});
    single = true;
    return {};
  }

  absl::StatusOr<Expr> ParseClass() {
    ++pos_;
    bool negated = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    bool first = true, has_shorthand = false;
    while (true) {
      if (pos_ >= text_.size()) return Error("unclosed '['");
      if (text_[pos_] == ']' && !first) break;
      first = false;
      std::vector<CodepointRange> item;
      bool single = false, shorthand = false;
      RETURN_IF_ERROR(ParseClassItem(item, single, shorthand));
      has_shorthand = has_shorthand || shorthand;
      if (single && pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        std::vector<CodepointRange> hi;
        bool hi_single = false, hi_shorthand = false;
        RETURN_IF_ERROR(ParseClassItem(hi, hi_single, hi_shorthand));
        if (!hi_single) return Error("a range cannot end in a class shorthand");
        if (hi[0].lo < item[0].lo) return Error("range out of order in character class");
        item[0].hi = hi[0].lo;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    ++pos_;
    if (!negated) return Char(std::move(ranges));
    // Python's [^\d] also leaves out Unicode digits: stay in ASCII to match a subset of it.
    if (has_shorthand) return Char(AsciiComplement(ranges));
    return Char(NormalizeRanges(std::move(ranges), true));
  }

  std::string_view text_;
  bool json_string_;
  size_t pos_ = 0;
};

}  // namespace

Expr JsonStringChar(std::vector<CodepointRange> ranges) {
  ranges = NormalizeRanges(std::move(ranges), false);
  std::vector<CodepointRange> plain;
  std::vector<Expr> escaped;
  for (const CodepointRange& r : ranges) {
    for (char32_t c = r.lo; c <= std::min<char32_t>(r.hi, 0x5C); ++c) {
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      switch (c) {
        case '"':
          escaped.push_back(Literal("\\\""));
          break;
        case '\\':
          escaped.push_back(Literal("\\\\"));
          break;
        case '\n':
          escaped.push_back(Literal("\\n"));
          break;
        case '\r':
          escaped.push_back(Literal("\\r"));
          break;
        case '\t':
          escaped.push_back(Literal("\\t"));
          break;
        case '\b':
          escaped.push_back(Literal("\\b"));
          break;
        case '\f':
          escaped.push_back(Literal("\\f"));
          break;
        default:
          escaped.push_back(Literal(absl::StrFormat("\\u%04x", static_cast<int>(c))));
      }
    }
  }
  std::vector<CodepointRange> remove = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  // plain = ranges minus the characters JSON escapes
  std::vector<CodepointRange> keep = NormalizeRanges(remove, true);
  for (const CodepointRange& r : ranges) {
    for (const CodepointRange& k : keep) {
      const char32_t lo = std::max(r.lo, k.lo), hi = std::min(r.hi, k.hi);
      if (lo <= hi) plain.push_back({lo, hi});
    }
  }
  if (!plain.empty()) escaped.insert(escaped.begin(), Class(std::move(plain)));
  if (escaped.empty()) return Alt({});
  return Alt(std::move(escaped));
}

absl::StatusOr<Expr> ParseRegex(std::string_view pattern, bool json_string) {
  if (static_cast<int64_t>(pattern.size()) > kMaxPatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat("regular expression of ", pattern.size(),
                                                   " bytes is over the limit of ",
                                                   kMaxPatternBytes));
  }
  return RegexParser(pattern, json_string).Parse();
}

}  // namespace convoy::grammar
