// Checking a client's InferRequest and turning it into the engine's Request. Every refusal is
// INVALID_ARGUMENT (or UNIMPLEMENTED for what the server cannot do yet) with a message that starts
// with the request field at fault, e.g. "sampling.top_p: must be in (0, 1], got 1.5".
#ifndef CONVOY_FRONTEND_REQUEST_VALIDATION_H_
#define CONVOY_FRONTEND_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "convoy/v1/inference.pb.h"
#include "scheduler/request.h"
#include "step/step.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace convoy {

class OutputConstraints;  // frontend/output_constraints.h

// What the server accepts; constant while it serves.
struct ServingLimits {
  std::string model_name;
  int64_t vocab_size = 0;
  // Prompt plus generated tokens at most.
  int64_t max_context_length = 0;
  int32_t priority_levels = 1;
  // The level of a request that names none (scheduler.default_priority_level).
  int32_t default_priority_level = 1;
  int32_t max_top_logprobs = kMaxTopLogprobs;  // the executor's ExecutorLimits in convoyd
  // request_limits.max_stop_token_ids of the config.
  int32_t max_stop_token_ids = 256;
  // request_limits.max_in_flight_per_client of the config; 0: no limit.
  int32_t max_in_flight_per_client = 0;
  // request_limits.max_choices of the config: a request's `n` at most (frontend/choices.h).
  int32_t max_choices = 8;
  // Stop strings per request at most, and bytes per stop string.
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 1024;
  // frontend.slow_client_timeout_microseconds: how long a session's output may wait untaken
  // (its client not reading) before the request is cancelled. InfiniteDuration(): no limit.
  absl::Duration slow_client_timeout = absl::Seconds(60);
  // The model's end-of-generation tokens (its config's eos_token_ids: e.g. Llama 3's
  // <|end_of_text|>, <|eot_id|> and <|eom_id|>). Generation from text or messages stops at each of
  // them and at the tokenizer's end-of-sequence token.
  std::vector<int32_t> end_of_generation_ids;
  // The model's tokenizer, for prompts as text; null when the model has none. Not owned.
  const Tokenizer* tokenizer = nullptr;
  // The model's chat template, for prompts as messages; null when there is none (then
  // `no_chat_template_reason` says why: the model has none, or it could not be parsed). Not owned.
  const ChatTemplate* chat_template = nullptr;
  std::string no_chat_template_reason = "the model has no chat template";
  // Structured output (InferRequest.constraint); null when the model cannot have it, and then
  // `no_output_constraints` says why. Not owned.
  OutputConstraints* output_constraints = nullptr;
  absl::Status no_output_constraints =
      absl::FailedPreconditionError("structured output needs a model with a tokenizer");
  // Why min_p, penalties and logit_bias cannot be had (the executor's
  // ExecutorLimits::applies_extended_sampling); OK when they can.
  absl::Status no_extended_sampling;
  // Why prompt logprobs cannot be had (ExecutorLimits::scores_prompts); OK when they can.
  absl::Status no_prompt_scoring;
};

// A request as the engine and the front end's output path take it.
struct PreparedRequest {
  Request engine_request;
  // Stop strings, matched in the output text (the engine knows nothing of them).
  std::vector<std::string> stop_strings;
};

// The earlier of the call's own deadline (InfiniteFuture() for none) and arrival plus the
// request's timeout_microseconds (0: none). Timeouts longer than a year count as a year, so that no
// value can wrap into a deadline that has already passed.
absl::Time RequestDeadline(absl::Time call_deadline, uint64_t timeout_microseconds,
                           absl::Time arrival);

// The engine request for `request`: prompt (token ids, text tokenized, or messages rendered by the
// chat template and tokenized), sampling, max_tokens (0 when unset: the engine's default), stop
// tokens and priority, and the stop strings. A request without a seed gets one drawn from the
// operating system's entropy (sampling.seed). Leaves id and timeout for the caller.
absl::StatusOr<PreparedRequest> PrepareRequest(const v1::InferRequest& request,
                                               const ServingLimits& limits);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_REQUEST_VALIDATION_H_
