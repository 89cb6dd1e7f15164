// The executor runs one forward step of the model over a batch of sequences. Implementations: the
// CPU executor (cpu/), the CUDA executor, and the fake device (fake_device_executor.h) that runs
// no model. A StepPlan is plain data; the executor owns the KV cache memory and reads and writes it
// only through each row's block table.
//
// The step's life, as the engine drives it (engine/engine_loop.h):
//
//   Launch(plan)   the step may run on a thread or stream of the executor's own while the engine
//                  emits the previous step's events; the caller keeps `plan` unchanged until
//                  Collect returns, and may then reuse its storage for a later step
//   Collect()      waits for that step and returns its result; then the next Launch
//
// An executor whose step runs on the caller's thread (the CPU executor) implements Step alone:
// Launch runs it and Collect hands back what it returned.
//
// The executor keeps each running sequence's block table between steps (block_tables.h): a row
// carries only the entries its sequence added since its last row, and a plan names the sequences
// whose tables to drop (StepRow::first_block, StepPlan::released). Every executor takes a plan's
// tables with AcceptTables before its step reads them, and reads a row's whole table with TableOf.
#ifndef CONVOY_EXECUTOR_EXECUTOR_H_
#define CONVOY_EXECUTOR_EXECUTOR_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "executor/block_tables.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"
#include "step/step.h"

namespace convoy {

// Checks one row against the model and cache: its tokens, positions, the block table entries it
// carries (those before first_block are the executor's, checked when they came) and sampling.
// INVALID_ARGUMENT names the sequence and the field.
absl::Status ValidateStepRow(const StepRow& row, const ModelConfig& model, const KvCacheSpec& kv);

// A sampled row whose allowed_tokens allows nothing: the row's RowResult::status.
absl::Status NoAllowedTokenError(int64_t seq_id);

// For an executor without ExecutorLimits::applies_extended_sampling: UNIMPLEMENTED naming the
// sequence and what it asks for when `row` has logit adjustments or min_p; OK otherwise.
absl::Status RefuseExtendedSampling(const StepRow& row, std::string_view executor_name);

// For an executor without ExecutorLimits::scores_prompts: UNIMPLEMENTED naming the sequence when
// `row` has score_tokens; OK otherwise.
absl::Status RefusePromptScoring(const StepRow& row, std::string_view executor_name);

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one forward step. Rows are padded to the longest row and masked (causal plus padding).
  // INVALID_ARGUMENT names the row and field of a malformed plan; nothing is written then.
  virtual absl::StatusOr<StepResult> Step(const StepPlan& plan) = 0;
  // Starts a step; its result, or its error, comes from the next Collect. `plan` must stay
  // unchanged until Collect returns. One step at a time: FAILED_PRECONDITION while one is
  // launched and not collected (nothing starts then). By default it runs Step on the caller's
  // thread.
  virtual absl::Status Launch(const StepPlan& plan);
  // Waits for the launched step and returns what Step would have. FAILED_PRECONDITION when no
  // step is launched.
  virtual absl::StatusOr<StepResult> Collect();
  // Whether Launch returns while the step runs (on a thread or device stream of the executor's
  // own), so that the engine has something to do before Collect. False for the default Launch.
  virtual bool steps_asynchronously() const { return false; }
  virtual const ModelConfig& model_config() const = 0;
  virtual const KvCacheSpec& kv_spec() const = 0;
  // What one step may hold (step/step.h); the engine keeps every plan within it.
  virtual ExecutorLimits limits() const = 0;
  // Whether this one row can run, before the step is run (ValidateStepRow and the row's block
  // table entries against those held, by default). The engine leaves a row that fails out of the
  // step and ends only its request (RunStepIsolatingRows below).
  virtual absl::Status CheckRow(const StepRow& row) const;

  // The block tables this executor holds between steps (block_tables.h).
  const BlockTables& block_tables() const { return tables_; }
  // Drops the tables of sequences that have ended. Between steps only (no step launched):
  // IsolatedStep applies a plan's releases with it before checking the rows, so that they take
  // effect even when no row of the plan runs. An executor that runs its steps through another
  // one (a test's wrapper) forwards this and CheckRow to it, where the tables are.
  virtual void ReleaseTables(absl::Span<const int64_t> seq_ids) { tables_.Release(seq_ids); }

 protected:
  // Takes a plan's block tables (BlockTables::CheckPlan, then Apply); every executor calls it in
  // Step or Launch, on the launching thread, once the plan is otherwise valid. INVALID_ARGUMENT
  // names the row; nothing changes then.
  absl::Status AcceptTables(const StepPlan& plan);
  // A row's whole block table, once its plan is accepted; read by the step until Collect returns.
  absl::Span<const BlockId> TableOf(const StepRow& row) const { return tables_.table(row.seq_id); }

 private:
  BlockTables tables_;
  // The default Launch's result, until Collect takes it.
  std::optional<absl::StatusOr<StepResult>> launched_;
};

// Runs a step so that one malformed row cannot fail the rows beside it: each row is checked first
// (Executor::CheckRow), the rows that pass run as one step, and the result has every row of `plan`
// in its order, a row left out carrying its error in RowResult::status. An error returned is the
// step's own (the executor failed with the good rows): it concerns every row.
absl::StatusOr<StepResult> RunStepIsolatingRows(Executor& executor, const StepPlan& plan);

// The same in two halves, for a step that runs while its caller goes on: Launch checks the rows
// and launches the good ones; Collect waits for them and returns the result of every row of the
// plan, as RunStepIsolatingRows does. One step at a time.
class IsolatedStep {
 public:
  explicit IsolatedStep(Executor* executor) : executor_(executor) {}
  // An error here is the step's own (nothing was launched); Collect must not be called then.
  // `plan` must stay unchanged until Collect returns.
  absl::Status Launch(const StepPlan& plan);
  absl::StatusOr<StepResult> Collect();

 private:
  Executor* const executor_;
  // The launched plan's rows: their ids, and the error of each row left out (OK: launched).
  std::vector<int64_t> seq_ids_;
  std::vector<absl::Status> checks_;
  bool any_launched_ = false;
  // The rows that passed, when some did not (the executor reads them until Collect).
  StepPlan good_;
};

// Checks a plan against the model and cache before anything runs: every row, and no sequence
// twice. Shared by the executors.
absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_EXECUTOR_H_
