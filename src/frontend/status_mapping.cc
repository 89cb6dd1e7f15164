#include "frontend/status_mapping.h"

#include <string>

#include "absl/strings/cord.h"

namespace convoy {
namespace {

constexpr char kExhaustedCauseUrl[] = "type.convoy/ExhaustedCause";

}  // namespace

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

absl::Status WithExhaustedCause(absl::Status status, ExhaustedCause cause) {
  status.SetPayload(kExhaustedCauseUrl, absl::Cord(std::to_string(static_cast<int>(cause))));
  return status;
}

ExhaustedCause GetExhaustedCause(const absl::Status& status) {
  const auto payload = status.GetPayload(kExhaustedCauseUrl);  // absl::optional
  if (!payload.has_value()) return ExhaustedCause::kQueueFull;
  if (*payload == "1") return ExhaustedCause::kClientLimit;
  if (*payload == "2") return ExhaustedCause::kSlowClient;
  return ExhaustedCause::kQueueFull;
}

}  // namespace convoy
