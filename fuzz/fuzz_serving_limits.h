// The server limits the request fuzz targets validate against: a small context, three priority
// levels, the byte-level tokenizer, a ChatML template (fuzz_support.h) and structured output over
// that tokenizer, so that a request's constraint is compiled too.
#ifndef CONVOY_FUZZ_FUZZ_SERVING_LIMITS_H_
#define CONVOY_FUZZ_FUZZ_SERVING_LIMITS_H_

#include "frontend/output_constraints.h"
#include "frontend/request_validation.h"
#include "fuzz_support.h"
#include "text/chat_template.h"

namespace convoy::fuzz {

inline const ServingLimits& FuzzServingLimits() {
  static const ServingLimits* const limits = [] {
    auto* limits = new ServingLimits;
    limits->model_name = "tiny";
    limits->tokenizer = &ByteLevelTokenizer();
    limits->vocab_size = limits->tokenizer->vocab_size();
    limits->max_context_length = 256;
    limits->priority_levels = 3;
    limits->default_priority_level = 2;
    limits->max_top_logprobs = 5;
    limits->max_stop_token_ids = 8;
    limits->max_stop_strings = 4;
    limits->max_stop_string_bytes = 64;
    absl::StatusOr<ChatTemplate> chat_template = ChatTemplate::Parse(kChatMlTemplate);
    Check(chat_template.ok(), "the ChatML template does not parse");
    limits->chat_template = new ChatTemplate(*std::move(chat_template));
    std::vector<int32_t> ends;
    if (limits->tokenizer->eos_id()) ends.push_back(*limits->tokenizer->eos_id());
    absl::StatusOr<std::unique_ptr<OutputConstraints>> constraints = OutputConstraints::Create(
        *limits->tokenizer, static_cast<int32_t>(limits->vocab_size), std::move(ends));
    Check(constraints.ok(), "structured output over the byte-level tokenizer cannot be made");
    limits->output_constraints = constraints->release();
    return limits;
  }();
  return *limits;
}

// PrepareRequest's contract: the prompt fits the context and its ids are tokens.
inline void CheckPrepared(const absl::StatusOr<PreparedRequest>& prepared,
                          const ServingLimits& limits) {
  if (!prepared.ok()) {
    const absl::StatusCode code = prepared.status().code();
    Check(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented ||
              code == absl::StatusCode::kFailedPrecondition ||
              code == absl::StatusCode::kNotFound || code == absl::StatusCode::kResourceExhausted,
          "PrepareRequest failed with an unexpected code: " + prepared.status().ToString());
    return;
  }
  const Request& request = prepared->engine_request;
  Check(!request.prompt_tokens.empty(), "PrepareRequest accepted an empty prompt");
  Check(static_cast<int64_t>(request.prompt_tokens.size()) < limits.max_context_length,
        "PrepareRequest accepted a prompt that fills the context");
  for (int32_t id : request.prompt_tokens) {
    Check(id >= 0 && id < limits.vocab_size, "PrepareRequest accepted an id out of range");
  }
  Check(request.priority >= 0 && request.priority <= limits.priority_levels,
        "PrepareRequest accepted a priority out of range");
  if (request.constraint != nullptr) {
    Check(request.constraint->vocab_size() == limits.vocab_size,
          "PrepareRequest made a constraint over another vocabulary");
    // The first mask: computing it must not crash, whatever the grammar.
    request.constraint->Get();
  }
}

}  // namespace convoy::fuzz

#endif  // CONVOY_FUZZ_FUZZ_SERVING_LIMITS_H_
