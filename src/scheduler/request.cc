#include "scheduler/request.h"

#include "scheduler/scheduler_metrics.h"

namespace convoy {

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleteLength:
      return "complete_length";
    case Outcome::kCompleteStop:
      return "complete_stop";
    case Outcome::kCancelled:
      return "cancelled";
    case Outcome::kTimedOut:
      return "timed_out";
    case Outcome::kRejected:
      return "rejected";
    case Outcome::kFailed:
      return "failed";
  }
  return "unknown";
}

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kQueueFull:
      return "queue_full";
    case RejectReason::kInvalidArgument:
      return "invalid_argument";
    case RejectReason::kDuplicateId:
      return "duplicate_id";
    case RejectReason::kClientLimit:
      return "client_limit";
  }
  return "unknown";
}

}  // namespace convoy
