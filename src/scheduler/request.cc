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

void StepPhaseTotals::Add(const StepPhases& phases) {
  ++steps;
  sum.plan += phases.plan;
  sum.launch += phases.launch;
  sum.emit += phases.emit;
  sum.plan_ahead += phases.plan_ahead;
  sum.wait += phases.wait;
  sum.apply += phases.apply;
  sum.engine_thread += phases.engine_thread;
  sum.executor.prepare += phases.executor.prepare;
  sum.executor.forward += phases.executor.forward;
  sum.executor.sample += phases.executor.sample;
}

}  // namespace convoy
