// Lookups, iteration, slicing, global functions and methods. Filters and tests are in
// jinja_filters.cc.
#include "text/jinja_builtins.h"

#include <algorithm>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_operators.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

// Jinja's object_type_repr: how error messages name the type of a value.
std::string ObjectTypeRepr(const Value& value) {
  if (value.is_none()) return "None";
  return Cat(TypeName(value), " object");
}

Value NoAttribute(const Value& object, std::string_view name) {
  return Value::Undefined(Cat("'", ObjectTypeRepr(object), "' has no attribute '", name, "'"));
}

absl::Status ArgumentError(std::string_view function, std::string_view problem) {
  return absl::InvalidArgumentError(Cat(function, "() ", problem));
}

// Checks the number of positional arguments and that keywords are among `keywords`.
absl::Status CheckArity(std::string_view function, const CallArgs& args, size_t min, size_t max,
                        std::vector<std::string_view> keywords = {}) {
  if (args.positional.size() < min || args.positional.size() > max) {
    return ArgumentError(
        function, Cat("takes ", min == max ? "" : "from ", min, min == max ? "" : Cat(" to ", max),
                      " arguments (", args.positional.size(), " given)"));
  }
  for (const auto& [name, unused] : args.keyword) {
    if (std::find(keywords.begin(), keywords.end(), name) == keywords.end()) {
      return ArgumentError(function, Cat("got an unexpected keyword argument '", name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> StringArg(std::string_view function, const Value& value) {
  if (!value.is_string()) {
    return ArgumentError(function, Cat("argument must be str, not ", TypeName(value)));
  }
  return value.string_value();
}

// An optional str argument: none and undefined mean absent.
absl::StatusOr<std::optional<std::string>> OptionalStringArg(std::string_view function,
                                                             const Value& value) {
  if (value.is_none() || value.is_undefined()) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string text, StringArg(function, value));
  return std::optional<std::string>(std::move(text));
}

absl::StatusOr<int64_t> IntArg(std::string_view function, const Value& value) {
  if (!value.is_integer()) {
    return ArgumentError(function, Cat("argument must be int, not ", TypeName(value)));
  }
  return value.int_value();
}

Value StringList(std::vector<std::string> parts, SeqKind kind = SeqKind::kList) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.push_back(Value::String(std::move(part)));
  return Value::List(std::move(items), kind);
}

// Resolves Python slice bounds (slice.indices) and returns the selected positions.
absl::StatusOr<std::vector<int64_t>> SlicePositions(int64_t length, const Value& start_value,
                                                    const Value& stop_value,
                                                    const Value& step_value) {
  auto bound = [](const Value& v) -> absl::StatusOr<std::optional<int64_t>> {
    if (v.is_undefined() || v.is_none()) return std::optional<int64_t>();
    if (!v.is_integer()) {
      return absl::InvalidArgumentError("slice indices must be integers or None");
    }
    return std::optional<int64_t>(v.int_value());
  };
  ASSIGN_OR_RETURN(std::optional<int64_t> start, bound(start_value));
  ASSIGN_OR_RETURN(std::optional<int64_t> stop, bound(stop_value));
  ASSIGN_OR_RETURN(std::optional<int64_t> step_opt, bound(step_value));
  const int64_t step = step_opt.value_or(1);
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  const int64_t lower = step > 0 ? 0 : -1;
  const int64_t upper = step > 0 ? length : length - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x = x < -length ? lower : x + length;  // avoids overflow for huge negative bounds
      return std::max(x, lower);
    }
    return std::min(x, upper);
  };
  const int64_t first = clamp(start, step > 0 ? lower : upper);
  const int64_t last = clamp(stop, step > 0 ? upper : lower);
  std::vector<int64_t> positions;
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step) positions.push_back(i);
  return positions;
}

absl::StatusOr<Value> StringMethod(const std::string& text, std::string_view name,
                                   const CallArgs& args, Budget& budget) {
  const Value none = Value::None();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 1));
    ASSIGN_OR_RETURN(std::optional<std::string> chars,
                     OptionalStringArg(name, args.Get(0, "", none)));
    return Value::String(PyStrip(text, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 2, {"sep", "maxsplit"}));
    ASSIGN_OR_RETURN(std::optional<std::string> sep,
                     OptionalStringArg(name, args.Get(0, "sep", none)));
    const Value& maxsplit_value = args.Get(1, "maxsplit", Value::Int(-1));
    ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(name, maxsplit_value));
    if (sep && sep->empty()) return absl::InvalidArgumentError("empty separator");
    std::vector<std::string> parts = PySplit(text, sep, maxsplit, name == "rsplit");
    RETURN_IF_ERROR(budget.CheckListSize(parts.size()));
    return StringList(std::move(parts));
  }
  if (name == "splitlines") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 0));
    return StringList(PySplitLines(text));
  }
  if (name == "startswith" || name == "endswith") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    const Value& affix = args.positional[0];
    std::vector<Value> candidates = affix.is_list() && affix.list().kind == SeqKind::kTuple
                                        ? affix.list().items
                                        : std::vector<Value>{affix};
    for (const Value& candidate : candidates) {
      ASSIGN_OR_RETURN(std::string s, StringArg(name, candidate));
      if (name == "startswith" ? text.starts_with(s) : text.ends_with(s)) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 0));
    if (name == "upper") return Value::String(PyUpper(text));
    if (name == "lower") return Value::String(PyLower(text));
    if (name == "title") return Value::String(PyTitle(text));
    return Value::String(PyCapitalize(text));
  }
  if (name == "replace") {
    RETURN_IF_ERROR(CheckArity(name, args, 2, 3));
    ASSIGN_OR_RETURN(std::string old_text, StringArg(name, args.positional[0]));
    ASSIGN_OR_RETURN(std::string new_text, StringArg(name, args.positional[1]));
    ASSIGN_OR_RETURN(int64_t count, IntArg(name, args.Get(2, "", Value::Int(-1))));
    std::string out = PyReplace(text, old_text, new_text, count);
    RETURN_IF_ERROR(budget.CheckStringSize(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "index" || name == "count") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    ASSIGN_OR_RETURN(std::string sub, StringArg(name, args.positional[0]));
    if (name == "count") return Value::Int(PyCount(text, sub));
    const int64_t at = PyFind(text, sub);
    if (at < 0 && name == "index") return absl::InvalidArgumentError("substring not found");
    return Value::Int(at);
  }
  if (name == "join") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(args.positional[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return absl::InvalidArgumentError(
            Cat("sequence item ", i, ": expected str instance, ", TypeName(items[i]), " found"));
      }
      if (i > 0) out += text;
      out += items[i].string_value();
      RETURN_IF_ERROR(budget.CheckStringSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    ASSIGN_OR_RETURN(std::string sep, StringArg(name, args.positional[0]));
    if (sep.empty()) return absl::InvalidArgumentError("empty separator");
    const size_t at = name == "partition" ? text.find(sep) : text.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? StringList({text, "", ""}, SeqKind::kTuple)
                                 : StringList({"", "", text}, SeqKind::kTuple);
    }
    return StringList({text.substr(0, at), sep, text.substr(at + sep.size())}, SeqKind::kTuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    ASSIGN_OR_RETURN(std::string affix, StringArg(name, args.positional[0]));
    if (name == "removeprefix" && text.starts_with(affix)) {
      return Value::String(text.substr(affix.size()));
    }
    if (name == "removesuffix" && text.ends_with(affix)) {
      return Value::String(text.substr(0, text.size() - affix.size()));
    }
    return Value::String(text);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "islower" || name == "isupper") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 0));
    const std::u32string cps = DecodeUtf8(text);
    if (cps.empty()) return Value::Bool(false);
    auto all = [&](auto predicate) { return std::all_of(cps.begin(), cps.end(), predicate); };
    auto digit = [](char32_t c) { return c >= '0' && c <= '9'; };
    auto alpha = [](char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (name == "isdigit") return Value::Bool(all(digit));
    if (name == "isalpha") return Value::Bool(all(alpha));
    if (name == "isalnum")
      return Value::Bool(all([&](char32_t c) { return digit(c) || alpha(c); }));
    if (name == "isspace") return Value::Bool(all(IsPythonSpace));
    const bool any_cased = std::any_of(cps.begin(), cps.end(), IsCased);
    if (name == "islower") return Value::Bool(any_cased && PyLower(text) == text);
    return Value::Bool(any_cased && PyUpper(text) == text);
  }
  return absl::InvalidArgumentError(Cat("'str object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> DictMethod(const DictData& dict, std::string_view name,
                                 const CallArgs& args) {
  if (name == "items" || name == "keys" || name == "values") {
    RETURN_IF_ERROR(CheckArity(name, args, 0, 0));
    std::vector<Value> items;
    for (const auto& [key, value] : dict.entries) {
      if (name == "items") {
        items.push_back(Value::List({Value::String(key), value}, SeqKind::kTuple));
      } else {
        items.push_back(name == "keys" ? Value::String(key) : value);
      }
    }
    return Value::List(std::move(items));
  }
  if (name == "get") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 2));
    const Value& key = args.positional[0];
    const Value* found = key.is_string() ? dict.Find(key.string_value()) : nullptr;
    if (found != nullptr) return *found;
    return args.positional.size() > 1 ? args.positional[1] : Value::None();
  }
  if (name == "pop" || name == "update" || name == "setdefault" || name == "clear" ||
      name == "popitem") {
    return absl::InvalidArgumentError(
        Cat("access to attribute '", name, "' of 'dict' object is unsafe."));
  }
  return absl::InvalidArgumentError(Cat("'dict object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> ListMethod(const ListData& list, std::string_view name, const CallArgs& args,
                                 Budget& budget) {
  if (name == "index" || name == "count") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    int64_t count = 0;
    for (size_t i = 0; i < list.items.size(); ++i) {
      ASSIGN_OR_RETURN(bool equal, Equals(list.items[i], args.positional[0], budget));
      if (!equal) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") return absl::InvalidArgumentError("value is not in list");
    return Value::Int(count);
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "sort" || name == "reverse" || name == "clear") {
    return absl::InvalidArgumentError(
        Cat("access to attribute '", name, "' of 'list' object is unsafe."));
  }
  return absl::InvalidArgumentError(Cat("'list object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> StrftimeNow(const CallArgs& args, const CallEnvironment& environment) {
  RETURN_IF_ERROR(CheckArity("strftime_now", args, 1, 1));
  ASSIGN_OR_RETURN(std::string format, StringArg("strftime_now", args.positional[0]));
  // Local time, as Python's datetime.now().strftime() formats it.
  const std::time_t seconds = std::chrono::system_clock::to_time_t(environment.now);
  std::tm parts{};
  localtime_r(&seconds, &parts);
  std::string buffer(64 + format.size() * 16, '\0');
  const size_t written = std::strftime(buffer.data(), buffer.size(), format.c_str(), &parts);
  if (written == 0 && !format.empty()) {
    return absl::InvalidArgumentError("strftime_now() format gives an empty or oversized result");
  }
  buffer.resize(written);
  return Value::String(std::move(buffer));
}

absl::StatusOr<Value> Range(const CallArgs& args, Budget& budget) {
  RETURN_IF_ERROR(CheckArity("range", args, 1, 3));
  std::vector<int64_t> bounds;
  for (const Value& v : args.positional) {
    ASSIGN_OR_RETURN(int64_t bound, IntArg("range", v));
    bounds.push_back(bound);
  }
  const int64_t start = bounds.size() > 1 ? bounds[0] : 0;
  const int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
  const int64_t step = bounds.size() > 2 ? bounds[2] : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (items.size() >= budget.max_list_items()) return budget.CheckListSize(items.size() + 1);
    RETURN_IF_ERROR(budget.Spend(1));
    items.push_back(Value::Int(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::List(std::move(items));
}

// namespace(...) and dict(...): an optional mapping, then keyword arguments.
absl::StatusOr<Value> MakeMapping(std::string_view name, const CallArgs& args, MapKind kind) {
  if (args.positional.size() > 1) {
    return ArgumentError(name,
                         Cat("takes at most 1 argument (", args.positional.size(), " given)"));
  }
  DictData data;
  if (!args.positional.empty()) {
    const Value& initial = args.positional[0];
    if (!initial.is_dict() || initial.dict().kind != MapKind::kDict) {
      return ArgumentError(name, "takes a dict as its positional argument");
    }
    data.entries = initial.dict().entries;
  }
  for (const auto& [key, value] : args.keyword) {
    if (kind == MapKind::kNamespace && value.is_namespace()) {
      return absl::InvalidArgumentError("a namespace cannot hold a namespace");
    }
    data.Set(key, value);
  }
  return Value::Dict(std::move(data.entries), kind);
}

}  // namespace

Value CallArgs::Get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [key, value] : keyword) {
    if (!name.empty() && key == name) return value;
  }
  return fallback;
}

const std::vector<std::string>& GlobalFunctionNames() {
  static const auto* const kNames =
      new std::vector<std::string>{"raise_exception", "strftime_now", "namespace", "range", "dict"};
  return *kNames;
}

absl::StatusOr<Value> CallFunction(std::string_view name, const CallArgs& args,
                                   const CallEnvironment& environment, Budget& budget) {
  if (name == "raise_exception") {
    RETURN_IF_ERROR(CheckArity(name, args, 1, 1));
    ASSIGN_OR_RETURN(std::string message, ToStr(args.positional[0], budget));
    absl::Status status = absl::InvalidArgumentError(message);
    status.SetPayload(kRaisedPayload, absl::Cord(message));
    return status;
  }
  if (name == "strftime_now") return StrftimeNow(args, environment);
  if (name == "range") return Range(args, budget);
  if (name == "namespace") return MakeMapping(name, args, MapKind::kNamespace);
  if (name == "dict") return MakeMapping(name, args, MapKind::kDict);
  return absl::InvalidArgumentError(Cat("'", name, "' is not callable"));
}

absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name, const CallArgs& args,
                                 Budget& budget) {
  switch (object.type()) {
    case Value::Type::kUndefined:
      return UndefinedError(object);
    case Value::Type::kString:
      return StringMethod(object.string_value(), name, args, budget);
    case Value::Type::kList:
      return ListMethod(object.list(), name, args, budget);
    case Value::Type::kDict:
      if (object.dict().kind == MapKind::kDict) return DictMethod(object.dict(), name, args);
      if (object.dict().kind == MapKind::kLoop && name == "cycle") {
        if (args.positional.empty())
          return absl::InvalidArgumentError("no items for cycling given");
        const int64_t index0 = object.dict().Find("index0")->int_value();
        return args.positional[static_cast<size_t>(index0) % args.positional.size()];
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      Cat("'", ObjectTypeRepr(object), "' has no attribute '", name, "'"));
}

absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict()) {
    const Value* found = object.dict().Find(name);
    if (found != nullptr) return *found;
  }
  return NoAttribute(object, name);
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (key.is_string()) return GetAttribute(object, key.string_value());
  if (key.is_integer() && (object.is_list() || object.is_string())) {
    const int64_t length = object.is_list() ? static_cast<int64_t>(object.list().items.size())
                                            : CodePointCount(object.string_value());
    int64_t index = key.int_value();
    if (index < 0) index += length;
    if (index >= 0 && index < length) {
      if (object.is_list()) return object.list().items[static_cast<size_t>(index)];
      std::string character;
      AppendUtf8(DecodeUtf8(object.string_value())[static_cast<size_t>(index)], &character);
      return Value::String(std::move(character));
    }
  }
  const std::string shown =
      key.is_integer() ? Cat(key.int_value()) : Cat("of type ", TypeName(key));
  return Value::Undefined(Cat(ObjectTypeRepr(object), " has no element ", shown));
}

absl::StatusOr<Value> Slice(const Value& object, const Value& start, const Value& stop,
                            const Value& step, Budget& budget) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_list()) {
    const auto& items = object.list().items;
    ASSIGN_OR_RETURN(std::vector<int64_t> positions,
                     SlicePositions(static_cast<int64_t>(items.size()), start, stop, step));
    RETURN_IF_ERROR(budget.Spend(static_cast<int64_t>(positions.size())));
    std::vector<Value> out;
    out.reserve(positions.size());
    for (int64_t p : positions) out.push_back(items[static_cast<size_t>(p)]);
    return Value::List(std::move(out), object.list().kind);
  }
  if (object.is_string()) {
    const std::u32string cps = DecodeUtf8(object.string_value());
    ASSIGN_OR_RETURN(std::vector<int64_t> positions,
                     SlicePositions(static_cast<int64_t>(cps.size()), start, stop, step));
    std::u32string out;
    for (int64_t p : positions) out.push_back(cps[static_cast<size_t>(p)]);
    return Value::String(EncodeUtf8(out));
  }
  return absl::InvalidArgumentError(Cat("'", TypeName(object), "' object is not subscriptable"));
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined:
      return std::vector<Value>();
    case Value::Type::kList:
      return value.list().items;
    case Value::Type::kString: {
      std::vector<Value> out;
      for (char32_t c : DecodeUtf8(value.string_value())) {
        std::string character;
        AppendUtf8(c, &character);
        out.push_back(Value::String(std::move(character)));
      }
      return out;
    }
    case Value::Type::kDict:
      if (value.dict().kind == MapKind::kDict) {
        std::vector<Value> keys;
        for (const auto& entry : value.dict().entries) keys.push_back(Value::String(entry.first));
        return keys;
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(Cat("'", TypeName(value), "' object is not iterable"));
}

}  // namespace convoy::jinja
