#include "text/chat_template.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "nlohmann/json.hpp"
#include "text/jinja_ast.h"
#include "text/jinja_eval.h"
#include "text/jinja_parser.h"
#include "text/jinja_strings.h"

namespace convoy {
namespace {

using jinja::Cat;
using jinja::Value;
using Json = nlohmann::ordered_json;  // keeps members in their order, as Python's json does

// Deeper JSON is refused before parsing: nlohmann's tree is freed recursively.
constexpr int kMaxJsonDepth = 64;

bool JsonTooDeep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Value FromJson(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::Int(static_cast<int64_t>(u));
      return Value::Float(static_cast<double>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(json.get<double>());
    case Json::value_t::string:
      return Value::String(json.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      for (const Json& item : json) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [key, item] : json.items()) entries.emplace_back(key, FromJson(item));
      return Value::Dict(std::move(entries));
    }
    default:
      return Value::None();
  }
}

// Appends the members of `text` (a JSON object; `what` names it in errors) to `variables`; none
// may be one of `reserved`.
absl::Status AddJsonMembers(std::string_view text, std::string_view what,
                            std::initializer_list<std::string_view> reserved,
                            std::vector<std::pair<std::string, Value>>* variables) {
  if (text.empty()) return absl::OkStatus();
  if (JsonTooDeep(text)) {
    return absl::InvalidArgumentError(
        Cat(what, " is nested deeper than ", kMaxJsonDepth, " levels"));
  }
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(Cat(what, " must be a JSON object"));
  }
  for (const auto& [key, item] : json.items()) {
    for (std::string_view r : reserved) {
      if (key == r) return absl::InvalidArgumentError(Cat(what, " may not set '", key, "'"));
    }
    variables->emplace_back(key, FromJson(item));
  }
  return absl::OkStatus();
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const std::vector<jinja::Stmt>> program)
    : program_(std::move(program)) {}

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view jinja_source) {
  absl::StatusOr<jinja::Body> body = jinja::ParseTemplate(jinja_source);
  if (!body.ok()) {
    return absl::Status(body.status().code(), Cat("chat template: ", body.status().message()));
  }
  return ChatTemplate(std::make_shared<const jinja::Body>(std::move(body).value()));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const ChatTemplateOptions& options) const {
  std::vector<Value> message_values;
  message_values.reserve(messages.size());
  for (const ChatMessage& message : messages) {
    std::vector<std::pair<std::string, Value>> members = {
        {"role", Value::String(message.role)}, {"content", Value::String(message.content)}};
    RETURN_IF_ERROR(AddJsonMembers(message.extra_json, "a message's extra_json",
                                   {"role", "content"}, &members));
    message_values.push_back(Value::Dict(std::move(members)));
  }
  // Later entries win: extra_context_json may override everything but `messages`.
  std::vector<std::pair<std::string, Value>> variables = {
      {"messages", Value::List(std::move(message_values))},
      {"tools", Value::None()},
      {"documents", Value::None()},
      {"add_generation_prompt", Value::Bool(options.add_generation_prompt)},
  };
  if (!options.bos_token.empty())
    variables.emplace_back("bos_token", Value::String(options.bos_token));
  if (!options.eos_token.empty())
    variables.emplace_back("eos_token", Value::String(options.eos_token));
  RETURN_IF_ERROR(
      AddJsonMembers(options.extra_context_json, "extra_context_json", {"messages"}, &variables));

  jinja::CallEnvironment environment;
  environment.now = options.now.value_or(std::chrono::system_clock::now());
  jinja::RenderLimits limits;
  limits.max_steps = options.max_steps;
  limits.max_string_bytes = options.max_output_bytes;
  absl::StatusOr<std::string> text =
      jinja::RenderTemplate(*program_, variables, environment, limits);
  if (!text.ok() && !IsRaisedByTemplate(text.status())) {
    absl::Status status(text.status().code(), Cat("chat template: ", text.status().message()));
    return status;
  }
  return text;
}

bool IsRaisedByTemplate(const absl::Status& status) {
  return status.GetPayload(jinja::kRaisedPayload).has_value();
}

}  // namespace convoy
