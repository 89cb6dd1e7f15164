#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "grammar/json_values.h"
#include "grammar/limits.h"
#include "grammar/regex_parser.h"
#include "nlohmann/json.hpp"

namespace convoy::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate: accepted and ignored.
const absl::flat_hash_set<std::string>& Annotations() {
  static const auto* set = new absl::flat_hash_set<std::string>{
      "title", "description", "examples",   "default",         "$schema",
      "$id",   "$comment",    "deprecated", "readOnly",        "writeOnly",
      "$defs", "definitions", "$anchor",    "contentEncoding", "contentMediaType"};
  return *set;
}

enum class Family { kNone, kObject, kArray, kString, kNumber };

// Supported validation keywords, and the type family each applies to.
const absl::flat_hash_map<std::string, Family>& Validations() {
  static const auto* map =
      new absl::flat_hash_map<std::string, Family>{{"type", Family::kNone},
                                                   {"enum", Family::kNone},
                                                   {"const", Family::kNone},
                                                   {"anyOf", Family::kNone},
                                                   {"oneOf", Family::kNone},
                                                   {"allOf", Family::kNone},
                                                   {"$ref", Family::kNone},
                                                   {"uniqueItems", Family::kArray},
                                                   {"properties", Family::kObject},
                                                   {"required", Family::kObject},
                                                   {"additionalProperties", Family::kObject},
                                                   {"items", Family::kArray},
                                                   {"prefixItems", Family::kArray},
                                                   {"minItems", Family::kArray},
                                                   {"maxItems", Family::kArray},
                                                   {"minLength", Family::kString},
                                                   {"maxLength", Family::kString},
                                                   {"pattern", Family::kString},
                                                   {"format", Family::kString},
                                                   {"minimum", Family::kNumber},
                                                   {"maximum", Family::kNumber},
                                                   {"exclusiveMinimum", Family::kNumber},
                                                   {"exclusiveMaximum", Family::kNumber}};
  return *map;
}

std::string EscapePointerToken(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

bool HasType(const Json& value, const std::string& type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "string") return value.is_string();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    return value.is_number_integer() ||
           (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
  }
  return false;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json& root) : root_(root), values_(&builder_) {}

  absl::StatusOr<Program> Compile() {
    ASSIGN_OR_RETURN(const int32_t root, RuleFor(root_, "", 0));
    absl::StatusOr<Program> program = builder_.Build(root);
    if (!program.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema: ", std::string(program.status().message())));
    }
    return program;
  }

 private:
  static absl::Status Error(const std::string& pointer, std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema at ", pointer.empty() ? "/" : pointer, ": ", std::string(what)));
  }

  absl::StatusOr<int32_t> RuleFor(const Json& schema, const std::string& pointer, int depth) {
    if (auto it = rules_.find(pointer); it != rules_.end()) return it->second;
    if (depth > kMaxNestingDepth) {
      return Error(pointer,
                   absl::StrCat("schemas nested deeper than the limit of ", kMaxNestingDepth));
    }
    const int32_t rule = builder_.AddRule(pointer.empty() ? "/" : pointer);
    rules_[pointer] = rule;
    ASSIGN_OR_RETURN(Expr body, SchemaExpr(schema, pointer, depth));
    builder_.SetBody(rule, std::move(body));
    return rule;
  }

  absl::StatusOr<Expr> Sub(const Json& schema, const std::string& pointer, int depth) {
    ASSIGN_OR_RETURN(const int32_t rule, RuleFor(schema, pointer, depth + 1));
    return Ref(rule);
  }

  absl::StatusOr<Expr> SchemaExpr(const Json& schema, const std::string& ptr, int depth) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return values_.AnyValue();
      return Error(ptr, "schema false matches nothing");
    }
    if (!schema.is_object()) return Error(ptr, "a schema must be an object or a boolean");
    std::vector<std::string> validations;
    for (const auto& [key, value] : schema.items()) {
      if (Annotations().contains(key)) continue;
      if (!Validations().contains(key) || (key == "uniqueItems" && value != Json(false))) {
        return Error(ptr, absl::StrCat("keyword \"", key, "\" is not supported"));
      }
      if (key != "uniqueItems") validations.push_back(key);
    }
    auto alone = [&](const char* keyword, std::initializer_list<const char*> allowed = {}) {
      for (const std::string& other : validations) {
        if (other == keyword) continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || other == a;
        if (!ok) {
          return Error(ptr, absl::StrCat("keyword \"", other, "\" beside \"", keyword,
                                         "\" is not supported"));
        }
      }
      return absl::OkStatus();
    };
    if (schema.contains("$ref")) {
      RETURN_IF_ERROR(alone("$ref"));
      return RefExpr(schema["$ref"], ptr, depth);
    }
    if (schema.contains("allOf")) {
      RETURN_IF_ERROR(alone("allOf"));
      const Json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return Error(ptr, "keyword \"allOf\" is supported with exactly one member");
      }
      return Sub(all[0], ptr + "/allOf/0", depth);
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
      if (!schema.contains(keyword)) continue;
      RETURN_IF_ERROR(alone(keyword));
      const Json& members = schema[keyword];
      if (!members.is_array() || members.empty()) {
        return Error(ptr, absl::StrCat("keyword \"", keyword, "\" needs a non-empty array"));
      }
      std::vector<Expr> alternatives;
      for (size_t i = 0; i < members.size(); ++i) {
        if (members[i] == Json(false)) continue;
        ASSIGN_OR_RETURN(Expr e, Sub(members[i], absl::StrCat(ptr, "/", keyword, "/", i), depth));
        alternatives.push_back(std::move(e));
      }
      if (alternatives.empty())
        return Error(ptr, absl::StrCat("every \"", keyword, "\" member is false"));
      return Alt(std::move(alternatives));
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const Json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const Json& t : type) {
          if (!t.is_string()) return Error(ptr, "keyword \"type\" lists a non-string");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Error(ptr, "keyword \"type\" must be a string or a non-empty array");
      }
      for (const std::string& t : types) {
        if (t != "object" && t != "array" && t != "string" && t != "number" && t != "integer" &&
            t != "boolean" && t != "null") {
          return Error(ptr, absl::StrCat("unknown type \"", t, "\""));
        }
      }
    }
    if (schema.contains("enum") || schema.contains("const")) {
      if (schema.contains("enum") && schema.contains("const")) {
        return Error(ptr, "keywords \"enum\" and \"const\" together are not supported");
      }
      const char* keyword = schema.contains("enum") ? "enum" : "const";
      RETURN_IF_ERROR(alone(keyword, {"type"}));
      return EnumExpr(schema, keyword, types, ptr);
    }
    if (types.empty()) {  // inferred from the keywords present; none: any value
      std::set<Family> families;
      for (const std::string& key : validations) families.insert(Validations().at(key));
      if (families.contains(Family::kObject)) types.push_back("object");
      if (families.contains(Family::kArray)) types.push_back("array");
      if (families.contains(Family::kString)) types.push_back("string");
      if (families.contains(Family::kNumber)) types.push_back("number");
      if (types.empty()) return values_.AnyValue();
    }
    std::vector<Expr> alternatives;
    for (const std::string& type : types) {
      ASSIGN_OR_RETURN(Expr e, TypeExpr(schema, type, ptr, depth));
      alternatives.push_back(std::move(e));
    }
    return Alt(std::move(alternatives));
  }

  absl::StatusOr<Expr> TypeExpr(const Json& schema, const std::string& type, const std::string& ptr,
                                int depth) {
    if (type == "null") return Literal("null");
    if (type == "boolean") return Alt({Literal("true"), Literal("false")});
    if (type == "string") return StringExpr(schema, ptr);
    if (type == "integer") return NumberExpr(schema, ptr, /*integer=*/true);
    if (type == "number") return NumberExpr(schema, ptr, /*integer=*/false);
    if (type == "array") return ArrayExpr(schema, ptr, depth);
    return ObjectExpr(schema, ptr, depth);
  }

  absl::StatusOr<Expr> RefExpr(const Json& ref, const std::string& ptr, int depth) {
    if (!ref.is_string()) return Error(ptr, "keyword \"$ref\" must be a string");
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#') {
      return Error(ptr,
                   absl::StrCat("$ref \"", text,
                                "\": only references into this schema (\"#...\") are supported"));
    }
    std::string fragment;
    for (size_t i = 1; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() + 0 &&
          std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
        fragment += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        fragment += text[i];
      }
    }
    if (!fragment.empty() && fragment[0] != '/') {
      return Error(
          ptr, absl::StrCat("$ref \"", text, "\": anchors are not supported, only JSON pointers"));
    }
    const Json* node = &root_;
    std::string canonical;
    for (size_t start = 1; start <= fragment.size() && !fragment.empty();) {
      size_t end = fragment.find('/', start);
      if (end == std::string::npos) end = fragment.size();
      std::string token;
      for (size_t i = start; i < end; ++i) {
        if (fragment[i] == '~' && i + 1 < end &&
            (fragment[i + 1] == '0' || fragment[i + 1] == '1')) {
          token += fragment[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          token += fragment[i];
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos && token.size() < 10 &&
                 std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        return Error(ptr, absl::StrCat("$ref \"", text, "\" does not resolve"));
      }
      canonical.push_back('/');
      canonical.append(EscapePointerToken(token));
      start = end + 1;
    }
    ASSIGN_OR_RETURN(const int32_t rule, RuleFor(*node, canonical, depth + 1));
    return Ref(rule);
  }

  absl::StatusOr<Expr> EnumExpr(const Json& schema, const char* keyword,
                                const std::vector<std::string>& types, const std::string& ptr) {
    std::vector<Json> values;
    if (std::string_view(keyword) == "const") {
      values.push_back(schema["const"]);
    } else {
      if (!schema["enum"].is_array() || schema["enum"].empty()) {
        return Error(ptr, "keyword \"enum\" needs a non-empty array");
      }
      for (const Json& v : schema["enum"]) values.push_back(v);
    }
    std::vector<Expr> alternatives;
    for (const Json& v : values) {
      bool typed = types.empty();
      for (const std::string& t : types) typed = typed || HasType(v, t);
      if (typed) alternatives.push_back(Literal(v.dump()));
    }
    if (alternatives.empty())
      return Error(ptr, absl::StrCat("no \"", keyword, "\" value has the schema's type"));
    Expr body;
    body.kind = Expr::Kind::kAlt;
    body.children = std::move(alternatives);
    return body;
  }

  // A non-negative integer keyword, at most kMaxRepetition; `fallback` when absent.
  absl::StatusOr<int64_t> Count(const Json& schema, const char* keyword, const std::string& ptr,
                                int64_t fallback) {
    if (!schema.contains(keyword)) return fallback;
    const Json& v = schema[keyword];
    if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
      return Error(ptr, absl::StrCat("keyword \"", keyword, "\" must be a non-negative integer"));
    }
    if (v.get<double>() > static_cast<double>(kMaxRepetition)) {
      return Error(ptr, absl::StrCat("keyword \"", keyword, "\" is ", v.dump(),
                                     ", over the limit of ", kMaxRepetition));
    }
    return v.get<int64_t>();
  }

  absl::StatusOr<std::optional<double>> Bound(const Json& schema, const char* keyword,
                                              const std::string& ptr) {
    if (!schema.contains(keyword)) return std::nullopt;
    const Json& v = schema[keyword];
    if (!v.is_number()) {
      return Error(ptr, absl::StrCat("keyword \"", keyword, "\" must be a number"));
    }
    return v.get<double>();
  }

  absl::StatusOr<Expr> StringExpr(const Json& schema, const std::string& ptr) {
    ASSIGN_OR_RETURN(const int64_t min, Count(schema, "minLength", ptr, 0));
    ASSIGN_OR_RETURN(const int64_t max, Count(schema, "maxLength", ptr, -1));
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    if (max >= 0 && max < min) return Error(ptr, "minLength is above maxLength");
    if (schema.contains("format")) {
      if (!schema["format"].is_string()) return Error(ptr, "keyword \"format\" must be a string");
      if (lengths || schema.contains("pattern")) {
        return Error(ptr, "keyword \"format\" beside a length or a pattern is not supported");
      }
      const std::string format = schema["format"].get<std::string>();
      absl::StatusOr<Expr> e = values_.FormattedString(format);
      if (!e.ok()) return Error(ptr, absl::StrCat("format \"", format, "\" is not supported"));
      return e;
    }
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) return Error(ptr, "keyword \"pattern\" must be a string");
      if (lengths) {
        return Error(ptr, "keyword \"pattern\" beside minLength/maxLength is not supported");
      }
      absl::StatusOr<Expr> e = ParseRegex(schema["pattern"].get<std::string>(), true);
      if (!e.ok()) return Error(ptr, absl::StrCat("pattern: ", std::string(e.status().message())));
      return Seq({Literal("\""), *std::move(e), Literal("\"")});
    }
    return values_.String(min, max);
  }

  absl::StatusOr<Expr> NumberExpr(const Json& schema, const std::string& ptr, bool integer) {
    ASSIGN_OR_RETURN(const std::optional<double> minimum, Bound(schema, "minimum", ptr));
    ASSIGN_OR_RETURN(const std::optional<double> maximum, Bound(schema, "maximum", ptr));
    ASSIGN_OR_RETURN(const std::optional<double> xmin, Bound(schema, "exclusiveMinimum", ptr));
    ASSIGN_OR_RETURN(const std::optional<double> xmax, Bound(schema, "exclusiveMaximum", ptr));
    if (!minimum && !maximum && !xmin && !xmax && !integer) return values_.Number();
    const double limit = static_cast<double>(MaxJsonInteger());
    // The tightest bounds, and the integers within them.
    double lower = -INFINITY, upper = INFINITY;
    double a = -limit, b = limit;
    if (minimum) lower = std::max(lower, *minimum), a = std::max(a, std::ceil(*minimum));
    if (xmin) lower = std::max(lower, *xmin), a = std::max(a, std::floor(*xmin) + 1);
    if (maximum) upper = std::min(upper, *maximum), b = std::min(b, std::floor(*maximum));
    if (xmax) upper = std::min(upper, *xmax), b = std::min(b, std::ceil(*xmax) - 1);
    if (lower > upper || (lower == upper && (xmin || xmax))) {
      return Error(ptr, "the minimum is above the maximum");
    }
    if (a > limit || b < -limit) {
      return Error(ptr, absl::StrCat("bounds outside the integers of at most ", kMaxIntegerDigits,
                                     " digits are not supported"));
    }
    std::vector<Expr> alternatives;
    if (a <= b) {
      // The limit as a double rounds up to 10^18: clamp again as integers.
      alternatives.push_back(
          JsonValues::IntegerRange(std::max(static_cast<int64_t>(a), -MaxJsonInteger()),
                                   std::min(static_cast<int64_t>(b), MaxJsonInteger())));
    }
    if (!integer) {
      // k.ddd lies in [k, k + 1): fits when k >= a and k + 1 <= upper.
      const double kpos_lo = std::max(a, 0.0);
      const double kpos_hi = std::min(limit, std::isinf(upper) ? limit : std::floor(upper) - 1);
      Expr fraction = Seq({Literal("."), Repeat(ByteRange('0', '9'), 1, kMaxFractionDigits)});
      if (kpos_lo <= kpos_hi) {
        alternatives.push_back(Seq(
            {JsonValues::IntegerRange(static_cast<int64_t>(kpos_lo), static_cast<int64_t>(kpos_hi)),
             fraction}));
      }
      // -k.ddd lies in (-(k + 1), -k]: fits when -k <= b and -(k + 1) >= lower.
      const double kneg_lo = std::max(0.0, -b);
      const double kneg_hi = std::min(limit, std::isinf(lower) ? limit : -std::ceil(lower) - 1);
      if (kneg_lo <= kneg_hi) {
        alternatives.push_back(Seq(
            {Literal("-"),
             JsonValues::IntegerRange(static_cast<int64_t>(kneg_lo), static_cast<int64_t>(kneg_hi)),
             fraction}));
      }
    }
    if (alternatives.empty()) {
      return Error(ptr, integer ? "no integer lies within the bounds"
                                : "no number with a whole integer part lies within the bounds "
                                  "(bounds closer than one unit are not supported)");
    }
    return Alt(std::move(alternatives));
  }

  absl::StatusOr<Expr> ArrayExpr(const Json& schema, const std::string& ptr, int depth) {
    ASSIGN_OR_RETURN(const int64_t min, Count(schema, "minItems", ptr, 0));
    ASSIGN_OR_RETURN(int64_t max, Count(schema, "maxItems", ptr, Expr::kUnbounded));
    std::vector<Expr> prefix;
    if (schema.contains("prefixItems")) {
      const Json& items = schema["prefixItems"];
      if (!items.is_array()) return Error(ptr, "keyword \"prefixItems\" must be an array");
      if (static_cast<int64_t>(items.size()) > kMaxRepetition) {
        return Error(ptr, absl::StrCat("keyword \"prefixItems\" has more than ", kMaxRepetition,
                                       " members"));
      }
      for (size_t i = 0; i < items.size(); ++i) {
        ASSIGN_OR_RETURN(Expr e, Sub(items[i], absl::StrCat(ptr, "/prefixItems/", i), depth));
        prefix.push_back(std::move(e));
      }
    }
    const int64_t p = static_cast<int64_t>(prefix.size());
    std::optional<Expr> item;
    if (!schema.contains("items")) {
      item = values_.AnyValue();
    } else if (schema["items"] == Json(false)) {
      if (max == Expr::kUnbounded || max > p) max = p;
    } else {
      ASSIGN_OR_RETURN(item, Sub(schema["items"], ptr + "/items", depth));
    }
    if (max != Expr::kUnbounded && min > max) {
      return Error(ptr, "minItems is above maxItems (or the items that \"items\": false allows)");
    }
    const Expr ws = values_.Whitespace();
    const Expr sep = Seq({ws, Literal(","), ws});
    if (max == 0) return Seq({Literal("["), ws, Literal("]")});
    // tail[i]: the elements after the first i.
    Expr tail;
    if (item) {
      const int64_t from = std::max<int64_t>(p, 1);
      const int64_t count_max = max == Expr::kUnbounded ? Expr::kUnbounded : max - from;
      if (count_max != 0) {
        tail = Repeat(Seq({sep, *item}), std::max<int64_t>(0, min - from), count_max);
      }
    }
    for (int64_t i = p - 1; i >= 1; --i) {
      if (max != Expr::kUnbounded && i >= max) continue;
      Expr inner = Seq({sep, prefix[i], std::move(tail)});
      tail = i >= min ? Optional(std::move(inner)) : std::move(inner);
    }
    Expr elements = Seq({p > 0 ? prefix[0] : *item, std::move(tail)});
    if (min >= 1) return Seq({Literal("["), ws, std::move(elements), ws, Literal("]")});
    return Seq({Literal("["), ws, Optional(Seq({std::move(elements), ws})), Literal("]")});
  }

  absl::StatusOr<Expr> ObjectExpr(const Json& schema, const std::string& ptr, int depth) {
    static const Json kAny = true;
    std::vector<std::pair<std::string, const Json*>> properties;
    if (schema.contains("properties")) {
      const Json& props = schema["properties"];
      if (!props.is_object()) return Error(ptr, "keyword \"properties\" must be an object");
      for (const auto& [name, sub] : props.items()) properties.emplace_back(name, &sub);
    }
    std::set<std::string> required;
    if (schema.contains("required")) {
      const Json& req = schema["required"];
      if (!req.is_array()) return Error(ptr, "keyword \"required\" must be an array");
      for (const Json& name : req) {
        if (!name.is_string()) return Error(ptr, "keyword \"required\" lists a non-string");
        required.insert(name.get<std::string>());
      }
    }
    std::optional<Expr> extra_value;
    // Absent beside "properties": no extras, as OpenAI's strict mode and XGrammar's default have
    // it. Every output stays valid under the schema (extras are allowed, not required), and a
    // model cannot run on adding properties nobody asked for.
    const bool closed_by_default = !schema.contains("additionalProperties") && !properties.empty();
    if (closed_by_default) {
    } else if (!schema.contains("additionalProperties") ||
               schema["additionalProperties"] == Json(true)) {
      extra_value = values_.AnyValue();
    } else if (schema["additionalProperties"] != Json(false)) {
      ASSIGN_OR_RETURN(extra_value,
                       Sub(schema["additionalProperties"], ptr + "/additionalProperties", depth));
    }
    for (const std::string& name : required) {
      bool listed = false;
      for (const auto& [n, sub] : properties) listed = listed || n == name;
      if (listed) continue;
      if (!extra_value && !closed_by_default) {
        return Error(ptr,
                     absl::StrCat("required property \"", name,
                                  "\" is not in \"properties\" and additionalProperties is false"));
      }
      properties.emplace_back(name, &kAny);
    }
    const Expr ws = values_.Whitespace();
    std::vector<std::string> names;
    std::vector<Expr> members;
    for (const auto& [name, sub] : properties) {
      names.push_back(name);
      Expr value;
      if (sub == &kAny) {
        value = values_.AnyValue();
      } else {
        ASSIGN_OR_RETURN(value, Sub(*sub, ptr + "/properties/" + EscapePointerToken(name), depth));
      }
      members.push_back(
          Seq({JsonValues::StringLiteral(name), ws, Literal(":"), ws, std::move(value)}));
    }
    const Expr sep = Seq({ws, Literal(","), ws});
    auto rule = [&](Expr body) {
      const int32_t r = builder_.AddRule(ptr.empty() ? "/" : ptr);
      builder_.SetBody(r, std::move(body));
      return Ref(r);
    };
    // rest: members after at least one; first: at least one member.
    Expr rest, first;
    if (extra_value) {
      Expr extra = Seq({values_.KeyNotIn(names), ws, Literal(":"), ws, *extra_value});
      rest = rule(Star(Seq({sep, extra})));
      first = rule(Seq({std::move(extra), rest}));
    } else {
      rest = Empty();
      first = Alt({});
    }
    bool any_required = false;
    for (int64_t i = static_cast<int64_t>(members.size()) - 1; i >= 0; --i) {
      const bool req = required.contains(names[i]);
      any_required = any_required || req;
      Expr with = Seq({sep, members[i], rest});
      Expr new_rest = req ? std::move(with) : Alt({std::move(with), rest});
      Expr start = Seq({members[i], rest});
      first = rule(req ? std::move(start) : Alt({std::move(start), first}));
      rest = rule(std::move(new_rest));
    }
    if (any_required) return Seq({Literal("{"), ws, first, ws, Literal("}")});
    return Seq({Literal("{"), ws, Optional(Seq({first, ws})), Literal("}")});
  }

  const Json& root_;
  GrammarBuilder builder_;
  JsonValues values_;
  absl::flat_hash_map<std::string, int32_t> rules_;
};

}  // namespace

absl::StatusOr<Program> JsonSchemaToProgram(std::string_view schema_json) {
  if (static_cast<int64_t>(schema_json.size()) > kMaxSchemaBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schema of ", schema_json.size(), " bytes is over the limit of ", kMaxSchemaBytes));
  }
  const Json schema = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("schema is not valid JSON");
  return SchemaCompiler(schema).Compile();
}

Program AnyJsonObjectProgram() {
  GrammarBuilder builder;
  JsonValues values(&builder);
  const int32_t root = builder.AddRule("root");
  builder.SetBody(root, values.AnyObject());
  return *builder.Build(root);
}

}  // namespace convoy::grammar
