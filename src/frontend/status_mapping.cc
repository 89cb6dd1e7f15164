#include "frontend/status_mapping.h"

#include <string>

namespace convoy {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

v1::FinishReason ToFinishReason(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleteLength:
      return v1::FINISH_REASON_LENGTH;
    case Outcome::kCompleteStop:
      return v1::FINISH_REASON_STOP;
    case Outcome::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case Outcome::kTimedOut:
      return v1::FINISH_REASON_TIMEOUT;
    case Outcome::kRejected:
    case Outcome::kFailed:
      return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_ERROR;
}

const char* FinishReasonText(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    case v1::FINISH_REASON_TIMEOUT:
      return "timeout";
    case v1::FINISH_REASON_ERROR:
      return "error";
    default:
      return "unspecified";
  }
}

}  // namespace convoy
