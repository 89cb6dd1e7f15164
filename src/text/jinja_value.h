// The values a chat template computes with, and Python's meaning for what a template can observe of
// them: str(), repr(), ==, <, truthiness and json.dumps (as transformers' `tojson` calls it).
//
// Values are immutable and cheap to copy: lists and dicts are shared. The one exception is a
// namespace() object, which `{% set ns.attr = ... %}` changes in place for every holder, as in
// Jinja2. A namespace may not hold a namespace, so values never form cycles.
#ifndef CONVOY_TEXT_JINJA_VALUE_H_
#define CONVOY_TEXT_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy::jinja {

// Bounds on the work and memory one render may use, so that no template (and no request) can make a
// render run forever or exhaust memory. Every evaluation step and every element that a deep
// operation (printing, comparing, serializing) visits spends one unit.
class Budget {
 public:
  Budget(int64_t max_steps, size_t max_string_bytes, size_t max_list_items)
      : steps_left_(max_steps),
        max_string_bytes_(max_string_bytes),
        max_list_items_(max_list_items) {}

  // RESOURCE_EXHAUSTED once the steps are spent.
  absl::Status Spend(int64_t units);
  // Spends for work proportional to a string's length (one step per 64 bytes).
  absl::Status SpendBytes(size_t bytes) { return Spend(1 + static_cast<int64_t>(bytes / 64)); }
  // RESOURCE_EXHAUSTED for a string or a list larger than a render may build.
  absl::Status CheckStringSize(size_t bytes) const;
  absl::Status CheckListSize(size_t items) const;
  size_t max_string_bytes() const { return max_string_bytes_; }
  size_t max_list_items() const { return max_list_items_; }

 private:
  int64_t steps_left_;
  size_t max_string_bytes_;
  size_t max_list_items_;
};

class Value;

enum class SeqKind { kList, kTuple };
// kLoop is the `loop` object of a for loop: a dict of its attributes that prints as Jinja's does.
enum class MapKind { kDict, kNamespace, kLoop };

struct ListData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  int depth = 1;  // nesting of containers, this one included
};

// An insertion-ordered dict with string keys (Python dicts keep insertion order, and JSON objects
// reach templates in their order).
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  MapKind kind = MapKind::kDict;
  int depth = 1;  // nesting of containers, this one included

  const Value* Find(std::string_view key) const;
  void Set(std::string_view key, Value value);
};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  // An undefined value with no explanation.
  Value() = default;
  // `hint` is the message of the error raised when the undefined value is used (Jinja's
  // UndefinedError), e.g. "'x' is undefined".
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Float(double value);
  static Value String(std::string value);
  static Value List(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value Dict(std::vector<std::pair<std::string, Value>> entries,
                    MapKind kind = MapKind::kDict);
  // A global function (raise_exception, range, ...), called by name.
  static Value Function(std::string name);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  // Python ints, bools included (bool is a subclass of int).
  bool is_integer() const { return type_ == Type::kInt || type_ == Type::kBool; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return is_integer() || is_float(); }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_function() const { return type_ == Type::kFunction; }
  bool is_namespace() const { return is_dict() && dict_->kind == MapKind::kNamespace; }

  bool bool_value() const { return bool_; }
  // REQUIRES: is_integer().
  int64_t int_value() const { return type_ == Type::kBool ? (bool_ ? 1 : 0) : int_; }
  // REQUIRES: is_number().
  double AsDouble() const { return is_float() ? float_ : static_cast<double>(int_value()); }
  // The text of a string, the hint of an undefined value, the name of a function.
  const std::string& string_value() const;
  const ListData& list() const { return *list_; }
  const DictData& dict() const { return *dict_; }
  // REQUIRES: is_namespace().
  DictData* mutable_namespace() const { return dict_.get(); }
  // How deeply containers nest in this value: 0 for a scalar, 1 for a flat list.
  int depth() const;
  // The shared container behind a list or dict (nullptr for other values): equal pointers mean
  // the same object.
  const void* identity() const;

 private:
  Type type_ = Type::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  // Shared, so that copying a value (every variable read) costs the same for long messages.
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<const ListData> list_;
  std::shared_ptr<DictData> dict_;
};

// Values nested deeper than this are refused where they are built (RESOURCE_EXHAUSTED), which
// keeps printing, comparing and freeing them off the end of the stack.
inline constexpr int kMaxValueDepth = 100;
absl::Status CheckDepth(const Value& value);

// Python's bool(value); undefined is false.
bool Truthy(const Value& value);
// Python's type name for error messages: 'int', 'str', 'list', 'dict', 'NoneType', ...
std::string TypeName(const Value& value);

// Python's ==. Undefined equals only undefined.
absl::StatusOr<bool> Equals(const Value& a, const Value& b, Budget& budget);
// Python's ordering for numbers, strings and lists of those: <0, 0 or >0. Other pairs fail with
// Python's TypeError text, naming `op`.
absl::StatusOr<int> Compare(const Value& a, const Value& b, std::string_view op, Budget& budget);

// Python's str() (undefined prints as nothing, as in Jinja2), appended to `out`.
absl::Status AppendStr(const Value& value, Budget& budget, std::string* out);
absl::StatusOr<std::string> ToStr(const Value& value, Budget& budget);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as transformers' tojson calls it.
struct JsonFormat {
  std::optional<std::string> indent;  // one level of indentation; none: all on one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
absl::Status AppendJson(const Value& value, const JsonFormat& format, Budget& budget,
                        std::string* out);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_VALUE_H_
