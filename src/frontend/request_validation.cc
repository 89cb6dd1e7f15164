#include "frontend/request_validation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "frontend/output_constraints.h"
#include "nlohmann/json.hpp"
#include "text/chat_prompt.h"
#include "text/utf8.h"

namespace convoy {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

absl::Status CheckTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                           absl::string_view field, int64_t vocab_size) {
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(
          absl::StrCat(field, "[", i, "]"),
          absl::StrFormat("token id %d is outside the vocabulary [0, %d)", ids[i], vocab_size));
    }
  }
  return absl::OkStatus();
}

// The roles chat templates know.
constexpr std::array<std::string_view, 4> kRoles = {"system", "user", "assistant", "tool"};

// The prompt ids the model's chat template and tokenizer make of the request's messages.
absl::StatusOr<std::vector<int32_t>> EncodeChat(const v1::InferRequest& request,
                                                const ServingLimits& limits) {
  if (limits.chat_template == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("messages: ", limits.no_chat_template_reason,
                     "; send prompt_text (formatted as the model expects) or prompt_token_ids"));
  }
  std::vector<ChatMessage> messages;
  messages.reserve(request.messages_size());
  for (int i = 0; i < request.messages_size(); ++i) {
    const v1::ChatMessage& m = request.messages(i);
    if (std::find(kRoles.begin(), kRoles.end(), m.role()) == kRoles.end()) {
      constexpr size_t kQuoted = 32;
      return Invalid(absl::StrCat("messages[", i, "].role"),
                     absl::StrFormat("unknown role '%s'; expected system, user, assistant or tool",
                                     absl::CHexEscape(m.role().substr(0, kQuoted))));
    }
    if (absl::Status utf8 = tokenizer_internal::ValidateUtf8(m.content()); !utf8.ok()) {
      return Invalid(absl::StrCat("messages[", i, "].content"), utf8.message());
    }
    if (!m.extra_json().empty() &&
        !nlohmann::json::parse(m.extra_json(), nullptr, /*allow_exceptions=*/false).is_object()) {
      return Invalid(absl::StrCat("messages[", i, "].extra_json"), "expected a JSON object");
    }
    messages.push_back(ChatMessage{m.role(), m.content(), m.extra_json()});
  }
  if (!request.tools_json().empty() &&
      !nlohmann::json::parse(request.tools_json(), nullptr, /*allow_exceptions=*/false)
           .is_array()) {
    return Invalid("tools_json", "expected a JSON list of tools");
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      EncodeChatPrompt(*limits.chat_template, *limits.tokenizer, messages, request.tools_json());
  if (!ids.ok()) {
    // The template's own refusals (e.g. roles out of order) are the client's to fix.
    return Invalid("messages", absl::StrCat("the model's chat template refused them: ",
                                            ids.status().message()));
  }
  return ids;
}

// sampling.logit_bias, checked: ids inside the vocabulary, finite biases within the range, at most
// kMaxLogitBiasEntries; in token order (a map's order is unspecified).
absl::StatusOr<std::vector<LogitBias>> ReadLogitBias(const v1::SamplingParameters& s,
                                                     int64_t vocab_size) {
  std::vector<LogitBias> biases;
  if (s.logit_bias().empty()) return biases;
  if (s.logit_bias_size() > kMaxLogitBiasEntries) {
    return Invalid("sampling.logit_bias",
                   absl::StrFormat("%d entries; at most %d are allowed", s.logit_bias_size(),
                                   kMaxLogitBiasEntries));
  }
  for (const auto& [token, bias] : s.logit_bias()) {
    const std::string field = absl::StrCat("sampling.logit_bias[", token, "]");
    if (token < 0 || token >= vocab_size) {
      return Invalid(field, absl::StrFormat("token id %d is outside the vocabulary [0, %d)", token,
                                            vocab_size));
    }
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return Invalid(field, absl::StrFormat("the bias must be in [%g, %g], got %g", -kMaxLogitBias,
                                            kMaxLogitBias, bias));
    }
    biases.push_back({token, bias});
  }
  std::sort(biases.begin(), biases.end(),
            [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  return biases;
}

// The first field of min_p, the penalties and logit_bias that a request sets, for a refusal.
std::string ExtendedSamplingField(const SamplingParams& p, const std::vector<LogitBias>& biases) {
  if (p.min_p != 0.0f) return "sampling.min_p";
  if (p.presence_penalty != 0.0f) return "sampling.presence_penalty";
  if (p.frequency_penalty != 0.0f) return "sampling.frequency_penalty";
  if (p.repetition_penalty != 1.0f) return "sampling.repetition_penalty";
  return biases.empty() ? "sampling" : "sampling.logit_bias";
}

// A seed for a request that names none, from the operating system's entropy: every unseeded
// request samples on its own, as OpenAI's API and other servers do.
uint64_t DrawSeed() {
  thread_local std::random_device entropy;
  return (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
}

}  // namespace

absl::Time RequestDeadline(absl::Time call_deadline, uint64_t timeout_microseconds,
                           absl::Time arrival) {
  if (timeout_microseconds == 0) return call_deadline;
  constexpr uint64_t kYearMicros = uint64_t{365} * 24 * 3600 * 1000000;
  const absl::Duration timeout =
      absl::Microseconds(static_cast<int64_t>(std::min(timeout_microseconds, kYearMicros)));
  return std::min(call_deadline, arrival + timeout);
}

absl::StatusOr<PreparedRequest> PrepareRequest(const v1::InferRequest& request,
                                               const ServingLimits& limits) {
  if (!request.model().empty() && request.model() != limits.model_name) {
    // Quote at most a short prefix: the status travels in the client's metadata, which is small.
    constexpr size_t kQuoted = 64;
    const std::string quoted = request.model().size() <= kQuoted
                                   ? request.model()
                                   : absl::StrCat(request.model().substr(0, kQuoted), "... (",
                                                  request.model().size(), " bytes)");
    return Invalid("model", absl::StrFormat("unknown model '%s'; this server serves '%s'",
                                            absl::CHexEscape(quoted), limits.model_name));
  }
  PreparedRequest prepared;
  Request& out = prepared.engine_request;
  const int prompts = (request.prompt_token_ids_size() > 0) + !request.prompt_text().empty() +
                      (request.messages_size() > 0);
  if (prompts > 1) {
    return Invalid(request.messages_size() > 0 ? "messages" : "prompt_text",
                   "set exactly one of prompt_token_ids, prompt_text and messages");
  }
  const bool chat = request.messages_size() > 0;
  const bool text = chat || !request.prompt_text().empty();
  const char* prompt_field = chat ? "messages" : text ? "prompt_text" : "prompt_token_ids";
  if (text && limits.tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(prompt_field, ": this model has no tokenizer; send prompt_token_ids"));
  }
  if (!chat && !request.tools_json().empty()) {
    return Invalid("tools_json", "tools go with messages (the chat template shows them)");
  }
  if (chat) {
    ASSIGN_OR_RETURN(out.prompt_tokens, EncodeChat(request, limits));
  } else if (text) {
    absl::StatusOr<std::vector<int32_t>> ids =
        limits.tokenizer->Encode(request.prompt_text(), /*add_special=*/true);
    if (!ids.ok()) return Invalid("prompt_text", ids.status().message());
    out.prompt_tokens = *std::move(ids);
  } else {
    if (absl::Status ids =
            CheckTokenIds(request.prompt_token_ids(), "prompt_token_ids", limits.vocab_size);
        !ids.ok()) {
      return ids;
    }
    out.prompt_tokens.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  }
  if (text) {
    // A tokenizer may know more tokens than the model has embeddings for (added tokens).
    for (size_t i = 0; i < out.prompt_tokens.size(); ++i) {
      const int32_t id = out.prompt_tokens[i];
      if (id < 0 || id >= limits.vocab_size) {
        return Invalid(
            prompt_field,
            absl::StrFormat("the tokenizer made token %d (at position %d) of it, outside "
                            "the model's vocabulary [0, %d)",
                            id, i, limits.vocab_size));
      }
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(out.prompt_tokens.size());
  if (prompt_len == 0) return Invalid(prompt_field, "the prompt is empty");
  if (prompt_len >= limits.max_context_length) {
    return Invalid(
        prompt_field,
        absl::StrFormat("the prompt has %d tokens; the model's context is %d tokens, "
                        "so a prompt may have at most %d",
                        prompt_len, limits.max_context_length, limits.max_context_length - 1));
  }
  const v1::SamplingParameters& s = request.sampling();
  if (s.has_max_tokens()) {
    if (s.max_tokens() < 1) {
      return Invalid("sampling.max_tokens",
                     absl::StrCat("must be at least 1, got ", s.max_tokens()));
    }
    if (s.max_tokens() > limits.max_context_length) {
      return Invalid("sampling.max_tokens",
                     absl::StrFormat("%d exceeds the model's context of %d tokens", s.max_tokens(),
                                     limits.max_context_length));
    }
    out.max_tokens = s.max_tokens();
  }
  if (s.has_temperature()) out.sampling.temperature = s.temperature();
  if (s.has_top_k()) out.sampling.top_k = s.top_k();
  if (s.has_top_p()) out.sampling.top_p = s.top_p();
  if (s.has_min_p()) out.sampling.min_p = s.min_p();
  if (s.has_presence_penalty()) out.sampling.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) out.sampling.frequency_penalty = s.frequency_penalty();
  if (s.has_repetition_penalty()) out.sampling.repetition_penalty = s.repetition_penalty();
  out.sampling.seed = s.has_seed() ? s.seed() : DrawSeed();
  out.sampling.num_top_logprobs = request.top_logprobs();
  // The ranges are CheckSamplingParams' (the samplers check the same); here they name the field.
  if (std::optional<SamplingParamError> error =
          CheckSamplingParams(out.sampling, limits.max_top_logprobs)) {
    const std::string field = std::string(error->field) == "num_top_logprobs"
                                  ? std::string("top_logprobs")
                                  : absl::StrCat("sampling.", error->field);
    return Invalid(field, error->reason);
  }
  ASSIGN_OR_RETURN(std::vector<LogitBias> biases, ReadLogitBias(s, limits.vocab_size));
  if (UsesExtendedSampling(out.sampling) || !biases.empty()) {
    if (!limits.no_extended_sampling.ok()) {
      return absl::Status(limits.no_extended_sampling.code(),
                          absl::StrCat(ExtendedSamplingField(out.sampling, biases), ": ",
                                       limits.no_extended_sampling.message()));
    }
    out.logit_adjustments =
        LogitAdjustments::Make(out.sampling, std::move(biases), out.prompt_tokens);
  }
  if (s.stop_token_ids_size() > limits.max_stop_token_ids) {
    return Invalid("sampling.stop_token_ids",
                   absl::StrFormat("%d ids; at most %d are allowed (request_limits."
                                   "max_stop_token_ids)",
                                   s.stop_token_ids_size(), limits.max_stop_token_ids));
  }
  if (absl::Status ids =
          CheckTokenIds(s.stop_token_ids(), "sampling.stop_token_ids", limits.vocab_size);
      !ids.ok()) {
    return ids;
  }
  out.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  if (s.stop_size() > 0) {
    if (limits.tokenizer == nullptr) {
      return absl::FailedPreconditionError(
          "sampling.stop: stop strings need a model with a tokenizer; use stop_token_ids");
    }
    if (s.stop_size() > limits.max_stop_strings) {
      return Invalid("sampling.stop", absl::StrFormat("%d strings; at most %d are allowed",
                                                      s.stop_size(), limits.max_stop_strings));
    }
    for (int i = 0; i < s.stop_size(); ++i) {
      const std::string field = absl::StrCat("sampling.stop[", i, "]");
      if (s.stop(i).empty()) return Invalid(field, "a stop string may not be empty");
      if (static_cast<int64_t>(s.stop(i).size()) > limits.max_stop_string_bytes) {
        return Invalid(field, absl::StrFormat("%d bytes; at most %d are allowed", s.stop(i).size(),
                                              limits.max_stop_string_bytes));
      }
      if (absl::Status utf8 = tokenizer_internal::ValidateUtf8(s.stop(i)); !utf8.ok()) {
        return Invalid(field, utf8.message());
      }
      prepared.stop_strings.push_back(s.stop(i));
    }
  }
  // Generation from text ends at the model's end-of-generation tokens, as text APIs do; a prompt
  // of ids stops only where the request says.
  if (text) {
    std::vector<int32_t> ends = limits.end_of_generation_ids;
    if (limits.tokenizer->eos_id()) ends.push_back(*limits.tokenizer->eos_id());
    for (int32_t id : ends) {
      if (std::find(out.stop_token_ids.begin(), out.stop_token_ids.end(), id) ==
          out.stop_token_ids.end()) {
        out.stop_token_ids.push_back(id);
      }
    }
  }

  if (request.has_constraint()) {
    if (limits.output_constraints == nullptr) {
      return absl::Status(limits.no_output_constraints.code(),
                          absl::StrCat("constraint: ", limits.no_output_constraints.message()));
    }
    absl::StatusOr<std::shared_ptr<TokenMask>> mask =
        limits.output_constraints->Make(request.constraint());
    if (!mask.ok()) return mask.status();
    out.constraint = *std::move(mask);
  }

  if (request.priority() < 0 || request.priority() > limits.priority_levels) {
    return Invalid("priority",
                   absl::StrFormat("%d is outside 1..%d (1 is the highest; 0 takes the default)",
                                   request.priority(), limits.priority_levels));
  }
  out.priority = request.priority();
  out.use_prefix_cache = !request.has_cache_prompt() || request.cache_prompt();
  if (request.return_prompt_logprobs()) {
    if (!limits.no_prompt_scoring.ok()) {
      return absl::Status(
          limits.no_prompt_scoring.code(),
          absl::StrCat("return_prompt_logprobs: ", limits.no_prompt_scoring.message()));
    }
    out.score_prompt = true;
    out.use_prefix_cache = false;  // a cached prompt has no logits to score it with
  }
  // It goes into log lines: short, and valid UTF-8 for JSON logs.
  constexpr size_t kMaxClientRequestId = 256;
  if (request.client_request_id().size() > kMaxClientRequestId) {
    return Invalid("client_request_id",
                   absl::StrFormat("%d bytes; at most %d are allowed",
                                   request.client_request_id().size(), kMaxClientRequestId));
  }
  if (absl::Status utf8 = tokenizer_internal::ValidateUtf8(request.client_request_id());
      !utf8.ok()) {
    return Invalid("client_request_id", utf8.message());
  }
  return prepared;
}

}  // namespace convoy
