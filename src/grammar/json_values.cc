#include "grammar/json_values.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "grammar/limits.h"
#include "grammar/regex_parser.h"
#include "grammar/utf8_decode.h"
#include "nlohmann/json.hpp"

namespace convoy::grammar {
namespace {

Expr Digit() { return ByteRange('0', '9'); }
Expr Digits(int64_t min, int64_t max) { return Repeat(Digit(), min, max); }
Expr Hex() { return Class({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }
Expr Hexes(int n) { return Repeat(Hex(), n, n); }

// Decimal strings x and y of the same length, x <= y: every string of that length between them.
Expr SameLengthRange(const std::string& x, const std::string& y) {
  if (x.empty()) return Empty();
  if (x[0] == y[0]) {
    return Seq({Literal(x.substr(0, 1)), SameLengthRange(x.substr(1), y.substr(1))});
  }
  const size_t rest = x.size() - 1;
  const bool x_rest_zero = x.find_first_not_of('0', 1) == std::string::npos;
  const bool y_rest_nine = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<Expr> alternatives;
  char middle_lo = x[0] + 1, middle_hi = y[0] - 1;
  if (x_rest_zero) {
    middle_lo = x[0];
  } else {
    alternatives.push_back(
        Seq({Literal(x.substr(0, 1)), SameLengthRange(x.substr(1), std::string(rest, '9'))}));
  }
  if (y_rest_nine) middle_hi = y[0];
  if (middle_lo <= middle_hi) {
    alternatives.push_back(Seq({ByteRange(middle_lo, middle_hi), Digits(rest, rest)}));
  }
  if (!y_rest_nine) {
    alternatives.push_back(
        Seq({Literal(y.substr(0, 1)), SameLengthRange(std::string(rest, '0'), y.substr(1))}));
  }
  return Alt(std::move(alternatives));
}

// 10^n, saturated at INT64_MAX (n >= 19).
int64_t PowerOfTen(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) {
    if (p > std::numeric_limits<int64_t>::max() / 10) return std::numeric_limits<int64_t>::max();
    p *= 10;
  }
  return p;
}

// Non-negative integers lo..hi without leading zeros.
Expr NonNegativeRange(int64_t lo, int64_t hi) {
  std::vector<Expr> alternatives;
  const int lo_digits = static_cast<int>(std::to_string(lo).size());
  const int hi_digits = static_cast<int>(std::to_string(hi).size());
  for (int d = lo_digits; d <= hi_digits; ++d) {
    const int64_t first = std::max(lo, d == 1 ? 0 : PowerOfTen(d - 1));
    const int64_t last = std::min(hi, PowerOfTen(d) - 1);
    if (first <= last) {
      alternatives.push_back(SameLengthRange(std::to_string(first), std::to_string(last)));
    }
  }
  return Alt(std::move(alternatives));
}

}  // namespace

int64_t MaxJsonInteger() { return PowerOfTen(kMaxIntegerDigits) - 1; }

int32_t JsonValues::Shared(int32_t& rule, const char* name, Expr (JsonValues::*body)()) {
  if (rule < 0) {
    rule = builder_->AddRule(name);
    builder_->SetBody(rule, (this->*body)());
  }
  return rule;
}

Expr JsonValues::Whitespace() {
  return Ref(Shared(ws_, "json-whitespace", &JsonValues::WhitespaceBody));
}

Expr JsonValues::WhitespaceBody() {
  return Repeat(Class({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}), 0,
                kMaxJsonWhitespace);
}

Expr JsonValues::StringCharBody() {
  // A plain character, or an escape; \u escapes name no surrogate, so each is one code point.
  Expr plain = Class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, /*negated=*/true);
  Expr u =
      Seq({Literal("u"), Alt({Seq({Class({{'0', '9'}, {'A', 'C'}, {'a', 'c'}}), Hexes(3)}),
                              Seq({Class({{'D', 'D'}, {'d', 'd'}}), ByteRange('0', '7'), Hexes(2)}),
                              Seq({Class({{'E', 'F'}, {'e', 'f'}}), Hexes(3)})})});
  Expr escape = Seq({Literal("\\"), Alt({Class({{'"', '"'},
                                                {'\\', '\\'},
                                                {'/', '/'},
                                                {'b', 'b'},
                                                {'f', 'f'},
                                                {'n', 'n'},
                                                {'r', 'r'},
                                                {'t', 't'}}),
                                         std::move(u)})});
  Expr body;
  body.kind = Expr::Kind::kAlt;
  body.children.push_back(std::move(plain));
  body.children.push_back(std::move(escape));
  return body;
}

Expr JsonValues::String(int64_t min_length, int64_t max_length) {
  const int32_t c = Shared(string_char_, "json-string-char", &JsonValues::StringCharBody);
  if (min_length == 0 && max_length < 0)
    return Ref(Shared(any_string_, "json-string", &JsonValues::AnyStringBody));
  return Seq({Literal("\""), Repeat(Ref(c), min_length, max_length), Literal("\"")});
}

Expr JsonValues::AnyStringBody() {
  const int32_t c = Shared(string_char_, "json-string-char", &JsonValues::StringCharBody);
  return Seq({Literal("\""), Star(Ref(c)), Literal("\"")});
}

Expr JsonValues::StringLiteral(const std::string& value) {
  return Literal(nlohmann::json(value).dump());
}

absl::StatusOr<Expr> JsonValues::FormattedString(const std::string& format) {
  auto two = [](char a_lo, char a_hi, char b_lo, char b_hi) {
    return Seq({ByteRange(a_lo, a_hi), ByteRange(b_lo, b_hi)});
  };
  // Dates that Python's date.fromisoformat accepts: years 1000-9999, no February 29.
  auto date = [&] {
    Expr day31 = Alt({two('0', '0', '1', '9'), two('1', '2', '0', '9'), two('3', '3', '0', '1')});
    Expr day30 = Alt({two('0', '0', '1', '9'), two('1', '2', '0', '9'), Literal("30")});
    Expr day28 = Alt({two('0', '0', '1', '9'), two('1', '1', '0', '9'), two('2', '2', '0', '8')});
    Expr months31 =
        Alt({Seq({Literal("0"), Class({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}})}),
             Literal("10"), Literal("12")});
    Expr months30 =
        Alt({Seq({Literal("0"), Class({{'4', '4'}, {'6', '6'}, {'9', '9'}})}), Literal("11")});
    return Seq({ByteRange('1', '9'), Digits(3, 3), Literal("-"),
                Alt({Seq({std::move(months31), Literal("-"), std::move(day31)}),
                     Seq({std::move(months30), Literal("-"), std::move(day30)}),
                     Seq({Literal("02-"), std::move(day28)})})});
  };
  // RFC 3339 full-time, without leap seconds.
  auto time = [&] {
    auto hour = [&] { return Alt({two('0', '1', '0', '9'), two('2', '2', '0', '3')}); };
    auto minute = [&] { return two('0', '5', '0', '9'); };
    return Seq({hour(), Literal(":"), minute(), Literal(":"), minute(),
                Optional(Seq({Literal("."), Digits(1, 6)})),
                Alt({Literal("Z"),
                     Seq({Class({{'+', '+'}, {'-', '-'}}), hour(), Literal(":"), minute()})})});
  };
  Expr body;
  if (format == "date") {
    body = date();
  } else if (format == "time") {
    body = time();
  } else if (format == "date-time") {
    body = Seq({date(), Literal("T"), time()});
  } else if (format == "uuid") {
    body = Seq({Hexes(8), Literal("-"), Hexes(4), Literal("-"), Hexes(4), Literal("-"), Hexes(4),
                Literal("-"), Hexes(12)});
  } else if (format == "email") {
    Expr label = Plus(Class({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'-', '-'}}));
    body = Seq(
        {Plus(Class(
             {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'.', '.'}, {'_', '_'}, {'+', '+'}, {'-', '-'}})),
         Literal("@"), label, Plus(Seq({Literal("."), label}))});
  } else {
    return absl::NotFoundError(format);
  }
  return Seq({Literal("\""), std::move(body), Literal("\"")});
}

Expr JsonValues::IntegerRange(int64_t lo, int64_t hi) {
  std::vector<Expr> alternatives;
  if (lo < 0) {
    alternatives.push_back(Seq({Literal("-"), NonNegativeRange(std::max<int64_t>(1, -hi), -lo)}));
  }
  if (hi >= 0) alternatives.push_back(NonNegativeRange(std::max<int64_t>(0, lo), hi));
  return Alt(std::move(alternatives));
}

Expr JsonValues::Number() {
  Expr integer = Alt({Literal("0"), Seq({ByteRange('1', '9'), Digits(0, kMaxIntegerDigits - 1)})});
  return Seq(
      {Optional(Literal("-")), std::move(integer),
       Optional(Seq({Literal("."), Digits(1, kMaxFractionDigits)})),
       Optional(Seq({Class({{'E', 'E'}, {'e', 'e'}}), Optional(Class({{'+', '+'}, {'-', '-'}})),
                     Digits(1, kMaxExponentDigits)}))});
}

// A key is a JSON string; while its characters spell a prefix of an excluded name, it is written
// without escapes, so that it equals an excluded name exactly when it spells one (which the trie
// below forbids). Once it leaves every excluded name it is any string.
Expr JsonValues::KeyNotIn(const std::vector<std::string>& excluded) {
  struct TrieNode {
    std::map<char32_t, int> children;
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& name : excluded) {
    int node = 0;
    for (size_t pos = 0; pos < name.size();) {
      char32_t cp;
      const size_t length = DecodeUtf8(name, pos, cp);
      if (length == 0) break;  // not UTF-8: no key can equal it
      pos += length;
      auto [it, inserted] = trie[node].children.try_emplace(cp, static_cast<int>(trie.size()));
      if (inserted) trie.emplace_back();
      node = it->second;
    }
    trie[node].terminal = true;
  }
  const int32_t c = Shared(string_char_, "json-string-char", &JsonValues::StringCharBody);
  const Expr rest = Seq({Star(Ref(c)), Literal("\"")});
  // Build bottom-up: children always have larger indices than their parent.
  std::vector<Expr> at(trie.size());
  for (int node = static_cast<int>(trie.size()) - 1; node >= 0; --node) {
    std::vector<Expr> alternatives;
    if (!trie[node].terminal) alternatives.push_back(Literal("\""));
    std::vector<CodepointRange> leave = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    for (const auto& [cp, child] : trie[node].children) {
      leave.push_back({cp, cp});
      if (cp < 0x20 || cp == '"' || cp == '\\') continue;  // needs an escape: never followed
      std::string text;
      AppendUtf8(cp, text);
      alternatives.push_back(Seq({Literal(text), std::move(at[child])}));
    }
    alternatives.push_back(Seq({Class(std::move(leave), /*negated=*/true), rest}));
    Expr alt;
    alt.kind = Expr::Kind::kAlt;
    alt.children = std::move(alternatives);
    at[node] = std::move(alt);
  }
  return Seq({Literal("\""), std::move(at[0])});
}

Expr JsonValues::AnyValue() {
  return Ref(Shared(any_value_, "json-value", &JsonValues::AnyValueBody));
}
Expr JsonValues::AnyObject() {
  return Ref(Shared(any_object_, "json-object", &JsonValues::AnyObjectBody));
}

Expr JsonValues::AnyValueBody() {
  Expr body;
  body.kind = Expr::Kind::kAlt;
  body.children.push_back(AnyObject());
  body.children.push_back(Ref(Shared(any_array_, "json-array", &JsonValues::AnyArrayBody)));
  body.children.push_back(String(0, -1));
  body.children.push_back(Number());
  body.children.push_back(Literal("true"));
  body.children.push_back(Literal("false"));
  body.children.push_back(Literal("null"));
  return body;
}

Expr JsonValues::AnyObjectBody() {
  Expr member = Seq({String(0, -1), Whitespace(), Literal(":"), Whitespace(), AnyValue()});
  Expr more = Star(Seq({Whitespace(), Literal(","), Whitespace(), member}));
  return Seq({Literal("{"), Whitespace(),
              Optional(Seq({std::move(member), std::move(more), Whitespace()})), Literal("}")});
}

Expr JsonValues::AnyArrayBody() {
  Expr more = Star(Seq({Whitespace(), Literal(","), Whitespace(), AnyValue()}));
  return Seq({Literal("["), Whitespace(),
              Optional(Seq({AnyValue(), std::move(more), Whitespace()})), Literal("]")});
}

}  // namespace convoy::grammar
