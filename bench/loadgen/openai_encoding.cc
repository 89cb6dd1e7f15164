#include "bench/loadgen/openai_encoding.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {

using Json = nlohmann::json;

std::string BuildOpenAiCompletionBody(const PlannedRequest& planned, const std::string& model) {
  Json body = {{"model", model},
               {"prompt", planned.prompt_token_ids},
               {"max_tokens", planned.max_tokens},
               {"temperature", planned.temperature},
               {"seed", static_cast<int64_t>(planned.sampling_seed)},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"user", absl::StrCat("bench-", planned.index)}};
  if (planned.priority != 0) body["priority"] = planned.priority;
  return body.dump();
}

namespace {

// The choice's text: a completion's "text", or a chat chunk's delta "content".
const Json* ChoiceText(const Json& choice) {
  if (auto it = choice.find("text"); it != choice.end() && it->is_string()) return &*it;
  if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    if (delta->contains("role")) return nullptr;  // a chat stream's opening chunk
    if (auto it = delta->find("content"); it != delta->end() && it->is_string()) return &*it;
  }
  return nullptr;
}

}  // namespace

OpenAiStreamEvent ParseOpenAiStreamEvent(absl::string_view data) {
  OpenAiStreamEvent out;
  if (data == "[DONE]") {
    out.kind = OpenAiStreamEvent::Kind::kDone;
    return out;
  }
  const Json json = Json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    out.error = absl::StrCat("an event that is not a JSON object: ", data.substr(0, 200));
    return out;
  }
  if (auto error = json.find("error"); error != json.end()) {
    out.kind = OpenAiStreamEvent::Kind::kError;
    auto message = error->is_object() ? error->find("message") : error->end();
    out.error = message != error->end() && message->is_string() ? message->get<std::string>()
                                                                : error->dump();
    return out;
  }
  auto choices = json.find("choices");
  if (choices == json.end() || !choices->is_array()) {
    out.error = absl::StrCat("an event without choices: ", data.substr(0, 200));
    return out;
  }
  out.kind = OpenAiStreamEvent::Kind::kChunk;
  if (!choices->empty() && (*choices)[0].is_object()) {
    const Json& choice = (*choices)[0];
    auto finish = choice.find("finish_reason");
    if (finish != choice.end() && finish->is_string())
      out.finish_reason = finish->get<std::string>();
    if (const Json* text = ChoiceText(choice); text != nullptr) {
      out.output = out.finish_reason.empty() || !text->get_ref<const std::string&>().empty();
    }
  }
  if (auto usage = json.find("usage"); usage != json.end() && usage->is_object()) {
    auto tokens = usage->find("completion_tokens");
    if (tokens != usage->end() && tokens->is_number_integer()) {
      out.completion_tokens = tokens->get<int64_t>();
    }
  }
  return out;
}

}  // namespace convoy::bench
