#include "text/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/jinja_strings.h"

namespace convoy::jinja {
namespace {

// Values are at most kMaxValueDepth deep where they are built; a namespace may add a level.
constexpr int kMaxDepth = kMaxValueDepth + 2;

absl::Status TooDeep() {
  return absl::ResourceExhaustedError(Cat("value nested deeper than ", kMaxDepth, " levels"));
}

absl::Status AppendRepr(const Value& value, Budget& budget, int depth, std::string* out);

absl::Status AppendStrAt(const Value& value, Budget& budget, int depth, std::string* out) {
  if (depth > kMaxDepth) return TooDeep();
  RETURN_IF_ERROR(budget.Spend(1));
  switch (value.type()) {
    case Value::Type::kUndefined:
      break;
    case Value::Type::kNone:
      out->append("None");
      break;
    case Value::Type::kBool:
      out->append(value.bool_value() ? "True" : "False");
      break;
    case Value::Type::kInt:
      absl::StrAppend(out, value.int_value());
      break;
    case Value::Type::kFloat:
      out->append(PyFloatRepr(value.AsDouble()));
      break;
    case Value::Type::kString:
      out->append(value.string_value());
      break;
    case Value::Type::kList: {
      const ListData& list = value.list();
      const bool tuple = list.kind == SeqKind::kTuple;
      out->push_back(tuple ? '(' : '[');
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out->append(", ");
        RETURN_IF_ERROR(AppendRepr(list.items[i], budget, depth + 1, out));
      }
      if (tuple && list.items.size() == 1) out->push_back(',');
      out->push_back(tuple ? ')' : ']');
      break;
    }
    case Value::Type::kDict: {
      const DictData& dict = value.dict();
      if (dict.kind == MapKind::kLoop) {
        const Value* index = dict.Find("index");
        const Value* length = dict.Find("length");
        absl::StrAppend(out, "<LoopContext ", index ? index->int_value() : 0, "/",
                        length ? length->int_value() : 0, ">");
        break;
      }
      if (dict.kind == MapKind::kNamespace) out->append("<Namespace ");
      out->push_back('{');
      for (size_t i = 0; i < dict.entries.size(); ++i) {
        if (i > 0) out->append(", ");
        out->append(PyRepr(dict.entries[i].first));
        out->append(": ");
        RETURN_IF_ERROR(AppendRepr(dict.entries[i].second, budget, depth + 1, out));
      }
      out->push_back('}');
      if (dict.kind == MapKind::kNamespace) out->push_back('>');
      break;
    }
    case Value::Type::kFunction:
      absl::StrAppend(out, "<function ", value.string_value(), ">");
      break;
  }
  return budget.CheckStringSize(out->size());
}

absl::Status AppendRepr(const Value& value, Budget& budget, int depth, std::string* out) {
  if (value.is_string()) {
    RETURN_IF_ERROR(budget.Spend(1));
    out->append(PyRepr(value.string_value()));
    return budget.CheckStringSize(out->size());
  }
  if (value.is_undefined()) {
    out->append("Undefined");
    return absl::OkStatus();
  }
  return AppendStrAt(value, budget, depth, out);
}

absl::StatusOr<bool> EqualsAt(const Value& a, const Value& b, Budget& budget, int depth) {
  if (depth > kMaxDepth) return TooDeep();
  RETURN_IF_ERROR(budget.Spend(1));
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.int_value() == b.int_value();
    // long double holds every int64 exactly, as Python's int/float comparison is exact.
    const long double x = a.is_float() ? a.AsDouble() : static_cast<long double>(a.int_value());
    const long double y = b.is_float() ? b.AsDouble() : static_cast<long double>(b.int_value());
    return x == y;
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      RETURN_IF_ERROR(budget.Spend(static_cast<int64_t>(a.string_value().size() / 64)));
      return a.string_value() == b.string_value();
    case Value::Type::kFunction:
      return a.string_value() == b.string_value();
    case Value::Type::kList: {
      if (a.identity() == b.identity()) return true;
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        ASSIGN_OR_RETURN(bool equal, EqualsAt(x.items[i], y.items[i], budget, depth + 1));
        if (!equal) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      if (a.identity() == b.identity()) return true;
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      // Namespaces and loop objects compare by identity, as Python objects without __eq__ do.
      if (x.kind != MapKind::kDict || y.kind != MapKind::kDict) return false;
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.Find(key);
        if (other == nullptr) return false;
        ASSIGN_OR_RETURN(bool equal, EqualsAt(item, *other, budget, depth + 1));
        if (!equal) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

absl::StatusOr<int> CompareAt(const Value& a, const Value& b, std::string_view op, Budget& budget,
                              int depth) {
  if (depth > kMaxDepth) return TooDeep();
  RETURN_IF_ERROR(budget.Spend(1));
  if (a.is_undefined() || b.is_undefined()) {
    return absl::InvalidArgumentError((a.is_undefined() ? a : b).string_value());
  }
  if (a.is_number() && b.is_number()) {
    const long double x = a.is_float() ? a.AsDouble() : static_cast<long double>(a.int_value());
    const long double y = b.is_float() ? b.AsDouble() : static_cast<long double>(b.int_value());
    return x < y ? -1 : (y < x ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is Python's string order.
    const int c = a.string_value().compare(b.string_value());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().kind == b.list().kind) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      ASSIGN_OR_RETURN(bool equal, EqualsAt(x[i], y[i], budget, depth + 1));
      if (!equal) return CompareAt(x[i], y[i], op, budget, depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return absl::InvalidArgumentError(Cat("'", op, "' not supported between instances of '",
                                        TypeName(a), "' and '", TypeName(b), "'"));
}

absl::Status AppendJsonAt(const Value& value, const JsonFormat& format, Budget& budget, int depth,
                          std::string* out) {
  if (depth > kMaxDepth) return TooDeep();
  RETURN_IF_ERROR(budget.Spend(1));
  auto newline = [&](int level) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) out->append(*format.indent);
  };
  switch (value.type()) {
    case Value::Type::kNone:
      out->append("null");
      break;
    case Value::Type::kBool:
      out->append(value.bool_value() ? "true" : "false");
      break;
    case Value::Type::kInt:
      absl::StrAppend(out, value.int_value());
      break;
    case Value::Type::kFloat: {
      const double d = value.AsDouble();
      if (std::isnan(d)) {
        out->append("NaN");
      } else if (std::isinf(d)) {
        out->append(d < 0 ? "-Infinity" : "Infinity");
      } else {
        out->append(PyFloatRepr(d));
      }
      break;
    }
    case Value::Type::kString:
      AppendJsonString(value.string_value(), format.ensure_ascii, out);
      break;
    case Value::Type::kList: {
      const auto& items = value.list().items;
      if (items.empty()) {
        out->append("[]");
        break;
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(format.item_separator);
        if (format.indent) newline(depth + 1);
        RETURN_IF_ERROR(AppendJsonAt(items[i], format, budget, depth + 1, out));
      }
      if (format.indent) newline(depth);
      out->push_back(']');
      break;
    }
    case Value::Type::kDict: {
      const DictData& dict = value.dict();
      if (dict.kind != MapKind::kDict) {
        return absl::InvalidArgumentError(
            Cat("Object of type ", TypeName(value), " is not JSON serializable"));
      }
      if (dict.entries.empty()) {
        out->append("{}");
        break;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : dict.entries) entries.push_back(&entry);
      if (format.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* x, const auto* y) { return x->first < y->first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out->append(format.item_separator);
        if (format.indent) newline(depth + 1);
        AppendJsonString(entries[i]->first, format.ensure_ascii, out);
        out->append(format.key_separator);
        RETURN_IF_ERROR(AppendJsonAt(entries[i]->second, format, budget, depth + 1, out));
      }
      if (format.indent) newline(depth);
      out->push_back('}');
      break;
    }
    case Value::Type::kUndefined:
    case Value::Type::kFunction:
      return absl::InvalidArgumentError(
          Cat("Object of type ", TypeName(value), " is not JSON serializable"));
  }
  return budget.CheckStringSize(out->size());
}

}  // namespace

absl::Status Budget::Spend(int64_t units) {
  steps_left_ -= units;
  if (steps_left_ < 0) {
    return absl::ResourceExhaustedError("template rendering ran out of its step budget");
  }
  return absl::OkStatus();
}

absl::Status Budget::CheckStringSize(size_t bytes) const {
  if (bytes > max_string_bytes_) {
    return absl::ResourceExhaustedError(
        Cat("template rendering built a string over ", max_string_bytes_, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Budget::CheckListSize(size_t items) const {
  if (items > max_list_items_) {
    return absl::ResourceExhaustedError(
        Cat("template rendering built a list over ", max_list_items_, " items"));
  }
  return absl::OkStatus();
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void DictData::Set(std::string_view key, Value value) {
  depth = std::max(depth, 1 + value.depth());
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::string(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value Value::Bool(bool value) {
  Value v;
  v.type_ = Type::kBool;
  v.bool_ = value;
  return v;
}

Value Value::Int(int64_t value) {
  Value v;
  v.type_ = Type::kInt;
  v.int_ = value;
  return v;
}

Value Value::Float(double value) {
  Value v;
  v.type_ = Type::kFloat;
  v.float_ = value;
  return v;
}

Value Value::String(std::string value) {
  Value v;
  v.type_ = Type::kString;
  v.string_ = std::make_shared<const std::string>(std::move(value));
  return v;
}

Value Value::List(std::vector<Value> items, SeqKind kind) {
  Value v;
  v.type_ = Type::kList;
  int depth = 1;
  for (const Value& item : items) depth = std::max(depth, 1 + item.depth());
  v.list_ = std::make_shared<const ListData>(ListData{std::move(items), kind, depth});
  return v;
}

Value Value::Dict(std::vector<std::pair<std::string, Value>> entries, MapKind kind) {
  Value v;
  v.type_ = Type::kDict;
  int depth = 1;
  for (const auto& entry : entries) depth = std::max(depth, 1 + entry.second.depth());
  v.dict_ = std::make_shared<DictData>(DictData{std::move(entries), kind, depth});
  return v;
}

Value Value::Function(std::string name) {
  Value v;
  v.type_ = Type::kFunction;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

const std::string& Value::string_value() const {
  static const std::string* const kEmpty = new std::string();
  return string_ ? *string_ : *kEmpty;
}

int Value::depth() const {
  if (list_) return list_->depth;
  if (dict_) return dict_->depth;
  return 0;
}

absl::Status CheckDepth(const Value& value) {
  if (value.depth() > kMaxValueDepth) {
    return absl::ResourceExhaustedError(
        Cat("template rendering nested values deeper than ", kMaxValueDepth, " levels"));
  }
  return absl::OkStatus();
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  return nullptr;
}

bool Truthy(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
      return value.bool_value();
    case Value::Type::kInt:
      return value.int_value() != 0;
    case Value::Type::kFloat:
      return value.AsDouble() != 0;
    case Value::Type::kString:
      return !value.string_value().empty();
    case Value::Type::kList:
      return !value.list().items.empty();
    case Value::Type::kDict:
      return value.dict().kind != MapKind::kDict || !value.dict().entries.empty();
    case Value::Type::kFunction:
      return true;
  }
  return false;
}

std::string TypeName(const Value& value) {
  switch (value.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kList:
      return value.list().kind == SeqKind::kTuple ? "tuple" : "list";
    case Value::Type::kDict:
      switch (value.dict().kind) {
        case MapKind::kDict:
          return "dict";
        case MapKind::kNamespace:
          return "Namespace";
        case MapKind::kLoop:
          return "LoopContext";
      }
      break;
    case Value::Type::kFunction:
      return "function";
  }
  return "object";
}

absl::StatusOr<bool> Equals(const Value& a, const Value& b, Budget& budget) {
  return EqualsAt(a, b, budget, 0);
}

absl::StatusOr<int> Compare(const Value& a, const Value& b, std::string_view op, Budget& budget) {
  return CompareAt(a, b, op, budget, 0);
}

absl::Status AppendStr(const Value& value, Budget& budget, std::string* out) {
  return AppendStrAt(value, budget, 0, out);
}

absl::StatusOr<std::string> ToStr(const Value& value, Budget& budget) {
  if (value.is_string()) return value.string_value();
  std::string out;
  RETURN_IF_ERROR(AppendStrAt(value, budget, 0, &out));
  return out;
}

absl::Status AppendJson(const Value& value, const JsonFormat& format, Budget& budget,
                        std::string* out) {
  return AppendJsonAt(value, format, budget, 0, out);
}

}  // namespace convoy::jinja
