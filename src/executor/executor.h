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

// Checks one row against the model and cache: its tokens, positions, block table and sampling.
// INVALID_ARGUMENT names the sequence and the field.
absl::Status ValidateStepRow(const StepRow& row, const ModelConfig& model, const KvCacheSpec& kv);

// A sampled row whose allowed_tokens allows nothing: the row's RowResult::status.
absl::Status NoAllowedTokenError(int64_t seq_id);

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
  // Whether this one row can run, before the step is run (ValidateStepRow by default). The engine
  // leaves a row that fails out of the step and ends only its request (RunStepIsolatingRows
  // below).
  virtual absl::Status CheckRow(const StepRow& row) const {
    return ValidateStepRow(row, model_config(), kv_spec());
  }
};

// Runs a step so that one malformed row cannot fail the rows beside it: each row is checked first
// (Executor::CheckRow), the rows that pass run as one step, and the result has every row of `plan`
// in its order, a row left out carrying its error in RowResult::status. An error returned is the
// step's own (the executor failed with the good rows): it concerns every row.
absl::StatusOr<StepResult> RunStepIsolatingRows(Executor& executor, const StepPlan& plan);

// Checks a plan against the model and cache before anything runs: every row, and no sequence
// twice. Shared by the executors.
absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_EXECUTOR_H_
