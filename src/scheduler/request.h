// What enters the scheduler (Request) and what comes out of it (Event).
#ifndef CONVOY_SCHEDULER_REQUEST_H_
#define CONVOY_SCHEDULER_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "convoy/sampling_params.h"
#include "step/step.h"

namespace convoy {

using RequestId = int64_t;

struct Request {
  // Unique among the requests the scheduler holds.
  RequestId id = 0;
  std::vector<int32_t> prompt_tokens;  // at least one
  SamplingParams sampling;
  // Tokens to generate at most; 0: the configured default.
  int32_t max_tokens = 0;
  // Generation stops after any of these tokens (which is returned).
  std::vector<int32_t> stop_token_ids;
  // 1 is the highest level; 0: the configured default level.
  int32_t priority = 0;
  // Who sent it (an API key's name, or the peer's address): within a priority level, clients
  // share the queue fairly (scheduler/client_share.h). Empty: one anonymous client.
  std::string client;
  // How long the request may wait in the queue before it is first scheduled. ZeroDuration(): the
  // level's default; InfiniteDuration(): never times out.
  absl::Duration timeout = absl::ZeroDuration();
  // Prefix caching (when the scheduler has it on): reuse the cached KV blocks of the longest
  // known prefix of the prompt, and offer this request's full blocks to later ones. false: compute
  // every token and share nothing.
  bool use_prefix_cache = true;
  // Constrained sampling (step/token_constraint.h): every token generated is one this allows; the
  // request ends as stopped once it is terminated. Null: unconstrained.
  std::shared_ptr<TokenMask> constraint;
  // logit_bias and penalties (step/logit_adjustments.h): the scheduler counts each generated token
  // into it and hands it to the request's sampling rows. Null: none.
  std::shared_ptr<LogitAdjustments> logit_adjustments;
  // Prompt scoring (echo with logprobs): each prompt token's log-probability under the tokens
  // before it, and sampling.num_top_logprobs alternatives, come with the first token's event.
  // Needs use_prefix_cache false (a cached prompt has no logits).
  bool score_prompt = false;
};

// How a request ended. Every request the scheduler accepted ends with exactly one of these;
// kRejected is used by callers (the engine loop) for a request that Submit refused.
enum class Outcome {
  kCompleteLength,  // max_tokens (or the model's length) reached
  kCompleteStop,    // a stop token was generated, or the constraint ended the text
  kCancelled,
  kTimedOut,  // waited in the queue past its timeout
  kRejected,
  kFailed,  // the executor failed a step that held the request
};
inline constexpr int kNumOutcomes = 6;
const char* OutcomeName(Outcome outcome);

struct Event {
  enum class Kind { kToken, kFinal };
  Kind kind = Kind::kToken;
  RequestId request_id = 0;

  // kToken: the `token_index`-th generated token (0 is the first).
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  int64_t token_index = 0;
  // With the first token (token_index 0) of a request that scores its prompt: entry i for prompt
  // token i (entry 0, the first token, has nothing before it: NaN), and their alternatives.
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs;

  // kFinal.
  Outcome outcome = Outcome::kCompleteLength;
  absl::Status status;  // OK when complete; CANCELLED, DEADLINE_EXCEEDED, ... otherwise
  int64_t num_generated = 0;
  // Arrival to the first step that held the request; unset when it was never scheduled.
  std::optional<absl::Duration> queue_time;
  // Prompt tokens whose KV the prefix cache gave it when it was first scheduled (whole blocks;
  // never the prompt's last token): not computed for it.
  int64_t cached_prompt_tokens = 0;
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_REQUEST_H_
