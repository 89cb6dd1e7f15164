// The one place where the engine's statuses and outcomes become gRPC statuses and API enums.
#ifndef CONVOY_FRONTEND_STATUS_MAPPING_H_
#define CONVOY_FRONTEND_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "convoy/v1/inference.pb.h"
#include "grpcpp/support/status.h"
#include "scheduler/request.h"

namespace convoy {

// Same code (absl and gRPC share their numbering), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// kRejected and kFailed both read as FINISH_REASON_ERROR; kTimedOut as FINISH_REASON_TIMEOUT.
v1::FinishReason ToFinishReason(Outcome outcome);

// "length", "stop", "cancelled", "timeout", "error" (the client prints these).
const char* FinishReasonText(v1::FinishReason reason);

// Why a request got RESOURCE_EXHAUSTED, for a protocol that tells the causes apart (the OpenAI
// API gives each its own error code). Carried in the status (a payload), so that it survives
// copies; an unmarked status reads as kQueueFull.
enum class ExhaustedCause {
  kQueueFull,    // a priority level's queue is full, or would outlast the request's timeout
  kClientLimit,  // the client has request_limits.max_in_flight_per_client requests in flight
  kSlowClient,   // the client read none of its output for frontend.slow_client_timeout
};
absl::Status WithExhaustedCause(absl::Status status, ExhaustedCause cause);
ExhaustedCause GetExhaustedCause(const absl::Status& status);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_STATUS_MAPPING_H_
