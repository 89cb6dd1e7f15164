// Jinja2's filters (the ones chat templates use), with transformers' tojson. Tests are in
// jinja_tests.cc.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_builtins.h"
#include "text/jinja_operators.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

using FilterFn = absl::StatusOr<Value> (*)(const Value&, const CallArgs&, Budget&);

// An argument by position or name; undefined when absent.
Value Arg(const CallArgs& args, size_t index, std::string_view name) {
  return args.Get(index, name, Value());
}

// Jinja's soft_str: strings stay, everything else goes through str().
absl::StatusOr<std::string> SoftStr(const Value& value, Budget& budget) {
  return ToStr(value, budget);
}

absl::StatusOr<std::string> StringFilterArg(const Value& value, std::string_view what) {
  if (!value.is_string()) {
    return absl::InvalidArgumentError(Cat(what, " must be a string, not ", TypeName(value)));
  }
  return value.string_value();
}

// make_attrgetter: "a.b.0" looks up a, then b, then index 0.
absl::StatusOr<Value> GetPath(const Value& item, std::string_view path) {
  Value current = item;
  for (const std::string& part : PySplit(path, std::string("."), -1, false)) {
    int64_t index = 0;
    const auto parsed = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = parsed.ec == std::errc() && parsed.ptr == part.data() + part.size();
    ASSIGN_OR_RETURN(
        current, GetItem(current, numeric ? Value::Int(index) : Value::String(std::string(part))));
  }
  return current;
}

// The key by which sort, min, max, unique and dictsort compare: lower-cased strings unless
// case_sensitive.
Value SortKey(const Value& value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value::String(PyLower(value.string_value()));
  return value;
}

absl::StatusOr<std::vector<Value>> Keys(const std::vector<Value>& items, const Value& attribute,
                                        bool case_sensitive) {
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    Value key = item;
    if (attribute.is_string()) {
      ASSIGN_OR_RETURN(key, GetPath(item, attribute.string_value()));
    }
    keys.push_back(SortKey(key, case_sensitive));
  }
  return keys;
}

// Stable order of `keys`; fails as Python's sort would for keys that do not compare.
absl::StatusOr<std::vector<size_t>> SortedOrder(const std::vector<Value>& keys, bool reverse,
                                                Budget& budget) {
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    absl::StatusOr<int> c =
        reverse ? Compare(keys[b], keys[a], "<", budget) : Compare(keys[a], keys[b], "<", budget);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  RETURN_IF_ERROR(error);
  return order;
}

absl::StatusOr<int64_t> Length(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return CodePointCount(value.string_value());
    case Value::Type::kList:
      return static_cast<int64_t>(value.list().items.size());
    case Value::Type::kDict:
      if (value.dict().kind == MapKind::kDict) {
        return static_cast<int64_t>(value.dict().entries.size());
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(Cat("object of type '", TypeName(value), "' has no len()"));
}

// Python's float(str); nullopt when the text is not a number.
std::optional<double> ParseFloat(std::string_view text) {
  std::string s = PyStrip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  bool negative = false;
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  const std::string lower = PyLower(body);
  double value = 0;
  if (lower == "inf" || lower == "infinity") {
    value = INFINITY;
  } else if (lower == "nan") {
    value = NAN;
  } else {
    const auto result = std::from_chars(body.data(), body.data() + body.size(), value);
    if (body.empty() || result.ptr != body.data() + body.size() ||
        (result.ec != std::errc() && result.ec != std::errc::result_out_of_range)) {
      return std::nullopt;
    }
  }
  return negative ? -value : value;
}

// Python's int(str, 10); nullopt when the text is not an integer.
std::optional<int64_t> ParseInt(std::string_view text) {
  std::string s = PyStrip(text, std::nullopt, true, true);
  if (s.find("__") != std::string::npos || s.ends_with("_")) return std::nullopt;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  std::string_view body = s;
  if (!body.empty() && body[0] == '+') body.remove_prefix(1);
  int64_t value = 0;
  const auto result = std::from_chars(body.data(), body.data() + body.size(), value);
  if (body.empty() || result.ec != std::errc() || result.ptr != body.data() + body.size()) {
    return std::nullopt;
  }
  return value;
}

// select/reject (attribute empty) and selectattr/rejectattr.
absl::StatusOr<Value> SelectOrReject(const Value& target, const CallArgs& args, Budget& budget,
                                     bool select, bool by_attribute) {
  // As in Jinja2, a false value (none, 0, '') selects nothing rather than failing to iterate.
  if (!Truthy(target)) return Value::List({});
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  size_t first_test_arg = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) return absl::InvalidArgumentError("missing attribute name");
    ASSIGN_OR_RETURN(attribute, StringFilterArg(args.positional[0], "attribute"));
    first_test_arg = 1;
  }
  std::optional<std::string> test;
  if (args.positional.size() > first_test_arg) {
    ASSIGN_OR_RETURN(std::string name, StringFilterArg(args.positional[first_test_arg], "test"));
    if (!IsKnownTest(name)) return absl::InvalidArgumentError(Cat("No test named '", name, "'."));
    test = std::move(name);
  }
  CallArgs test_args;
  for (size_t i = first_test_arg + 1; i < args.positional.size(); ++i) {
    test_args.positional.push_back(args.positional[i]);
  }
  std::vector<Value> kept;
  for (const Value& item : items) {
    RETURN_IF_ERROR(budget.Spend(1));
    Value subject = item;
    if (by_attribute) {
      ASSIGN_OR_RETURN(subject, GetPath(item, attribute));
    }
    bool passed = Truthy(subject);
    if (test) {
      ASSIGN_OR_RETURN(passed, ApplyTest(*test, subject, test_args, budget));
    }
    if (passed == select) kept.push_back(item);
  }
  return Value::List(std::move(kept));
}

absl::StatusOr<Value> FilterSelect(const Value& t, const CallArgs& a, Budget& b) {
  return SelectOrReject(t, a, b, true, false);
}
absl::StatusOr<Value> FilterReject(const Value& t, const CallArgs& a, Budget& b) {
  return SelectOrReject(t, a, b, false, false);
}
absl::StatusOr<Value> FilterSelectAttr(const Value& t, const CallArgs& a, Budget& b) {
  return SelectOrReject(t, a, b, true, true);
}
absl::StatusOr<Value> FilterRejectAttr(const Value& t, const CallArgs& a, Budget& b) {
  return SelectOrReject(t, a, b, false, true);
}

absl::StatusOr<Value> FilterMap(const Value& target, const CallArgs& args, Budget& budget) {
  if (!Truthy(target)) return Value::List({});  // as select does
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  const Value& attribute = Arg(args, 99, "attribute");
  std::vector<Value> out;
  if (attribute.is_string()) {
    const Value& fallback = Arg(args, 99, "default");
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value v, GetPath(item, attribute.string_value()));
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty()) return absl::InvalidArgumentError("map() needs a filter name");
  ASSIGN_OR_RETURN(std::string name, StringFilterArg(args.positional[0], "filter"));
  if (!IsKnownFilter(name)) return absl::InvalidArgumentError(Cat("No filter named '", name, "'."));
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, ApplyFilter(name, item, filter_args, budget));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterJoin(const Value& target, const CallArgs& args, Budget& budget) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  const Value& separator = Arg(args, 0, "d");
  const Value& attribute = Arg(args, 1, "attribute");
  std::string sep;
  if (!separator.is_undefined()) {
    ASSIGN_OR_RETURN(sep, SoftStr(separator, budget));
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    Value item = items[i];
    if (attribute.is_string()) {
      ASSIGN_OR_RETURN(item, GetPath(item, attribute.string_value()));
    }
    RETURN_IF_ERROR(AppendStr(item, budget, &out));
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterToJson(const Value& target, const CallArgs& args, Budget& budget) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  JsonFormat format;
  format.ensure_ascii = Truthy(Arg(args, 0, "ensure_ascii"));
  const Value& indent = Arg(args, 1, "indent");
  if (indent.is_integer()) {
    format.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.int_value())), ' ');
  } else if (indent.is_string()) {
    format.indent = indent.string_value();
  } else if (!indent.is_none() && !indent.is_undefined()) {
    return absl::InvalidArgumentError("tojson indent must be an int or a string");
  }
  if (format.indent) format.item_separator = ",";
  const Value& separators = Arg(args, 2, "separators");
  if (separators.is_list()) {
    const auto& parts = separators.list().items;
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      return absl::InvalidArgumentError("tojson separators must be two strings");
    }
    format.item_separator = parts[0].string_value();
    format.key_separator = parts[1].string_value();
  }
  format.sort_keys = Truthy(Arg(args, 3, "sort_keys"));
  std::string out;
  RETURN_IF_ERROR(AppendJson(target, format, budget, &out));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterSort(const Value& target, const CallArgs& args, Budget& budget) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  ASSIGN_OR_RETURN(std::vector<Value> keys,
                   Keys(items, Arg(args, 2, "attribute"), Truthy(Arg(args, 1, "case_sensitive"))));
  ASSIGN_OR_RETURN(std::vector<size_t> order,
                   SortedOrder(keys, Truthy(Arg(args, 0, "reverse")), budget));
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(const Value& target, const CallArgs& args, Budget& budget,
                             bool want_max) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  ASSIGN_OR_RETURN(std::vector<Value> keys,
                   Keys(items, Arg(args, 1, "attribute"), Truthy(Arg(args, 0, "case_sensitive"))));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(int c, Compare(keys[i], keys[best], want_max ? ">" : "<", budget));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
absl::StatusOr<Value> FilterMax(const Value& t, const CallArgs& a, Budget& b) {
  return MinMax(t, a, b, true);
}
absl::StatusOr<Value> FilterMin(const Value& t, const CallArgs& a, Budget& b) {
  return MinMax(t, a, b, false);
}

absl::StatusOr<Value> FilterUnique(const Value& target, const CallArgs& args, Budget& budget) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(target));
  ASSIGN_OR_RETURN(std::vector<Value> keys,
                   Keys(items, Arg(args, 1, "attribute"), Truthy(Arg(args, 0, "case_sensitive"))));
  std::vector<Value> out;
  std::vector<Value> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    bool duplicate = false;
    for (const Value& key : seen) {
      ASSIGN_OR_RETURN(duplicate, Equals(key, keys[i], budget));
      if (duplicate) break;
    }
    if (duplicate) continue;
    seen.push_back(keys[i]);
    out.push_back(items[i]);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterDictSort(const Value& target, const CallArgs& args, Budget& budget) {
  if (!target.is_dict() || target.dict().kind != MapKind::kDict) {
    return absl::InvalidArgumentError("dictsort needs a dict");
  }
  const bool case_sensitive = Truthy(Arg(args, 0, "case_sensitive"));
  const Value& by = Arg(args, 1, "by");
  const bool by_value = by.is_string() && by.string_value() == "value";
  std::vector<Value> pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : target.dict().entries) {
    pairs.push_back(Value::List({Value::String(key), value}, SeqKind::kTuple));
    keys.push_back(SortKey(by_value ? value : Value::String(key), case_sensitive));
  }
  ASSIGN_OR_RETURN(std::vector<size_t> order,
                   SortedOrder(keys, Truthy(Arg(args, 2, "reverse")), budget));
  std::vector<Value> out;
  for (size_t i : order) out.push_back(pairs[i]);
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterRound(const Value& target, const CallArgs& args, Budget&) {
  if (!target.is_number()) {
    return absl::InvalidArgumentError(
        Cat("type ", TypeName(target), " doesn't define __round__ method"));
  }
  const Value& precision_value = Arg(args, 0, "precision");
  const int64_t precision = precision_value.is_integer() ? precision_value.int_value() : 0;
  const Value& method_value = Arg(args, 1, "method");
  const std::string method = method_value.is_string() ? method_value.string_value() : "common";
  if (method == "common") {
    if (target.is_integer()) return Value::Int(target.int_value());
    if (precision < 0 || precision > 300) {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value::Float(std::nearbyint(target.AsDouble() / scale) * scale);
    }
    // glibc prints the exact binary value rounded half-to-even, which is Python's round().
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision), target.AsDouble());
    return Value::Float(std::strtod(buffer, nullptr));
  }
  if (method != "floor" && method != "ceil") {
    return absl::InvalidArgumentError("method must be common, ceil or floor");
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = target.AsDouble() * scale;
  return Value::Float((method == "floor" ? std::floor(scaled) : std::ceil(scaled)) / scale);
}

absl::StatusOr<Value> FilterIndent(const Value& target, const CallArgs& args, Budget& budget) {
  if (!target.is_string()) {  // Jinja2 appends "\n" to the value itself
    return absl::InvalidArgumentError(
        Cat("unsupported operand type(s) for +=: '", TypeName(target), "' and 'str'"));
  }
  const std::string& text = target.string_value();
  const Value& width = Arg(args, 0, "width");
  std::string indentation =
      width.is_string()
          ? width.string_value()
          : std::string(width.is_integer() ? std::max<int64_t>(0, width.int_value()) : 4, ' ');
  const bool first = Truthy(Arg(args, 1, "first"));
  const bool blank = Truthy(Arg(args, 2, "blank"));
  std::vector<std::string> lines = PySplitLines(text + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += indentation;
    out += lines[i];
  }
  if (first) out.insert(0, indentation);
  RETURN_IF_ERROR(budget.CheckStringSize(out.size()));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterEscape(const Value& target, const CallArgs&, Budget& budget) {
  ASSIGN_OR_RETURN(std::string text, SoftStr(target, budget));
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

const std::map<std::string_view, FilterFn>& Filters() {
  static const auto* const kFilters = new std::map<std::string_view, FilterFn>{
      {"abs",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         if (!t.is_number()) {
           return absl::InvalidArgumentError(
               Cat("bad operand type for abs(): '", TypeName(t), "'"));
         }
         if (t.is_float()) return Value::Float(std::fabs(t.AsDouble()));
         if (t.int_value() == INT64_MIN) return absl::InvalidArgumentError("integer overflow");
         return Value::Int(t.int_value() < 0 ? -t.int_value() : t.int_value());
       }},
      {"attr",
       [](const Value& t, const CallArgs& a, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string name, StringFilterArg(Arg(a, 0, "name"), "attribute"));
         return GetAttribute(t, name);
       }},
      {"capitalize",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         return Value::String(PyCapitalize(s));
       }},
      {"count",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(int64_t n, Length(t));
         return Value::Int(n);
       }},
      {"default",
       [](const Value& t, const CallArgs& a, Budget&) -> absl::StatusOr<Value> {
         const Value& fallback = a.Get(0, "default_value", Value::String(""));
         const bool boolean = Truthy(Arg(a, 1, "boolean"));
         return t.is_undefined() || (boolean && !Truthy(t)) ? fallback : t;
       }},
      {"dictsort", FilterDictSort},
      {"escape", FilterEscape},
      {"first",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(t));
         if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
         return items.front();
       }},
      {"float",
       [](const Value& t, const CallArgs& a, Budget&) -> absl::StatusOr<Value> {
         const Value& fallback = a.Get(0, "default", Value::Float(0.0));
         if (t.is_number()) return Value::Float(t.AsDouble());
         if (t.is_string()) {
           if (std::optional<double> d = ParseFloat(t.string_value())) return Value::Float(*d);
         }
         return fallback;
       }},
      {"indent", FilterIndent},
      {"int",
       [](const Value& t, const CallArgs& a, Budget&) -> absl::StatusOr<Value> {
         const Value& fallback = a.Get(0, "default", Value::Int(0));
         if (t.is_integer()) return Value::Int(t.int_value());
         std::optional<double> d;
         if (t.is_float()) d = t.AsDouble();
         if (t.is_string()) {
           if (std::optional<int64_t> i = ParseInt(t.string_value())) return Value::Int(*i);
           d = ParseFloat(t.string_value());
         }
         if (!d || std::isnan(*d)) return fallback;
         if (!(std::fabs(*d) < 9.2e18)) return absl::InvalidArgumentError("integer overflow");
         return Value::Int(static_cast<int64_t>(std::trunc(*d)));
       }},
      {"items",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         if (t.is_undefined()) return Value::List({});
         if (!t.is_dict() || t.dict().kind != MapKind::kDict) {
           return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
         }
         return CallMethod(t, "items", CallArgs(), b);
       }},
      {"join", FilterJoin},
      {"last",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(t));
         if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
         return items.back();
       }},
      {"length",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(int64_t n, Length(t));
         return Value::Int(n);
       }},
      {"list",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(t));
         return Value::List(std::move(items));
       }},
      {"lower",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         return Value::String(PyLower(s));
       }},
      {"map", FilterMap},
      {"max", FilterMax},
      {"min", FilterMin},
      {"reject", FilterReject},
      {"rejectattr", FilterRejectAttr},
      {"replace",
       [](const Value& t, const CallArgs& a, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         ASSIGN_OR_RETURN(std::string old_text, SoftStr(Arg(a, 0, "old"), b));
         ASSIGN_OR_RETURN(std::string new_text, SoftStr(Arg(a, 1, "new"), b));
         const Value& count = Arg(a, 2, "count");
         std::string out =
             PyReplace(s, old_text, new_text, count.is_integer() ? count.int_value() : -1);
         RETURN_IF_ERROR(b.CheckStringSize(out.size()));
         return Value::String(std::move(out));
       }},
      {"reverse",
       [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> {
         if (t.is_string()) {
           std::u32string cps = DecodeUtf8(t.string_value());
           std::reverse(cps.begin(), cps.end());
           return Value::String(EncodeUtf8(cps));
         }
         ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(t));
         std::reverse(items.begin(), items.end());
         return Value::List(std::move(items));
       }},
      {"round", FilterRound},
      {"safe", [](const Value& t, const CallArgs&, Budget&) -> absl::StatusOr<Value> { return t; }},
      {"select", FilterSelect},
      {"selectattr", FilterSelectAttr},
      {"sort", FilterSort},
      {"string",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         return Value::String(std::move(s));
       }},
      {"sum",
       [](const Value& t, const CallArgs& a, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(t));
         const Value& attribute = Arg(a, 0, "attribute");
         Value total = a.Get(1, "start", Value::Int(0));
         for (const Value& item : items) {
           Value v = item;
           if (attribute.is_string()) {
             ASSIGN_OR_RETURN(v, GetPath(item, attribute.string_value()));
           }
           ASSIGN_OR_RETURN(total, BinaryOp("+", total, v, b));
         }
         return total;
       }},
      {"title",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         return Value::String(JinjaTitle(s));
       }},
      {"tojson", FilterToJson},
      {"trim",
       [](const Value& t, const CallArgs& a, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         const Value& chars = Arg(a, 0, "chars");
         std::optional<std::string> set;
         if (chars.is_string()) set = chars.string_value();
         return Value::String(PyStrip(s, set, true, true));
       }},
      {"unique", FilterUnique},
      {"upper",
       [](const Value& t, const CallArgs&, Budget& b) -> absl::StatusOr<Value> {
         ASSIGN_OR_RETURN(std::string s, SoftStr(t, b));
         return Value::String(PyUpper(s));
       }},
  };
  return *kFilters;
}

// Filter names that are other names for the ones above.
std::string_view Canonical(std::string_view name) {
  if (name == "d") return "default";
  if (name == "e") return "escape";
  return name;
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return Filters().count(Canonical(name)) > 0; }

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& target, const CallArgs& args,
                                  Budget& budget) {
  const auto& filters = Filters();
  const auto it = filters.find(Canonical(name));
  if (it == filters.end()) {
    return absl::InvalidArgumentError(Cat("No filter named '", name, "'."));
  }
  RETURN_IF_ERROR(budget.Spend(1));
  return it->second(target, args, budget);
}

}  // namespace convoy::jinja
