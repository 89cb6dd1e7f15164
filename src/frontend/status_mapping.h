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

}  // namespace convoy

#endif  // CONVOY_FRONTEND_STATUS_MAPPING_H_
