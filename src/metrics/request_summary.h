// What the front end knows about one request when its final event arrives. It feeds
// Metrics::OnRequestDone and LogRequestDone.
#ifndef CONVOY_METRICS_REQUEST_SUMMARY_H_
#define CONVOY_METRICS_REQUEST_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"

namespace convoy {

struct RequestSummary {
  RequestId id = 0;
  // The client's own identifier for the request (InferRequest.client_request_id); may be empty.
  std::string client_request_id;
  // The seed of its random draws (its own, or the one drawn for it); unset when none was set.
  std::optional<uint64_t> seed;
  Outcome outcome = Outcome::kCompleteLength;
  // When it reached the front end.
  absl::Time arrival = absl::UnixEpoch();
  // The priority level it asked for, as its API key capped it (1 highest; 0: the server's default
  // level, or unknown when it was refused before its request was read).
  int32_t priority = 0;
  // For kRejected, why (when the caller knows).
  std::optional<RejectReason> reject_reason;
  int64_t prompt_tokens = 0;
  // Of prompt_tokens, those the prefix cache held (not computed for it).
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // Arrival to the first step that held the request; unset when unknown or never scheduled.
  std::optional<absl::Duration> queue_time;
  // Arrival to the first generated token; unset when no token was generated.
  std::optional<absl::Duration> time_to_first_token;
  // Arrival to the final event.
  absl::Duration e2e_latency = absl::ZeroDuration();
  // The final event's status: OK when complete; its message is logged otherwise.
  absl::Status status;
};

}  // namespace convoy

#endif  // CONVOY_METRICS_REQUEST_SUMMARY_H_
