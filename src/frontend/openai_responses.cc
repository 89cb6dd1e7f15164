#include "frontend/openai_responses.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace convoy {
namespace {

using Json = nlohmann::json;

// Taken as the chat API takes them (openai_api.cc checks each): the Responses API's own fields
// that a chat request has under the same name, and convoy's extensions.
constexpr const char* kPassedThrough[] = {
    "model", "temperature", "top_p", "parallel_tool_calls", "store", "metadata", "user",
    "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier",
    // convoy's extensions, as its chat API takes them.
    "seed", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
    "logit_bias", "stop", "priority", "cache_prompt"};

// Read here: translated, checked or refused.
constexpr const char* kRead[] = {"input",
                                 "instructions",
                                 "tools",
                                 "tool_choice",
                                 "text",
                                 "max_output_tokens",
                                 "stream",
                                 "stream_options",
                                 "truncation",
                                 "include",
                                 "max_tool_calls",
                                 "top_logprobs",
                                 "previous_response_id",
                                 "conversation",
                                 "reasoning",
                                 "background",
                                 "prompt"};

bool OneOf(const std::string& key, const auto& names) {
  for (const char* name : names) {
    if (key == name) return true;
  }
  return false;
}

// A message's text: a string, or a list of text parts (input_text, output_text; refusal in an
// assistant's message).
std::optional<std::string> Text(const Json& content, const std::string& param, bool assistant,
                                std::optional<OpenAiError>* error) {
  OpenAiError e;
  std::optional<std::string> text =
      assistant ? OpenAiContentText(
                      content, param,
                      {{"input_text", "text"}, {"output_text", "text"}, {"refusal", "refusal"}}, &e)
                : OpenAiContentText(content, param,
                                    {{"input_text", "text"}, {"output_text", "text"}}, &e);
  if (!text) *error = std::move(e);
  return text;
}

// The input items as chat messages, appended to `messages`.
std::optional<OpenAiError> InputItems(const Json& input, Json* messages) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array() || input.empty()) {
    return OpenAiFieldError("input", "expected a string or a non-empty list of items");
  }
  std::optional<OpenAiError> error;
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string param = absl::StrCat("input[", i, "]");
    if (!item.is_object()) {
      return OpenAiFieldError(param,
                              absl::StrCat("expected an object, got ", OpenAiJsonType(item)));
    }
    const Json type = item.value("type", item.contains("role") ? Json("message") : Json());
    if (type == "message") {
      for (const auto& [key, value] : item.items()) {
        if (key != "type" && key != "role" && key != "content" && key != "id" && key != "status" &&
            key != "phase") {
          return OpenAiFieldError(absl::StrCat(param, ".", key), "unknown field");
        }
      }
      const Json role = item.value("role", Json());
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
        return OpenAiFieldError(param + ".role",
                                "expected \"user\", \"system\", \"developer\" or \"assistant\"");
      }
      std::optional<std::string> text =
          Text(item.value("content", Json()), param + ".content", role == "assistant", &error);
      if (!text) return error;
      messages->push_back(
          {{"role", role == "developer" ? Json("system") : role}, {"content", *std::move(text)}});
    } else if (type == "function_call") {
      for (const char* key : {"call_id", "name", "arguments"}) {
        if (!item.value(key, Json()).is_string()) {
          return OpenAiFieldError(absl::StrCat(param, ".", key), "expected a string");
        }
      }
      Json call = {{"id", item["call_id"]},
                   {"type", "function"},
                   {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      // Calls in a row are one assistant turn (parallel calls), as is text just before them.
      if (messages->empty() || messages->back()["role"] != "assistant") {
        messages->push_back({{"role", "assistant"}, {"content", nullptr}});
      }
      Json& turn = messages->back();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = Json::array();
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      if (!item.value("call_id", Json()).is_string()) {
        return OpenAiFieldError(param + ".call_id", "expected a string");
      }
      std::optional<std::string> output =
          Text(item.value("output", Json()), param + ".output", false, &error);
      if (!output) return error;
      messages->push_back(
          {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", *std::move(output)}});
    } else if (type == "item_reference") {
      return OpenAiFieldError(param, "convoy keeps no items to refer to: send the item itself");
    } else if (type == "reasoning") {
      return OpenAiFieldError(param, "reasoning items are not supported (no model here reasons)");
    } else {
      return OpenAiFieldError(param + ".type",
                              absl::StrCat("items of type ", type.dump(),
                                           " are not supported; only \"message\", "
                                           "\"function_call\" and \"function_call_output\""));
    }
  }
  return std::nullopt;
}

// Flat function tools ({type, name, description, parameters, strict}) as chat tools.
std::optional<OpenAiError> Tools(const Json& tools, Json* chat_tools) {
  if (!tools.is_array()) return OpenAiFieldError("tools", "expected a list of tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string param = absl::StrCat("tools[", i, "]");
    if (!tool.is_object() || tool.value("type", Json()) != "function") {
      return OpenAiFieldError(param + ".type",
                              "only tools of type \"function\" are supported (no built-in tools)");
    }
    Json function;
    for (const auto& [key, value] : tool.items()) {
      if (key == "type") continue;
      if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
        return OpenAiFieldError(absl::StrCat(param, ".", key), "unknown field");
      }
      function[key] = value;
    }
    chat_tools->push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return std::nullopt;
}

// text: {format: {type: text | json_object | json_schema, name, schema, description, strict}}.
std::optional<OpenAiError> TextFormat(const Json& text, Json* chat) {
  if (!text.is_object()) return OpenAiFieldError("text", "expected an object");
  for (const auto& [key, value] : text.items()) {
    if (key != "format") return OpenAiFieldError("text." + key, "unknown field");
  }
  const Json format = text.value("format", Json());
  if (format.is_null()) return std::nullopt;
  if (!format.is_object() || !format.value("type", Json()).is_string()) {
    return OpenAiFieldError("text.format", "expected an object with a \"type\"");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    if (format.size() > 1) return OpenAiFieldError("text.format", "json_object takes no fields");
    (*chat)["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (type != "json_schema") {
    return OpenAiFieldError("text.format.type",
                            absl::StrCat("expected \"text\", \"json_object\" or \"json_schema\", "
                                         "got \"",
                                         type, "\""));
  }
  Json spec = Json::object();
  for (const auto& [key, value] : format.items()) {
    if (key == "type") continue;
    if (key != "name" && key != "schema" && key != "description" && key != "strict") {
      return OpenAiFieldError("text.format." + key, "unknown field");
    }
    spec[key] = value;
  }
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  return std::nullopt;
}

// Responses' tool_choice: "auto", "none", "required" or {type: function, name}.
std::optional<OpenAiError> ToolChoice(const Json& choice, Json* chat) {
  if (choice.is_string()) {
    (*chat)["tool_choice"] = choice;
    return std::nullopt;
  }
  if (choice.is_object() && choice.value("type", Json()) == "function" &&
      choice.value("name", Json()).is_string()) {
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
    return std::nullopt;
  }
  return OpenAiFieldError("tool_choice",
                          "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                          "\"name\": ...}");
}

std::string Suffix(const std::string& id) {
  const size_t underscore = id.find('_');
  return underscore == std::string::npos ? id : id.substr(underscore + 1);
}

Json Usage(const Json& chat_usage) {
  const int64_t input = chat_usage.value("prompt_tokens", int64_t{0});
  const int64_t output = chat_usage.value("completion_tokens", int64_t{0});
  const int64_t cached =
      chat_usage.value("prompt_tokens_details", Json::object()).value("cached_tokens", int64_t{0});
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input + output}};
}

// `logprobs`: the tokens' entries, as the chat API's logprobs.content holds them.
Json MessageItem(const std::string& response_id, const std::string& text, const char* status,
                 Json logprobs = Json::array()) {
  return {{"type", "message"},
          {"id", absl::StrCat("msg_", Suffix(response_id))},
          {"status", status},
          {"role", "assistant"},
          {"content", Json::array({{{"type", "output_text"},
                                    {"text", text},
                                    {"annotations", Json::array()},
                                    {"logprobs", std::move(logprobs)}}})}};
}

// A chat choice's (or chunk's) token log-probabilities, or none.
Json ChatLogprobs(const Json& choice) {
  const Json logprobs = choice.value("logprobs", Json());
  return logprobs.is_object() ? logprobs.value("content", Json::array()) : Json::array();
}

Json FunctionCallItem(const Json& chat_call) {
  const std::string call_id = chat_call.value("id", "");
  return {{"type", "function_call"},
          {"id", absl::StrCat("fc_", Suffix(call_id))},
          {"call_id", call_id},
          {"name", chat_call["function"]["name"]},
          {"arguments", chat_call["function"]["arguments"]},
          {"status", "completed"}};
}

// The Response object around `output`.
Json ResponseObject(const std::string& id, int64_t created, const std::string& model,
                    const Json& echo, const char* status, const std::string& finish_reason,
                    Json output, const Json& usage) {
  Json response = {{"id", id},
                   {"object", "response"},
                   {"created_at", created},
                   {"status", status},
                   {"error", nullptr},
                   {"incomplete_details", nullptr},
                   {"model", model},
                   {"output", std::move(output)},
                   {"usage", usage},
                   {"store", false},
                   {"truncation", "disabled"}};
  if (finish_reason == "length") {
    response["incomplete_details"] = {{"reason", "max_output_tokens"}};
  }
  for (const auto& [key, value] : echo.items()) response[key] = value;
  return response;
}

}  // namespace

std::optional<OpenAiError> ResponsesToChat(const Json& body, Json* chat, Json* echo) {
  *chat = Json::object();
  *echo = {{"instructions", nullptr},
           {"max_output_tokens", nullptr},
           {"metadata", Json::object()},
           {"parallel_tool_calls", true},
           {"temperature", nullptr},
           {"top_p", nullptr},
           {"tool_choice", "auto"},
           {"tools", Json::array()},
           {"text", {{"format", {{"type", "text"}}}}},
           {"user", nullptr}};
  for (const auto& [key, value] : body.items()) {
    if (!OneOf(key, kPassedThrough) && !OneOf(key, kRead)) {
      return OpenAiFieldError(key, "unknown field (not part of this API, or not supported)");
    }
    if (value.is_null()) continue;
    if (OneOf(key, kPassedThrough)) (*chat)[key] = value;
    if (echo->contains(key)) (*echo)[key] = value;
  }
  auto given = [&body](const char* name) -> const Json* {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  // What needs a response or conversation stored, or a model or tool convoy has not.
  if (given("previous_response_id") != nullptr || given("conversation") != nullptr) {
    return OpenAiFieldError(
        given("conversation") != nullptr ? "conversation" : "previous_response_id",
        "convoy keeps no responses or conversations: send the whole "
        "conversation as input");
  }
  if (given("reasoning") != nullptr) {
    return OpenAiFieldError("reasoning", "reasoning is not supported (no model here reasons)");
  }
  if (const Json* background = given("background"); background != nullptr && *background != false) {
    return OpenAiFieldError("background", "background responses are not supported");
  }
  if (given("prompt") != nullptr) {
    return OpenAiFieldError("prompt", "stored prompts are not supported: send input");
  }
  // Log-probabilities: asked for by include (message.output_text.logprobs) or by top_logprobs
  // (the alternatives per token, 0 to 20, checked as the chat API checks its own).
  if (const Json* top = given("top_logprobs"); top != nullptr) {
    (*chat)["top_logprobs"] = *top;
    if (*top != 0) (*chat)["logprobs"] = true;
  }
  if (const Json* truncation = given("truncation");
      truncation != nullptr && *truncation != "disabled" && *truncation != "auto") {
    return OpenAiFieldError("truncation", "expected \"disabled\" or \"auto\"");
  }
  if (const Json* include = given("include"); include != nullptr) {
    if (!include->is_array()) return OpenAiFieldError("include", "expected a list");
    for (size_t i = 0; i < include->size(); ++i) {
      if ((*include)[i] == "message.output_text.logprobs") {
        (*chat)["logprobs"] = true;
        continue;
      }
      // No reasoning items are made, so there is no encrypted reasoning to include.
      if ((*include)[i] != "reasoning.encrypted_content") {
        return OpenAiFieldError(absl::StrCat("include[", i, "]"),
                                absl::StrCat((*include)[i].dump(), " is not supported"));
      }
    }
  }
  if (const Json* max_calls = given("max_tool_calls");
      max_calls != nullptr && !max_calls->is_number_integer()) {
    return OpenAiFieldError("max_tool_calls", "expected an integer");
  }

  Json messages = Json::array();
  if (const Json* instructions = given("instructions"); instructions != nullptr) {
    if (!instructions->is_string()) return OpenAiFieldError("instructions", "expected a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const Json* input = given("input");
  if (input == nullptr) return OpenAiFieldError("input", "required");
  if (std::optional<OpenAiError> error = InputItems(*input, &messages)) return error;
  (*chat)["messages"] = std::move(messages);

  if (const Json* tools = given("tools"); tools != nullptr) {
    Json chat_tools = Json::array();
    if (std::optional<OpenAiError> error = Tools(*tools, &chat_tools)) return error;
    (*chat)["tools"] = std::move(chat_tools);
  }
  if (const Json* choice = given("tool_choice"); choice != nullptr) {
    if (std::optional<OpenAiError> error = ToolChoice(*choice, chat)) return error;
  }
  if (const Json* text = given("text"); text != nullptr) {
    if (std::optional<OpenAiError> error = TextFormat(*text, chat)) return error;
  }
  if (const Json* max = given("max_output_tokens"); max != nullptr) {
    (*chat)["max_completion_tokens"] = *max;
  }
  if (const Json* stream = given("stream"); stream != nullptr) {
    (*chat)["stream"] = *stream;
    // The usage comes in the response.completed event: the chat stream must end with it.
    if (*stream == true) (*chat)["stream_options"] = {{"include_usage", true}};
  }
  if (const Json* options = given("stream_options"); options != nullptr) {
    if (!options->is_object()) return OpenAiFieldError("stream_options", "expected an object");
    for (const auto& [key, value] : options->items()) {
      // Obfuscation pads events against length side channels: nothing here to pad.
      if (key != "include_obfuscation" || !value.is_boolean()) {
        return OpenAiFieldError("stream_options." + key, key == "include_obfuscation"
                                                             ? "expected true or false"
                                                             : "unknown field");
      }
    }
  }
  return std::nullopt;
}

OpenAiError ResponsesError(OpenAiError error) {
  std::string param = error.param;
  absl::string_view rest = param;
  if (absl::ConsumePrefix(&rest, "messages")) {
    param = "input";
  } else if (param == "max_completion_tokens" || param == "max_tokens") {
    param = "max_output_tokens";
  } else if (absl::ConsumePrefix(&rest, "response_format")) {
    absl::ConsumePrefix(&rest, ".json_schema");
    param = absl::StrCat("text.format", rest);
  } else if (absl::StartsWith(param, "tools[") || absl::StartsWith(param, "tool_choice")) {
    param = absl::StrReplaceAll(param, {{".function.", "."}});
  }
  if (param != error.param) {
    absl::string_view message = error.message;
    if (absl::ConsumePrefix(&message, error.param)) error.message = absl::StrCat(param, message);
    error.param = param;
  }
  return error;
}

Json ResponseFromChat(const std::string& id, int64_t created, const std::string& model,
                      const Json& echo, const Json& choice, const Json& usage) {
  const std::string finish = choice.value("finish_reason", "");
  const char* status = finish == "length" ? "incomplete" : "completed";
  Json output = Json::array();
  const Json message = choice.value("message", Json::object());
  if (const Json content = message.value("content", Json());
      content.is_string() && !content.get_ref<const std::string&>().empty()) {
    output.push_back(MessageItem(id, content.get<std::string>(), status, ChatLogprobs(choice)));
  }
  for (const Json& call : message.value("tool_calls", Json::array())) {
    output.push_back(FunctionCallItem(call));
  }
  return ResponseObject(id, created, model, echo, status, finish, std::move(output), Usage(usage));
}

ResponsesStream::ResponsesStream(std::string id, int64_t created, std::string model, Json echo)
    : id_(std::move(id)), created_(created), model_(std::move(model)), echo_(std::move(echo)) {}

std::string ResponsesStream::Emit(const char* type, Json event) {
  event["type"] = type;
  event["sequence_number"] = sequence_++;
  return absl::StrCat("event: ", type,
                      "\ndata: ", event.dump(-1, ' ', false, Json::error_handler_t::replace),
                      "\n\n");
}

Json ResponsesStream::Response(const char* status, const Json& usage) const {
  return ResponseObject(id_, created_, model_, echo_, status, finish_reason_, output_, usage);
}

std::string ResponsesStream::CloseMessage() {
  if (!message_open_) return "";
  message_open_ = false;
  const int64_t index = static_cast<int64_t>(output_.size());
  const char* status = finish_reason_ == "length" ? "incomplete" : "completed";
  Json item = MessageItem(id_, text_, status, logprobs_);
  const std::string item_id = item["id"];
  std::string events;
  events += Emit("response.output_text.done", {{"item_id", item_id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", text_},
                                               {"logprobs", logprobs_}});
  events += Emit("response.content_part.done", {{"item_id", item_id},
                                                {"output_index", index},
                                                {"content_index", 0},
                                                {"part", item["content"][0]}});
  events += Emit("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  text_.clear();
  logprobs_ = Json::array();
  return events;
}

std::string ResponsesStream::Translate(const Json& chunk) {
  std::string events;
  const Json choices = chunk.value("choices", Json::array());
  if (choices.empty()) {
    // The usage chunk, the stream's last: the response is done.
    const bool cut = finish_reason_ == "length";
    const Json usage = Usage(chunk.value("usage", Json::object()));
    return Emit(cut ? "response.incomplete" : "response.completed",
                {{"response", Response(cut ? "incomplete" : "completed", usage)}});
  }
  const Json& choice = choices[0];
  const Json delta = choice.value("delta", Json::object());
  if (delta.contains("role")) {
    events += Emit("response.created", {{"response", Response("in_progress", nullptr)}});
    events += Emit("response.in_progress", {{"response", Response("in_progress", nullptr)}});
  }
  if (const Json content = delta.value("content", Json());
      content.is_string() && !content.get_ref<const std::string&>().empty()) {
    const int64_t index = static_cast<int64_t>(output_.size());
    const std::string item_id = absl::StrCat("msg_", Suffix(id_));
    if (!message_open_) {
      message_open_ = true;
      Json item = MessageItem(id_, "", "in_progress");
      item["content"] = Json::array();
      events += Emit("response.output_item.added", {{"output_index", index}, {"item", item}});
      events += Emit("response.content_part.added",
                     {{"item_id", item_id},
                      {"output_index", index},
                      {"content_index", 0},
                      {"part", MessageItem(id_, "", "in_progress")["content"][0]}});
    }
    text_ += content.get<std::string>();
    const Json logprobs = ChatLogprobs(choice);
    for (const Json& entry : logprobs) logprobs_.push_back(entry);
    events += Emit("response.output_text.delta", {{"item_id", item_id},
                                                  {"output_index", index},
                                                  {"content_index", 0},
                                                  {"delta", content},
                                                  {"logprobs", logprobs}});
  }
  if (const Json calls = delta.value("tool_calls", Json()); calls.is_array()) {
    events += CloseMessage();
    for (const Json& call : calls) {
      Json item = FunctionCallItem(call);
      const int64_t index = static_cast<int64_t>(output_.size());
      const std::string item_id = item["id"];
      Json added = item;
      added["arguments"] = "";
      added["status"] = "in_progress";
      events += Emit("response.output_item.added", {{"output_index", index}, {"item", added}});
      events += Emit("response.function_call_arguments.delta",
                     {{"item_id", item_id}, {"output_index", index}, {"delta", item["arguments"]}});
      events += Emit("response.function_call_arguments.done", {{"item_id", item_id},
                                                               {"output_index", index},
                                                               {"name", item["name"]},
                                                               {"arguments", item["arguments"]}});
      events += Emit("response.output_item.done", {{"output_index", index}, {"item", item}});
      output_.push_back(std::move(item));
    }
  }
  if (const Json finish = choice.value("finish_reason", Json()); finish.is_string()) {
    finish_reason_ = finish.get<std::string>();
    events += CloseMessage();
  }
  return events;
}

std::string ResponsesStream::Error(const OpenAiError& error) {
  const OpenAiError named = ResponsesError(error);
  return Emit("error", {{"code", named.code.empty() ? Json(named.type) : Json(named.code)},
                        {"message", named.message},
                        {"param", named.param.empty() ? Json() : Json(named.param)}});
}

}  // namespace convoy
