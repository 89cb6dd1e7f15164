#include "frontend/openai_api.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "frontend/openai_responses.h"
#include "frontend/status_mapping.h"
#include "nlohmann/json.hpp"
#include "step/step.h"

namespace convoy {
namespace {

using Json = nlohmann::json;

constexpr int kClientClosedRequest = 499;  // nginx's status for a client that went away

OpenAiError BadField(const std::string& param, const std::string& message) {
  return OpenAiFieldError(param, message);
}

// Reads one request's fields; the first error wins.
class FieldReader {
 public:
  explicit FieldReader(const Json& body) : body_(body) {}

  const Json* Find(const char* name) const {
    auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  bool ok() const { return !error_; }
  OpenAiError error() const { return *error_; }
  void Fail(const std::string& param, const std::string& message) {
    if (!error_) error_ = BadField(param, message);
  }

  // An integer field in [min, max]: an integer, or a number without a fraction (1e3, 5.0).
  std::optional<int64_t> Int(const char* name, int64_t min, int64_t max) {
    std::optional<long double> x = Integer(name, min, max);
    if (!x) return std::nullopt;
    return static_cast<int64_t>(*x);
  }
  // A 64-bit seed: any signed (OpenAI's API declares the field int64) or unsigned 64-bit
  // integer, a negative one taken as its two's complement (-1 is 2^64 - 1).
  std::optional<uint64_t> Seed(const char* name) {
    std::optional<long double> x =
        Integer(name, std::numeric_limits<int64_t>::min(), std::numeric_limits<uint64_t>::max());
    if (!x) return std::nullopt;
    if (*x < 0) return static_cast<uint64_t>(static_cast<int64_t>(*x));
    return static_cast<uint64_t>(*x);
  }
  std::optional<double> Number(const char* name) {
    const Json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(name, absl::StrCat("expected a number, got ", OpenAiJsonType(*v)));
      return std::nullopt;
    }
    return v->get<double>();
  }
  std::optional<bool> Bool(const char* name) {
    const Json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      Fail(name, absl::StrCat("expected true or false, got ", OpenAiJsonType(*v)));
      return std::nullopt;
    }
    return v->get<bool>();
  }

 private:
  // Every int64 and uint64 is exact in it, and so is every double.
  static_assert(std::numeric_limits<long double>::digits >= 64);

  // The value of field `name` when it is an integer in [min, max]; nullopt when it is absent, or,
  // with the error naming the field and the fault (not a number, a fraction, out of range), when
  // it is no such integer.
  std::optional<long double> Integer(const char* name, long double min, long double max) {
    const Json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(name, absl::StrCat("expected an integer, got ", OpenAiJsonType(*v)));
      return std::nullopt;
    }
    long double x = 0;
    if (v->is_number_unsigned()) {
      x = static_cast<long double>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      x = static_cast<long double>(v->get<int64_t>());
    } else {
      const double d = v->get<double>();
      if (std::isfinite(d) && std::trunc(d) != d) {
        Fail(name,
             absl::StrCat("expected an integer, got ", v->dump(), ", a number with a fraction"));
        return std::nullopt;
      }
      x = d;
    }
    if (!(x >= min && x <= max)) {  // also a non-finite number
      Fail(name, absl::StrCat("out of range: must be in [", RangeEnd(min), ", ", RangeEnd(max),
                              "], got ", v->dump()));
      return std::nullopt;
    }
    return x;
  }
  static std::string RangeEnd(long double x) {
    return x < 0 ? absl::StrCat(static_cast<int64_t>(x)) : absl::StrCat(static_cast<uint64_t>(x));
  }

  const Json& body_;
  std::optional<OpenAiError> error_;
};

// The fields each endpoint knows: supported ones and those refused by name.
bool KnownField(OpenAiEndpoint endpoint, const std::string& name) {
  static const char* const kCommon[] = {"model",
                                        "max_tokens",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "seed",
                                        "stop",
                                        "n",
                                        "stream",
                                        "stream_options",
                                        "logprobs",
                                        "user",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "repetition_penalty",
                                        "min_p",
                                        "logit_bias",
                                        "priority",
                                        "cache_prompt"};
  static const char* const kChat[] = {
      "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "functions",
      "function_call", "parallel_tool_calls", "response_format",
      // Taken and not used (ReadUnusedChatFields).
      "store", "metadata", "service_tier", "prompt_cache_key", "prompt_cache_retention",
      "prompt_cache_options", "safety_identifier", "prediction", "modalities",
      // Refused by name (RefuseUnsupported).
      "audio", "web_search_options", "moderation"};
  static const char* const kCompletion[] = {"prompt", "echo", "suffix", "best_of"};
  for (const char* f : kCommon) {
    if (name == f) return true;
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    for (const char* f : kChat) {
      if (name == f) return true;
    }
  } else {
    for (const char* f : kCompletion) {
      if (name == f) return true;
    }
  }
  return false;
}

// logit_bias: an object from token ids (as decimal strings, OpenAI's form) to numbers. The ids'
// vocabulary and the biases' range are checked with every protocol's (PrepareRequest).
void ReadLogitBias(FieldReader& fields, v1::SamplingParameters* sampling) {
  const Json* bias = fields.Find("logit_bias");
  if (bias == nullptr) return;
  if (!bias->is_object()) {
    fields.Fail("logit_bias", absl::StrCat("expected an object from token ids to numbers, got ",
                                           OpenAiJsonType(*bias)));
    return;
  }
  for (const auto& [key, value] : bias->items()) {
    int32_t token = 0;
    if (!absl::SimpleAtoi(key, &token) || key.empty() || !absl::ascii_isdigit(key[0])) {
      fields.Fail("logit_bias",
                  absl::StrCat("keys are token ids, got \"", key.substr(0, 32), "\""));
      return;
    }
    if (!value.is_number()) {
      fields.Fail(absl::StrCat("logit_bias.", key),
                  absl::StrCat("expected a number, got ", OpenAiJsonType(value)));
      return;
    }
    (*sampling->mutable_logit_bias())[token] = static_cast<float>(value.get<double>());
  }
}

// Fields convoy knows but does not do: refused unless they ask for the default.
void RefuseUnsupported(FieldReader& fields, OpenAiEndpoint endpoint) {
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    if (fields.Find("audio") != nullptr) {
      fields.Fail("audio", "audio output is not supported (the answer is text)");
    }
    if (fields.Find("web_search_options") != nullptr) {
      fields.Fail("web_search_options", "web search is not supported");
    }
    // A client that asks for moderation must not get an answer that had none.
    if (fields.Find("moderation") != nullptr) {
      fields.Fail("moderation", "moderation is not supported: convoy runs none");
    }
    // The deprecated form of tools.
    if (const Json* f = fields.Find("functions"); f != nullptr && !f->empty()) {
      fields.Fail("functions", "the deprecated functions API is not supported; send tools");
    }
    if (const Json* c = fields.Find("function_call");
        c != nullptr && *c != "none" && *c != "auto") {
      fields.Fail("function_call", "the deprecated functions API is not supported; send tools");
    }
  } else {
    if (const Json* suffix = fields.Find("suffix"); suffix != nullptr) {
      fields.Fail("suffix", "suffix (insertion) is not supported");
    }
    if (std::optional<int64_t> best_of = fields.Int("best_of", 1, 128); best_of && *best_of != 1) {
      fields.Fail("best_of", "only best_of: 1 is supported");
    }
  }
}

// A message's content: a string, or a list of text parts (and, in an assistant's message, refusal
// parts); null is empty.
std::optional<std::string> MessageContent(const Json& content, const std::string& param,
                                          FieldReader& fields, bool allow_refusal = false) {
  if (content.is_null()) return std::string();
  OpenAiError error;
  std::optional<std::string> text =
      allow_refusal
          ? OpenAiContentText(content, param, {{"text", "text"}, {"refusal", "refusal"}}, &error)
          : OpenAiContentText(content, param, {{"text", "text"}}, &error);
  if (!text) fields.Fail(error.param, error.message.substr(error.param.size() + 2));
  return text;
}

// Chat fields that OpenAI's clients send and that change nothing in the answer a self-hosted
// server gives: checked for their type (a malformed one is still a 400) and not used.
// - store: convoy keeps no completion (there is no GET /v1/chat/completions/{id});
// - metadata: up to 16 string pairs, keys up to 64 characters and values up to 512 (OpenAI's
//   limits), the labels of a stored completion;
// - service_tier: OpenAI's processing tiers (convoy's own levels are `priority`);
// - prompt_cache_key, prompt_cache_retention, prompt_cache_options: hints to OpenAI's prompt
//   cache (convoy's prefix cache needs none; cache_prompt: false keeps a prompt out of it);
// - safety_identifier: names an end user, as `user` does;
// - prediction: text expected in the answer, a hint for speed that never changes the answer.
// modalities may ask for text only.
void ReadUnusedChatFields(FieldReader& fields) {
  fields.Bool("store");
  for (const char* name :
       {"service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier"}) {
    if (const Json* v = fields.Find(name); v != nullptr && !v->is_string()) {
      fields.Fail(name, absl::StrCat("expected a string, got ", OpenAiJsonType(*v)));
    }
  }
  if (const Json* options = fields.Find("prompt_cache_options");
      options != nullptr && !options->is_object()) {
    fields.Fail("prompt_cache_options",
                absl::StrCat("expected an object, got ", OpenAiJsonType(*options)));
  }
  if (const Json* metadata = fields.Find("metadata"); metadata != nullptr) {
    if (!metadata->is_object()) {
      fields.Fail("metadata",
                  absl::StrCat("expected an object of strings, got ", OpenAiJsonType(*metadata)));
    } else if (metadata->size() > 16) {
      fields.Fail("metadata", absl::StrCat("at most 16 pairs, got ", metadata->size()));
    } else {
      for (const auto& [key, value] : metadata->items()) {
        const std::string param = absl::StrCat("metadata.", key.substr(0, 64));
        if (key.size() > 64) {
          fields.Fail(param, absl::StrCat("a key has at most 64 characters, got ", key.size()));
        } else if (!value.is_string()) {
          fields.Fail(param, absl::StrCat("expected a string, got ", OpenAiJsonType(value)));
        } else if (value.get_ref<const std::string&>().size() > 512) {
          fields.Fail(param, absl::StrCat("a value has at most 512 characters, got ",
                                          value.get_ref<const std::string&>().size()));
        }
      }
    }
  }
  if (const Json* prediction = fields.Find("prediction"); prediction != nullptr) {
    if (!prediction->is_object() || prediction->value("type", Json()) != "content" ||
        !prediction->contains("content")) {
      fields.Fail("prediction", "expected {\"type\": \"content\", \"content\": ...}");
    } else {
      MessageContent((*prediction)["content"], "prediction.content", fields);
    }
  }
  if (const Json* modalities = fields.Find("modalities"); modalities != nullptr) {
    if (!modalities->is_array()) {
      fields.Fail("modalities", absl::StrCat("expected a list, got ", OpenAiJsonType(*modalities)));
    } else {
      for (size_t i = 0; i < modalities->size(); ++i) {
        if ((*modalities)[i] != "text") {
          fields.Fail(absl::StrCat("modalities[", i, "]"),
                      absl::StrCat("only \"text\" is supported, got ", (*modalities)[i].dump()));
          break;
        }
      }
    }
  }
}

void ReadMessages(FieldReader& fields, v1::InferRequest* request) {
  const Json* messages = fields.Find("messages");
  if (messages == nullptr) {
    fields.Fail("messages", "required");
    return;
  }
  if (!messages->is_array() || messages->empty()) {
    fields.Fail("messages", "expected a non-empty list of messages");
    return;
  }
  for (size_t i = 0; i < messages->size() && fields.ok(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) {
      fields.Fail(param, absl::StrCat("expected an object, got ", OpenAiJsonType(m)));
      return;
    }
    const bool assistant = m.value("role", Json()) == "assistant";
    for (const auto& [key, value] : m.items()) {
      const bool assistants =
          key == "refusal" || key == "audio" || key == "function_call" || key == "annotations";
      if (key != "role" && key != "content" && key != "name" && key != "tool_calls" &&
          key != "tool_call_id" && !(assistants && assistant)) {
        fields.Fail(absl::StrCat(param, ".", key), "unknown field");
        return;
      }
    }
    // An assistant's turn as OpenAI's answers hold it, sent back in the history (the SDK's
    // message object, or its model_dump()): its refusal (text, when the answer was one), null
    // audio and function_call, and its annotations (a web search's citations; not used).
    const Json refusal = m.value("refusal", Json());
    if (!refusal.is_null() && !refusal.is_string()) {
      fields.Fail(param + ".refusal",
                  absl::StrCat("expected a string, got ", OpenAiJsonType(refusal)));
      return;
    }
    if (!m.value("audio", Json()).is_null()) {
      fields.Fail(param + ".audio", "audio is not supported (the answers are text)");
      return;
    }
    if (const Json notes = m.value("annotations", Json()); !notes.is_null() && !notes.is_array()) {
      fields.Fail(param + ".annotations",
                  absl::StrCat("expected a list, got ", OpenAiJsonType(notes)));
      return;
    }
    if (!m.value("function_call", Json()).is_null()) {
      fields.Fail(param + ".function_call",
                  "the deprecated functions API is not supported; send tool_calls");
      return;
    }
    std::string extra_json;
    if (std::optional<ToolFieldError> e = MessageToolFields(m, param, &extra_json)) {
      fields.Fail(e->param, e->message);
      return;
    }
    if (!m.contains("role") || !m["role"].is_string()) {
      fields.Fail(param + ".role", "expected a string");
      return;
    }
    std::optional<std::string> content =
        MessageContent(m.value("content", Json()), param + ".content", fields, assistant);
    if (!content) return;
    if (content->empty() && refusal.is_string()) content = refusal.get<std::string>();
    v1::ChatMessage* out = request->add_messages();
    // OpenAI's newer name for the system role.
    const std::string role = m["role"].get<std::string>();
    out->set_role(role == "developer" ? "system" : role);
    out->set_content(*std::move(content));
    out->set_extra_json(std::move(extra_json));
  }
}

// response_format: "text" (no constraint), "json_object" (any JSON object) or "json_schema" (a
// schema under json_schema.schema; its name, description and strict are taken: convoy always
// holds the output to the schema, as strict asks).
void ReadResponseFormat(FieldReader& fields, v1::InferRequest* request) {
  const Json* format = fields.Find("response_format");
  if (format == nullptr || format->is_null()) return;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    fields.Fail("response_format", "expected an object with a \"type\"");
    return;
  }
  const std::string type = (*format)["type"].get<std::string>();
  for (const auto& [key, value] : format->items()) {
    if (key != "type" && !(key == "json_schema" && type == "json_schema")) {
      fields.Fail(absl::StrCat("response_format.", key), "unknown field");
      return;
    }
  }
  if (type == "text") return;
  if (type == "json_object") {
    request->mutable_constraint()->set_json_object(true);
    return;
  }
  if (type != "json_schema") {
    fields.Fail(
        "response_format.type",
        absl::StrCat("expected \"text\", \"json_object\" or \"json_schema\", got \"", type, "\""));
    return;
  }
  const Json* spec = format->contains("json_schema") ? &(*format)["json_schema"] : nullptr;
  if (spec == nullptr || !spec->is_object()) {
    fields.Fail("response_format.json_schema", "expected an object with a \"schema\"");
    return;
  }
  for (const auto& [key, value] : spec->items()) {
    if (key != "name" && key != "description" && key != "schema" && key != "strict") {
      fields.Fail(absl::StrCat("response_format.json_schema.", key), "unknown field");
      return;
    }
  }
  if (!spec->contains("schema")) {
    // OpenAI allows leaving it out: then any JSON object.
    request->mutable_constraint()->set_json_object(true);
    return;
  }
  const Json& schema = (*spec)["schema"];
  if (!schema.is_object() && !schema.is_boolean()) {
    fields.Fail("response_format.json_schema.schema", "expected a JSON Schema (an object)");
    return;
  }
  request->mutable_constraint()->set_json_schema(schema.dump());
}

void ReadPrompt(FieldReader& fields, v1::InferRequest* request) {
  const Json* prompt = fields.Find("prompt");
  if (prompt == nullptr) {
    fields.Fail("prompt", "required");
    return;
  }
  const Json* one = prompt;
  // A list holding one prompt (a string or a list of ids) is one prompt; a longer list is a
  // batch.
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1) {
      fields.Fail("prompt", "only one prompt per request is supported");
      return;
    }
    one = &(*prompt)[0];
  }
  if (one->is_string()) {
    if (one->get_ref<const std::string&>().empty()) {
      fields.Fail("prompt", "the prompt is empty");
      return;
    }
    request->set_prompt_text(one->get<std::string>());
    return;
  }
  if (one->is_array()) {
    if (one->empty()) {
      fields.Fail("prompt", "the prompt is empty");
      return;
    }
    for (size_t i = 0; i < one->size(); ++i) {
      const Json& id = (*one)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        fields.Fail(absl::StrCat("prompt[", i, "]"), "expected a token id");
        return;
      }
      request->add_prompt_token_ids(id.get<int32_t>());
    }
    return;
  }
  fields.Fail("prompt",
              absl::StrCat("expected a string or a list of token ids, got ", OpenAiJsonType(*one)));
}

void ReadStop(FieldReader& fields, v1::SamplingParameters* sampling) {
  const Json* stop = fields.Find("stop");
  if (stop == nullptr) return;
  if (stop->is_string()) {
    sampling->add_stop(stop->get<std::string>());
    return;
  }
  if (!stop->is_array()) {
    fields.Fail("stop", absl::StrCat("expected a string or a list of strings, got ",
                                     OpenAiJsonType(*stop)));
    return;
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string()) {
      fields.Fail(absl::StrCat("stop[", i, "]"), "expected a string");
      return;
    }
    sampling->add_stop((*stop)[i].get<std::string>());
  }
}

// OpenAI's name for a field of the shared request path.
std::string OpenAiParam(absl::string_view field, OpenAiEndpoint endpoint) {
  const bool chat = ChatLike(endpoint);
  const bool responses = endpoint == OpenAiEndpoint::kResponses;
  if (absl::ConsumePrefix(&field, "sampling.")) {
    if (absl::StartsWith(field, "stop[") || field == "stop") return "stop";
    if (responses && field == "max_tokens") return "max_output_tokens";
    return std::string(field);
  }
  if (field == "prompt_text" || field == "prompt_token_ids" ||
      absl::StartsWith(field, "prompt_token_ids[")) {
    return responses ? "input" : chat ? "messages" : "prompt";
  }
  if (field == "top_logprobs") return chat ? "top_logprobs" : "logprobs";
  if (field == "constraint" || absl::StartsWith(field, "constraint.")) {
    return responses ? "text.format" : "response_format";
  }
  return std::string(field);
}

Json UsageJson(const SessionEnd& end) {
  return {{"prompt_tokens", end.prompt_tokens},
          {"completion_tokens", end.completion_tokens},
          {"total_tokens", end.prompt_tokens + end.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", end.cached_prompt_tokens}}}};
}

}  // namespace

OpenAiError OpenAiFieldError(const std::string& param, const std::string& message) {
  OpenAiError error;
  error.http_status = 400;
  error.param = param;
  error.message = absl::StrCat(param, ": ", message);
  return error;
}

const char* OpenAiJsonType(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::number_float:
      return "a number with a fraction";
    default:
      return "a number";
  }
}

std::optional<std::string> OpenAiContentText(const Json& content, const std::string& param,
                                             std::initializer_list<OpenAiPartKind> kinds,
                                             OpenAiError* error) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    *error = OpenAiFieldError(
        param, absl::StrCat("expected a string or a list of parts, got ", OpenAiJsonType(content)));
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      *error = OpenAiFieldError(part_param, "expected an object with a \"type\"");
      return std::nullopt;
    }
    const OpenAiPartKind* kind = nullptr;
    for (const OpenAiPartKind& k : kinds) {
      if (part["type"] == k.type) kind = &k;
    }
    if (kind == nullptr) {
      std::string types;
      for (const OpenAiPartKind& k : kinds) {
        absl::StrAppend(&types, types.empty() ? "" : ", ", "\"", k.type, "\"");
      }
      *error =
          OpenAiFieldError(part_param, absl::StrCat("content parts of type ", part["type"].dump(),
                                                    " are not supported; only ", types));
      return std::nullopt;
    }
    if (!part.contains(kind->field) || !part[kind->field].is_string()) {
      *error = OpenAiFieldError(absl::StrCat(part_param, ".", kind->field), "expected a string");
      return std::nullopt;
    }
    text += part[kind->field].get<std::string>();
  }
  return text;
}

std::string OpenAiError::ToJson() const {
  Json error = {{"message", message},
                {"type", type},
                {"param", param.empty() ? Json() : Json(param)},
                {"code", code.empty() ? Json() : Json(code)}};
  return Json({{"error", error}}).dump(-1, ' ', false, Json::error_handler_t::replace);
}

OpenAiError OpenAiErrorFromStatus(const absl::Status& status, OpenAiEndpoint endpoint) {
  OpenAiError error;
  const absl::string_view message = status.message();
  // "field: reason" -> OpenAI's field name.
  const size_t colon = message.find(": ");
  const absl::string_view field =
      colon == absl::string_view::npos ? absl::string_view() : message.substr(0, colon);
  const bool is_field = !field.empty() && field.find(' ') == absl::string_view::npos;
  if (is_field) {
    error.param = OpenAiParam(field, endpoint);
    error.message = absl::StrCat(error.param, message.substr(colon));
  } else {
    error.message = std::string(message);  // NOLINT: absl::string_view to std::string
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:  // a feature this server (its executor) lacks
      error.http_status = 400;
      if (error.param == "model") {
        error.http_status = 404;
        error.code = "model_not_found";
      }
      break;
    case absl::StatusCode::kNotFound:
      error.http_status = 404;
      break;
    case absl::StatusCode::kResourceExhausted:
      switch (GetExhaustedCause(status)) {
        case ExhaustedCause::kQueueFull:
          error.http_status = 429;
          error.type = "rate_limit_error";
          error.code = "queue_full";
          break;
        case ExhaustedCause::kClientLimit:
          error.http_status = 429;
          error.type = "rate_limit_error";
          error.code = "max_in_flight_per_client";
          break;
        case ExhaustedCause::kSlowClient:
          error.http_status = 408;
          error.type = "timeout_error";
          error.code = "slow_client";
          break;
      }
      break;
    case absl::StatusCode::kUnavailable:
      error.http_status = 503;
      error.type = "server_error";
      error.code = "unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      error.http_status = 504;
      error.type = "server_error";
      error.code = "timeout";
      break;
    case absl::StatusCode::kCancelled:
      error.http_status = kClientClosedRequest;
      error.code = "cancelled";
      break;
    case absl::StatusCode::kUnauthenticated:
      error.http_status = 401;
      error.code = "invalid_api_key";
      break;
    default:
      error.http_status = 500;
      error.type = "server_error";
      break;
  }
  return error;
}

namespace {

// A chat or completions request's fields.
ParsedOpenAiRequest ParseFields(OpenAiEndpoint endpoint, const Json& json) {
  ParsedOpenAiRequest parsed;
  FieldReader fields(json);
  for (const auto& [key, value] : json.items()) {
    if (!KnownField(endpoint, key)) {
      fields.Fail(key, "unknown field (not part of this API, or not supported)");
      break;
    }
  }
  OpenAiRequest out;
  out.endpoint = endpoint;
  v1::InferRequest& request = out.request;
  v1::SamplingParameters* sampling = request.mutable_sampling();
  const bool chat = ChatLike(endpoint);

  if (const Json* model = fields.Find("model"); model != nullptr) {
    if (!model->is_string()) {
      fields.Fail("model", absl::StrCat("expected a string, got ", OpenAiJsonType(*model)));
    } else {
      request.set_model(model->get<std::string>());
    }
  }
  if (chat) {
    ReadMessages(fields, &request);
    ReadResponseFormat(fields, &request);
    if (fields.ok()) {
      if (std::optional<ToolFieldError> e = ReadTools(json, &request, &out.tool_mode)) {
        fields.Fail(e->param, e->message);
      }
    }
  } else {
    ReadPrompt(fields, &request);
  }
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  std::optional<int64_t> max_tokens = fields.Int("max_tokens", 1, kMaxInt32);
  if (chat) {
    if (std::optional<int64_t> m = fields.Int("max_completion_tokens", 1, kMaxInt32)) {
      max_tokens = m;
    }
  }
  if (max_tokens) sampling->set_max_tokens(static_cast<int32_t>(*max_tokens));
  if (std::optional<double> t = fields.Number("temperature")) {
    if (!(*t >= 0.0 && *t <= 2.0)) {
      fields.Fail("temperature", absl::StrCat("must be in [0, 2], got ", *t));
    }
    sampling->set_temperature(static_cast<float>(*t));
  }
  if (std::optional<double> p = fields.Number("top_p")) {
    sampling->set_top_p(static_cast<float>(*p));
  }
  if (std::optional<int64_t> k = fields.Int("top_k", -1, kMaxInt32)) {
    sampling->set_top_k(*k < 0 ? 0 : static_cast<int32_t>(*k));
  }
  if (std::optional<uint64_t> seed = fields.Seed("seed")) sampling->set_seed(*seed);
  // Their ranges are checked where every protocol's are (PrepareRequest), naming the field.
  if (std::optional<double> p = fields.Number("presence_penalty")) {
    sampling->set_presence_penalty(static_cast<float>(*p));
  }
  if (std::optional<double> p = fields.Number("frequency_penalty")) {
    sampling->set_frequency_penalty(static_cast<float>(*p));
  }
  // Extensions, as vLLM names them.
  if (std::optional<double> p = fields.Number("repetition_penalty")) {
    sampling->set_repetition_penalty(static_cast<float>(*p));
  }
  if (std::optional<double> p = fields.Number("min_p")) {
    sampling->set_min_p(static_cast<float>(*p));
  }
  ReadLogitBias(fields, sampling);
  ReadStop(fields, sampling);
  if (std::optional<int64_t> priority = fields.Int("priority", 0, kMaxInt32)) {
    request.set_priority(static_cast<int32_t>(*priority));
  }
  // An extension (as llama.cpp's server names it): false keeps the prompt out of the prefix cache.
  if (std::optional<bool> cache = fields.Bool("cache_prompt")) request.set_cache_prompt(*cache);
  // Taken for OpenAI's clients and not used: an end user's name is no request id.
  if (const Json* user = fields.Find("user"); user != nullptr && !user->is_string()) {
    fields.Fail("user", "expected a string");
  }
  out.stream = fields.Bool("stream").value_or(false);
  if (const Json* options = fields.Find("stream_options"); options != nullptr) {
    if (!out.stream) {
      fields.Fail("stream_options", "only allowed when stream is true");
    } else if (!options->is_object()) {
      fields.Fail("stream_options", "expected an object");
    } else {
      for (const auto& [key, value] : options->items()) {
        if (key != "include_usage" || !value.is_boolean()) {
          fields.Fail(absl::StrCat("stream_options.", key),
                      key == "include_usage" ? "expected true or false" : "unknown field");
          break;
        }
        out.include_usage = value.get<bool>();
      }
    }
  }
  if (chat) {
    out.logprobs = fields.Bool("logprobs").value_or(false);
    if (std::optional<int64_t> top = fields.Int("top_logprobs", 0, kMaxTopLogprobs)) {
      if (!out.logprobs && *top > 0) {
        fields.Fail("top_logprobs", "needs logprobs: true");
      }
      out.top_logprobs = static_cast<int32_t>(*top);
    }
  } else if (std::optional<int64_t> top = fields.Int("logprobs", 0, 5)) {
    out.logprobs = true;
    out.top_logprobs = static_cast<int32_t>(*top);
  }
  if (!chat) {
    // The prompt before the answer; with logprobs, the prompt tokens' too (scored by the engine).
    out.echo = fields.Bool("echo").value_or(false);
    if (out.echo && out.logprobs) request.set_return_prompt_logprobs(true);
  }
  // Up to request_limits.max_choices, which the service checks; 128 is that field's own limit.
  if (std::optional<int64_t> n = fields.Int("n", 1, 128)) out.n = static_cast<int32_t>(*n);
  request.set_return_logprobs(out.logprobs);
  request.set_top_logprobs(out.top_logprobs);
  if (chat) ReadUnusedChatFields(fields);
  RefuseUnsupported(fields, endpoint);
  if (!fields.ok()) {
    parsed.error = fields.error();
    return parsed;
  }
  parsed.request = std::move(out);
  return parsed;
}

}  // namespace

ParsedOpenAiRequest ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body) {
  ParsedOpenAiRequest parsed;
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    parsed.error.message =
        "the body is not valid JSON (or not UTF-8); send a JSON object with Content-Type: "
        "application/json";
    return parsed;
  }
  if (!json.is_object()) {
    parsed.error.message =
        absl::StrCat("the body must be a JSON object, got ", OpenAiJsonType(json));
    return parsed;
  }
  if (endpoint != OpenAiEndpoint::kResponses) return ParseFields(endpoint, json);
  // The Responses API: the chat request it means, read as every chat request is.
  Json chat, echo;
  if (std::optional<OpenAiError> error = ResponsesToChat(json, &chat, &echo)) {
    parsed.error = *std::move(error);
    return parsed;
  }
  parsed = ParseFields(OpenAiEndpoint::kChatCompletions, chat);
  if (!parsed.request) {
    parsed.error = ResponsesError(std::move(parsed.error));
    return parsed;
  }
  parsed.request->endpoint = OpenAiEndpoint::kResponses;
  parsed.request->responses_echo = std::move(echo);
  return parsed;
}

const char* OpenAiFinishReason(v1::FinishReason reason) {
  // "tool_calls" is the responder's, once it has found calls in the answer.
  return reason == v1::FINISH_REASON_STOP ? "stop" : "length";
}

OpenAiResponder::OpenAiResponder(const OpenAiRequest& request, std::string id, int64_t created,
                                 std::string model, const Tokenizer* tokenizer, int32_t index)
    : request_(request),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      tokenizer_(tokenizer),
      index_(index) {
  if (request_.endpoint == OpenAiEndpoint::kResponses) {
    responses_ = std::make_unique<ResponsesStream>(id_, created_, model_, request_.responses_echo);
  }
}

OpenAiResponder::~OpenAiResponder() = default;

namespace {

// A token's text as the logprobs show it (special tokens included).
std::string TokenText(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr) return absl::StrCat("token_id:", id);
  absl::StatusOr<std::string> text = tokenizer->Decode({&id, 1}, /*skip_special=*/false);
  return text.ok() ? *text : absl::StrCat("token_id:", id);
}

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// Chat's logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
Json ChatLogprobs(const SessionOutput& output, const Tokenizer* tokenizer) {
  Json content = Json::array();
  for (size_t i = 0; i < output.token_ids.size(); ++i) {
    const std::string token = TokenText(tokenizer, output.token_ids[i]);
    Json entry = {{"token", token},
                  {"logprob", i < output.logprobs.size() ? output.logprobs[i] : 0.0f},
                  {"bytes", Bytes(token)},
                  {"top_logprobs", Json::array()}};
    if (i < output.top_logprobs.size()) {
      for (const TokenLogprob& top : output.top_logprobs[i]) {
        const std::string top_token = TokenText(tokenizer, top.token);
        entry["top_logprobs"].push_back(
            {{"token", top_token}, {"logprob", top.logprob}, {"bytes", Bytes(top_token)}});
      }
    }
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

// The completions API's logprobs: {tokens, token_logprobs, top_logprobs, text_offset}; the
// prompt's first (with echo), then the output's. A prompt's first token has no logprob (null).
Json CompletionLogprobs(const SessionOutput& output, const Tokenizer* tokenizer, bool with_prompt) {
  Json tokens = Json::array(), token_logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  size_t offset = 0;
  auto add = [&](const std::vector<int32_t>& ids, const std::vector<float>& logprobs,
                 const std::vector<std::vector<TokenLogprob>>& top_logprobs) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string token = TokenText(tokenizer, ids[i]);
      tokens.push_back(token);
      const float logprob = i < logprobs.size() ? logprobs[i] : 0.0f;
      token_logprobs.push_back(std::isnan(logprob) ? Json() : Json(logprob));
      Json top = Json::object();
      if (i < top_logprobs.size()) {
        for (const TokenLogprob& t : top_logprobs[i]) {
          top[TokenText(tokenizer, t.token)] = t.logprob;
        }
      }
      tops.push_back(std::isnan(logprob) ? Json() : std::move(top));
      offsets.push_back(offset);
      offset += token.size();
    }
  };
  if (with_prompt) {
    add(output.prompt_token_ids, output.prompt_logprobs, output.prompt_top_logprobs);
  }
  add(output.token_ids, output.logprobs, output.top_logprobs);
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::optional<ToolOutput> OpenAiResponder::ToolCalls(const std::string& text,
                                                     const SessionEnd& end) const {
  if (!ChatLike(request_.endpoint) || !end.status.ok() ||
      end.finish_reason != v1::FINISH_REASON_STOP) {
    return std::nullopt;
  }
  return ParseToolOutput(text, request_.tool_mode);
}

Json OpenAiResponder::Choice(const SessionOutput& output, const SessionEnd& end) const {
  const bool chat = ChatLike(request_.endpoint);
  const std::optional<ToolOutput> calls = ToolCalls(output.text, end);
  Json choice = {{"index", index_},
                 {"finish_reason", calls ? "tool_calls" : OpenAiFinishReason(end.finish_reason)}};
  Json logprobs;
  if (request_.logprobs) {
    logprobs = chat ? ChatLogprobs(output, tokenizer_)
                    : CompletionLogprobs(output, tokenizer_, request_.echo);
  }
  choice["logprobs"] = std::move(logprobs);
  if (calls) {
    choice["message"] = {{"role", "assistant"},
                         {"content", calls->content.empty() ? Json() : Json(calls->content)},
                         {"tool_calls", ToolCallsJson(calls->calls, id_, /*with_index=*/false)}};
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", output.text}};
  } else {
    choice["text"] = request_.echo ? EchoText() + output.text : output.text;
  }
  return choice;
}

std::string OpenAiResponder::Whole(std::vector<Json> choices, const SessionEnd& totals) const {
  if (request_.endpoint == OpenAiEndpoint::kResponses) {
    return Dump(ResponseFromChat(id_, created_, model_, request_.responses_echo, choices.at(0),
                                 UsageJson(totals)));
  }
  const bool chat = ChatLike(request_.endpoint);
  Json response = {{"id", id_},
                   {"object", chat ? "chat.completion" : "text_completion"},
                   {"created", created_},
                   {"model", model_},
                   {"choices", std::move(choices)},
                   {"usage", UsageJson(totals)}};
  return Dump(response);
}

std::string OpenAiResponder::Whole(const SessionOutput& output, const SessionEnd& end) const {
  std::vector<Json> choices;
  choices.push_back(Choice(output, end));
  return Whole(std::move(choices), end);
}

std::string OpenAiResponder::EchoText() const {
  const v1::InferRequest& r = request_.request;
  if (r.prompt_token_ids_size() == 0) return r.prompt_text();
  const std::vector<int32_t> ids(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
  if (tokenizer_ == nullptr) return "";
  absl::StatusOr<std::string> text = tokenizer_->Decode(ids, /*skip_special=*/false);
  return text.ok() ? *text : "";
}

std::string OpenAiResponder::Event(const Json& chunk) const {
  if (responses_ != nullptr) return responses_->Translate(chunk);
  return absl::StrCat("data: ", Dump(chunk), "\n\n");
}

std::string OpenAiResponder::Done() const {
  return responses_ != nullptr ? "" : "data: [DONE]\n\n";
}

std::string OpenAiResponder::Chunk(const SessionOutput* output, const char* finish_reason) {
  const bool chat = ChatLike(request_.endpoint);
  Json choice = {{"index", index_},
                 {"finish_reason", finish_reason == nullptr ? Json() : Json(finish_reason)}};
  Json logprobs;
  // With echo, the first chunk of a completion starts with the prompt (and its logprobs).
  const bool echo_now = !chat && request_.echo && !echoed_ && output != nullptr;
  if (request_.logprobs && output != nullptr) {
    logprobs = chat ? ChatLogprobs(*output, tokenizer_)
                    : CompletionLogprobs(*output, tokenizer_, echo_now);
  }
  choice["logprobs"] = std::move(logprobs);
  std::string text = output == nullptr ? "" : output->text;
  if (echo_now) {
    text = EchoText() + text;
    echoed_ = true;
  }
  if (chat) {
    choice["delta"] = output == nullptr ? Json::object() : Json({{"content", text}});
  } else {
    choice["text"] = text;
  }
  Json chunk = {{"id", id_},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", Json::array({std::move(choice)})}};
  if (request_.include_usage) chunk["usage"] = Json();
  return Event(chunk);
}

std::string OpenAiResponder::FirstEvent() const {
  if (!ChatLike(request_.endpoint)) return "";
  return DeltaChunk({{"role", "assistant"}, {"content", ""}}, nullptr);
}

std::string OpenAiResponder::DeltaChunk(Json delta, const char* finish_reason) const {
  Json choice = {{"index", index_},
                 {"delta", std::move(delta)},
                 {"logprobs", Json()},
                 {"finish_reason", finish_reason == nullptr ? Json() : Json(finish_reason)}};
  Json chunk = {{"id", id_},
                {"object", "chat.completion.chunk"},
                {"created", created_},
                {"model", model_},
                {"choices", Json::array({std::move(choice)})}};
  if (request_.include_usage) chunk["usage"] = Json();
  return Event(chunk);
}

std::string OpenAiResponder::OutputEvent(const SessionOutput& output) {
  if (request_.tool_mode == OpenAiToolMode::kNone || !holding_) return Chunk(&output, nullptr);
  held_.token_ids.insert(held_.token_ids.end(), output.token_ids.begin(), output.token_ids.end());
  held_.logprobs.insert(held_.logprobs.end(), output.logprobs.begin(), output.logprobs.end());
  held_.top_logprobs.insert(held_.top_logprobs.end(), output.top_logprobs.begin(),
                            output.top_logprobs.end());
  held_.text += output.text;
  if (MayBeToolCall(held_.text, request_.tool_mode)) return "";
  // Plain text after all: what was held goes out, and the rest streams as it comes.
  holding_ = false;
  std::string events = Chunk(&held_, nullptr);
  held_ = SessionOutput();
  return events;
}

std::string OpenAiResponder::EndEvents(const SessionEnd& end) {
  std::string events = ChoiceEndEvents(end);
  if (end.status.ok()) absl::StrAppend(&events, CloseEvents(end));
  return events;
}

std::string OpenAiResponder::ChoiceEndEvents(const SessionEnd& end) {
  std::string events;
  const char* finish_reason = OpenAiFinishReason(end.finish_reason);
  if (request_.tool_mode != OpenAiToolMode::kNone && holding_) {
    if (std::optional<ToolOutput> calls = ToolCalls(held_.text, end)) {
      if (!calls->content.empty()) events += DeltaChunk({{"content", calls->content}}, nullptr);
      events += DeltaChunk({{"tool_calls", ToolCallsJson(calls->calls, id_, /*with_index=*/true)}},
                           nullptr);
      finish_reason = "tool_calls";
    } else if (!held_.empty()) {
      events += Chunk(&held_, nullptr);
    }
    held_ = SessionOutput();
    holding_ = false;
  }
  if (!end.status.ok()) {
    const OpenAiError error = OpenAiErrorFromStatus(end.status, request_.endpoint);
    if (responses_ != nullptr) return responses_->Error(error);
    return absl::StrCat("data: ", error.ToJson(), "\n\n", Done());
  }
  if (request_.echo && !echoed_ && request_.endpoint == OpenAiEndpoint::kCompletions) {
    events += Chunk(&held_, nullptr);  // no output came: the prompt alone
  }
  return events + Chunk(nullptr, finish_reason);
}

std::string OpenAiResponder::CloseEvents(const SessionEnd& totals) const {
  std::string events;
  if (request_.include_usage) {
    const bool chat = ChatLike(request_.endpoint);
    Json usage = {{"id", id_},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_},
                  {"model", model_},
                  {"choices", Json::array()},
                  {"usage", UsageJson(totals)}};
    absl::StrAppend(&events, Event(usage));
  }
  absl::StrAppend(&events, Done());
  return events;
}

}  // namespace convoy
