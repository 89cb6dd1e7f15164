// The executor runs one forward step of the model over a batch of sequences. Implementations: the
// CPU executor (cpu/) and the CUDA executor. A StepPlan is plain data; the executor owns the KV
// cache memory and reads and writes it only through each row's block table.
#ifndef CONVOY_EXECUTOR_EXECUTOR_H_
#define CONVOY_EXECUTOR_EXECUTOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"
#include "step/step.h"

namespace convoy {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one forward step. Rows are padded to the longest row and masked (causal plus padding).
  // INVALID_ARGUMENT names the row and field of a malformed plan; nothing is written then.
  virtual absl::StatusOr<StepResult> Step(const StepPlan& plan) = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual const KvCacheSpec& kv_spec() const = 0;
  // What one step may hold (step/step.h); the engine keeps every plan within it.
  virtual ExecutorLimits limits() const = 0;
};

// Checks a plan against the model and cache before anything runs. Shared by the executors.
absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_EXECUTOR_H_
