// The filters, tests, global functions and methods (str.strip(), dict.items(), ...) that templates
// may call, with Jinja2's and Python's behaviour. Errors carry the message Python would give,
// without a position: the evaluator adds the position of the call.
//
// Filters: abs attr capitalize count default|d dictsort escape|e first float indent int items join
//   last length list lower map max min reject rejectattr replace reverse round safe select
//   selectattr sort string sum title tojson (transformers' json.dumps) trim unique upper.
// Tests: boolean callable defined divisibleby eq|equalto|== even false float ge|>= gt|>|greaterthan
//   in integer iterable le|<= lower lt|<|lessthan mapping ne|!= none number odd sameas sequence
//   string true undefined upper.
// Methods: str strip lstrip rstrip split rsplit splitlines startswith endswith upper lower title
//   capitalize replace find index count join partition rpartition removeprefix removesuffix
//   isdigit isalpha isalnum isspace islower isupper; dict items keys values get; list index
//   count; loop.cycle.
// Globals: raise_exception strftime_now namespace range dict.
#ifndef CONVOY_TEXT_JINJA_BUILTINS_H_
#define CONVOY_TEXT_JINJA_BUILTINS_H_

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/jinja_value.h"

namespace convoy::jinja {

// Arguments of one call, evaluated.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`, else `fallback`.
  Value Get(size_t index, std::string_view name, Value fallback) const;
};

// What global functions may read besides their arguments.
struct CallEnvironment {
  std::chrono::system_clock::time_point now;  // strftime_now()
};

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);
// The global functions a template starts with: raise_exception, strftime_now, namespace, range,
// dict.
const std::vector<std::string>& GlobalFunctionNames();

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& target, const CallArgs& args,
                                  Budget& budget);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& target, const CallArgs& args,
                               Budget& budget);
// A global function. raise_exception() fails with the template's message and RaisedPayload().
absl::StatusOr<Value> CallFunction(std::string_view name, const CallArgs& args,
                                   const CallEnvironment& environment, Budget& budget);
// obj.name(args): str, dict, list and loop methods. Methods that would change a value are refused,
// as in Jinja2's ImmutableSandboxedEnvironment.
absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name, const CallArgs& args,
                                 Budget& budget);

// Jinja2's attribute and item lookup: a missing attribute, key or index gives an undefined value
// that explains itself when used; looking into an undefined value fails.
absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name);
absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
// Python slicing of lists, tuples and strings; absent bounds are undefined values.
absl::StatusOr<Value> Slice(const Value& object, const Value& start, const Value& stop,
                            const Value& step, Budget& budget);
// The items a for loop or a filter iterates: list items, string characters, dict keys; nothing
// for undefined.
absl::StatusOr<std::vector<Value>> Iterate(const Value& value);

// The payload key set on errors raised by the template's raise_exception(), whose message is the
// template's own words.
inline constexpr char kRaisedPayload[] = "convoy.text.chat_template.raise_exception";

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_BUILTINS_H_
