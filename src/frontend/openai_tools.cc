#include "frontend/openai_tools.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxFunctionName = 64;
constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kMistralTag = "[TOOL_CALLS]";

// OpenAI's rule for function names.
bool ValidName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxFunctionName &&
         std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

// The schema of one call of `name` with `parameters`: what a forced answer must be.
Json CallSchema(const std::string& name, const Json& parameters) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", name}}}, {"arguments", parameters}}},
          {"required", {"name", "arguments"}},
          {"additionalProperties", false}};
}

// {"name": string, "arguments" or "parameters": object} as a call.
std::optional<ToolCall> CallOf(const Json& value) {
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string()) {
    return std::nullopt;
  }
  const Json* args = nullptr;
  for (const char* key : {"arguments", "parameters"}) {
    if (value.contains(key)) args = &value[key];
  }
  if (args == nullptr) return ToolCall{value["name"].get<std::string>(), "{}"};
  // Some models write the arguments as a JSON string, as OpenAI's API carries them.
  if (args->is_string()) {
    const Json parsed = Json::parse(args->get<std::string>(), nullptr, false);
    if (!parsed.is_object()) return std::nullopt;
    return ToolCall{value["name"].get<std::string>(), parsed.dump()};
  }
  if (!args->is_object()) return std::nullopt;
  return ToolCall{value["name"].get<std::string>(), args->dump()};
}

Json Parse(absl::string_view text) { return Json::parse(text, nullptr, false); }

// Whether object[key] is the string `want`. Json::value(key, "") would throw when the field holds
// another type; a client's {"type": 2} is a bad field, not an exception.
bool FieldIs(const Json& object, const char* key, absl::string_view want) {
  if (!object.is_object()) return false;
  const auto it = object.find(key);
  return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == want;
}

}  // namespace

std::optional<ToolFieldError> ReadTools(const Json& body, v1::InferRequest* request,
                                        OpenAiToolMode* mode) {
  *mode = OpenAiToolMode::kNone;
  const Json* tools = body.contains("tools") ? &body["tools"] : nullptr;
  const Json* choice = body.contains("tool_choice") ? &body["tool_choice"] : nullptr;
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_boolean() &&
      !body["parallel_tool_calls"].is_null()) {
    return ToolFieldError{"parallel_tool_calls", "expected true or false"};
  }
  const bool no_tools =
      tools == nullptr || tools->is_null() || (tools->is_array() && tools->empty());
  if (no_tools) {
    if (choice != nullptr && !choice->is_null() && *choice != "none" && *choice != "auto") {
      return ToolFieldError{"tool_choice", "a tool choice needs tools"};
    }
    return std::nullopt;
  }
  if (!tools->is_array()) return ToolFieldError{"tools", "expected a list of tools"};
  std::vector<std::pair<std::string, Json>> functions;
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = absl::StrCat("tools[", i, "]");
    if (!FieldIs(tool, "type", "function")) {
      return ToolFieldError{param + ".type", "only tools of type \"function\" are supported"};
    }
    if (!tool.contains("function") || !tool["function"].is_object()) {
      return ToolFieldError{param + ".function", "expected an object"};
    }
    const Json& function = tool["function"];
    const std::string name = function.value("name", Json()).is_string()
                                 ? function["name"].get<std::string>()
                                 : std::string();
    if (!ValidName(name)) {
      return ToolFieldError{param + ".function.name",
                            "expected 1 to 64 letters, digits, underscores or dashes"};
    }
    for (const auto& [other, unused] : functions) {
      if (other == name) {
        return ToolFieldError{param + ".function.name",
                              absl::StrCat("\"", name, "\" is named by an earlier tool too")};
      }
    }
    Json parameters =
        function.value("parameters", Json{{"type", "object"}, {"properties", Json::object()}});
    if (!parameters.is_object()) {
      return ToolFieldError{param + ".function.parameters", "expected a JSON Schema (an object)"};
    }
    functions.emplace_back(name, std::move(parameters));
  }

  std::vector<const std::pair<std::string, Json>*> forced;
  if (choice == nullptr || choice->is_null() || *choice == "auto") {
    *mode = OpenAiToolMode::kAuto;
  } else if (*choice == "none") {
    return std::nullopt;  // not shown to the model: the answer is text
  } else if (*choice == "required") {
    *mode = OpenAiToolMode::kForced;
    for (const auto& f : functions) forced.push_back(&f);
  } else if (FieldIs(*choice, "type", "function") && choice->contains("function") &&
             (*choice)["function"].is_object() &&
             (*choice)["function"].value("name", Json()).is_string()) {
    const std::string name = (*choice)["function"]["name"].get<std::string>();
    for (const auto& f : functions) {
      if (f.first == name) forced.push_back(&f);
    }
    if (forced.empty()) {
      return ToolFieldError{"tool_choice.function.name",
                            absl::StrCat("\"", name, "\" is not one of the tools")};
    }
    *mode = OpenAiToolMode::kForced;
  } else {
    return ToolFieldError{"tool_choice",
                          "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                          "\"function\": {\"name\": ...}}"};
  }
  request->set_tools_json(tools->dump());
  if (*mode == OpenAiToolMode::kForced) {
    if (request->has_constraint()) {
      return ToolFieldError{"tool_choice",
                            "a required tool call cannot be combined with response_format"};
    }
    Json schema;
    if (forced.size() == 1) {
      schema = CallSchema(forced[0]->first, forced[0]->second);
    } else {
      schema = {{"anyOf", Json::array()}};
      for (const auto* f : forced) schema["anyOf"].push_back(CallSchema(f->first, f->second));
    }
    request->mutable_constraint()->set_json_schema(schema.dump());
  }
  return std::nullopt;
}

std::optional<ToolFieldError> MessageToolFields(const Json& message, const std::string& param,
                                                std::string* extra_json) {
  Json extra = Json::object();
  if (message.contains("tool_calls") && !message["tool_calls"].is_null()) {
    const Json& calls = message["tool_calls"];
    if (!calls.is_array()) return ToolFieldError{param + ".tool_calls", "expected a list"};
    Json out = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string call_param = absl::StrCat(param, ".tool_calls[", i, "]");
      const Json& call = calls[i];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].value("name", Json()).is_string()) {
        return ToolFieldError{call_param,
                              "expected {\"id\", \"type\": \"function\", "
                              "\"function\": {\"name\", \"arguments\"}}"};
      }
      const Json& function = call["function"];
      Json arguments = Json::object();
      if (function.contains("arguments")) {
        const Json& given = function["arguments"];
        arguments = given.is_string() ? Parse(given.get<std::string>()) : given;
        if (!arguments.is_object()) {
          return ToolFieldError{call_param + ".function.arguments",
                                "expected a JSON object (as a string)"};
        }
      }
      // A missing or null id is empty; Json::value would throw on null as on a number.
      const Json id = call.value("id", Json());
      if (!id.is_null() && !id.is_string()) {
        return ToolFieldError{call_param + ".id", "expected a string"};
      }
      out.push_back({{"id", id.is_string() ? id : Json("")},
                     {"type", "function"},
                     {"function", {{"name", function["name"]}, {"arguments", arguments}}}});
    }
    extra["tool_calls"] = std::move(out);
  }
  for (const char* key : {"tool_call_id", "name"}) {
    if (!message.contains(key) || message[key].is_null()) continue;
    if (!message[key].is_string()) return ToolFieldError{param + "." + key, "expected a string"};
    extra[key] = message[key];
  }
  *extra_json = extra.empty() ? "" : extra.dump();
  return std::nullopt;
}

std::optional<ToolOutput> ParseToolOutput(absl::string_view text, OpenAiToolMode mode) {
  if (mode == OpenAiToolMode::kNone) return std::nullopt;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  ToolOutput out;
  if (mode == OpenAiToolMode::kForced) {
    std::optional<ToolCall> call = CallOf(Parse(trimmed));
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
    return out;
  }
  // Hermes and Qwen: calls in tags, text around them.
  if (absl::StrContains(trimmed, kHermesOpen)) {
    std::string content;
    absl::string_view rest = trimmed;
    for (size_t open; (open = rest.find(kHermesOpen)) != absl::string_view::npos;) {
      absl::StrAppend(&content, rest.substr(0, open));
      rest.remove_prefix(open + kHermesOpen.size());
      const size_t close = rest.find(kHermesClose);
      std::optional<ToolCall> call = CallOf(Parse(rest.substr(0, close)));
      if (!call) return std::nullopt;
      out.calls.push_back(*std::move(call));
      if (close == absl::string_view::npos) {
        rest = {};
        break;
      }
      rest.remove_prefix(close + kHermesClose.size());
    }
    absl::StrAppend(&content, rest);
    out.content = std::string(absl::StripAsciiWhitespace(content));
    return out;
  }
  // Mistral: a list after a tag.
  if (absl::StartsWith(trimmed, kMistralTag)) {
    const Json list = Parse(trimmed.substr(kMistralTag.size()));
    if (!list.is_array() || list.empty()) return std::nullopt;
    for (const Json& item : list) {
      std::optional<ToolCall> call = CallOf(item);
      if (!call) return std::nullopt;
      out.calls.push_back(*std::move(call));
    }
    return out;
  }
  // Llama 3.1/3.2: the answer is one JSON object.
  if (absl::StartsWith(trimmed, "{")) {
    std::optional<ToolCall> call = CallOf(Parse(trimmed));
    if (!call) return std::nullopt;
    out.calls.push_back(*std::move(call));
    return out;
  }
  return std::nullopt;
}

bool MayBeToolCall(absl::string_view text, OpenAiToolMode mode) {
  if (mode == OpenAiToolMode::kForced) return true;
  if (mode == OpenAiToolMode::kNone) return false;
  const absl::string_view head = absl::StripLeadingAsciiWhitespace(text);
  if (head.empty()) return true;
  for (absl::string_view start : {kHermesOpen, kMistralTag, absl::string_view("{")}) {
    // Either may still become the other: "<tool" is a prefix of the tag, the tag a prefix of it.
    const size_t n = std::min(head.size(), start.size());
    if (head.substr(0, n) == start.substr(0, n)) return true;
  }
  return false;
}

Json ToolCallsJson(const std::vector<ToolCall>& calls, const std::string& id_base,
                   bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call = {{"id", absl::StrCat("call_", id_base, "_", i)},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace convoy
