#include "executor/executor.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "kv/block_table.h"

namespace convoy {

absl::Status ValidateStepRow(const StepRow& row, const ModelConfig& model, const KvCacheSpec& kv) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrFormat("sequence %d: %s", row.seq_id, what));
  };
  if (row.token_ids.empty()) return error("token_ids is empty");
  for (size_t i = 0; i < row.token_ids.size(); ++i) {
    const int32_t t = row.token_ids[i];
    if (t < 0 || t >= model.vocab_size) {
      return error(absl::StrFormat("token_ids[%d] = %d is outside the vocabulary [0, %d)", i, t,
                                   model.vocab_size));
    }
  }
  if (row.start_pos < 0) return error(absl::StrFormat("start_pos %d < 0", row.start_pos));
  const int64_t end = static_cast<int64_t>(row.start_pos) + row.token_ids.size();
  if (end > model.max_position_embeddings) {
    return error(absl::StrFormat("positions up to %d exceed the model's context of %d", end,
                                 model.max_position_embeddings));
  }
  if (row.first_block < 0) return error(absl::StrFormat("first_block %d < 0", row.first_block));
  const int64_t capacity =
      (static_cast<int64_t>(row.first_block) + row.block_table.size()) * kv.block_size;
  if (capacity < end) {
    return error(absl::StrFormat("block_table holds %d tokens, the row needs %d", capacity, end));
  }
  // Under a sliding window through every layer, the blocks before the row's first token's window
  // are never read, and the scheduler gives them back (kNoBlock).
  const int64_t unread = BlocksBeforeWindow(row.start_pos, model.KvWindow(), kv.block_size);
  for (size_t i = 0; i < row.block_table.size(); ++i) {
    const BlockId b = row.block_table[i];
    const int64_t entry = row.first_block + static_cast<int64_t>(i);
    if (b == kNoBlock && entry < unread) continue;
    if (b < 0 || b >= kv.num_blocks) {
      return error(absl::StrFormat("block_table[%d] = %d is outside the cache's %d blocks", entry,
                                   b, kv.num_blocks));
    }
  }
  if (row.sample) {
    if (absl::Status s =
            ValidateSamplingParams(row.sampling, static_cast<int32_t>(model.vocab_size));
        !s.ok()) {
      return error(s.message());
    }
  }
  if (!row.score_tokens.empty()) {
    if (row.score_tokens.size() != row.token_ids.size()) {
      return error(absl::StrFormat("score_tokens has %d entries for %d tokens",
                                   row.score_tokens.size(), row.token_ids.size()));
    }
    for (int32_t t : row.score_tokens) {
      if (t < -1 || t >= model.vocab_size) {
        return error(absl::StrFormat("score_tokens holds %d, outside the vocabulary", t));
      }
    }
  }
  if (row.allowed_tokens != nullptr) {
    if (!row.sample) return error("allowed_tokens is set on a row that does not sample");
    if (row.allowed_tokens->vocab_size() != model.vocab_size) {
      return error(absl::StrFormat("allowed_tokens covers %d tokens; the model has %d",
                                   row.allowed_tokens->vocab_size(), model.vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status RefusePromptScoring(const StepRow& row, std::string_view executor_name) {
  if (row.score_tokens.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrFormat(
      "sequence %d: the %s executor does not score prompt tokens", row.seq_id, executor_name));
}

absl::Status RefuseExtendedSampling(const StepRow& row, std::string_view executor_name) {
  if (row.logit_adjustments == nullptr && !UsesExtendedSampling(row.sampling)) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrFormat("sequence %d: the %s executor does not apply min_p, penalties or logit_bias",
                      row.seq_id, executor_name));
}

absl::Status NoAllowedTokenError(int64_t seq_id) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "sequence %d: the request's constraint allows no token at this point of its output", seq_id));
}

absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv) {
  if (plan.rows.empty()) return absl::InvalidArgumentError("step plan has no rows");
  absl::flat_hash_set<int64_t> seq_ids;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    if (!seq_ids.insert(row.seq_id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("step row %d: sequence %d appears twice in one step", r, row.seq_id));
    }
    if (absl::Status s = ValidateStepRow(row, model, kv); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("step row %d: %s", r, s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::CheckRow(const StepRow& row) const {
  RETURN_IF_ERROR(ValidateStepRow(row, model_config(), kv_spec()));
  return tables_.CheckRow(row, /*released=*/false);
}

absl::Status Executor::AcceptTables(const StepPlan& plan) {
  RETURN_IF_ERROR(tables_.CheckPlan(plan));
  tables_.Apply(plan);
  return absl::OkStatus();
}

absl::Status Executor::Launch(const StepPlan& plan) {
  if (launched_) return absl::FailedPreconditionError("a step is launched and not collected");
  launched_ = Step(plan);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Executor::Collect() {
  if (!launched_) return absl::FailedPreconditionError("no step is launched");
  absl::StatusOr<StepResult> result = std::move(*launched_);
  launched_.reset();
  return result;
}

absl::StatusOr<StepResult> RunStepIsolatingRows(Executor& executor, const StepPlan& plan) {
  IsolatedStep step(&executor);
  RETURN_IF_ERROR(step.Launch(plan));
  return step.Collect();
}

absl::Status IsolatedStep::Launch(const StepPlan& plan) {
  // Releases first: they hold whether or not any row runs, and a row that resumes a released
  // sequence is checked against what it holds then (nothing).
  executor_->ReleaseTables(plan.released);
  seq_ids_.clear();
  checks_.clear();
  seq_ids_.reserve(plan.rows.size());
  checks_.reserve(plan.rows.size());
  bool all_good = true;
  for (const StepRow& row : plan.rows) {
    seq_ids_.push_back(row.seq_id);
    checks_.push_back(executor_->CheckRow(row));
    all_good = all_good && checks_.back().ok();
  }
  if (all_good) {
    any_launched_ = !plan.rows.empty();
    if (!any_launched_) return absl::OkStatus();
    return executor_->Launch(plan);
  }
  good_.rows.clear();
  good_.released.clear();  // applied above
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    if (checks_[r].ok()) good_.rows.push_back(plan.rows[r]);
  }
  any_launched_ = !good_.rows.empty();
  if (!any_launched_) return absl::OkStatus();  // nothing runs; Collect reports every row
  return executor_->Launch(good_);
}

absl::StatusOr<StepResult> IsolatedStep::Collect() {
  StepResult result;  // stays empty when no row was good: nothing ran
  size_t num_good = 0;
  for (const absl::Status& check : checks_) num_good += check.ok() ? 1 : 0;
  if (any_launched_) {
    ASSIGN_OR_RETURN(result, executor_->Collect());
    if (result.rows.size() != num_good) {
      return absl::InternalError(absl::StrFormat("the executor returned %d rows for a step of %d",
                                                 result.rows.size(), num_good));
    }
  }
  if (num_good == checks_.size()) return result;
  std::vector<RowResult> good_rows;
  good_rows.swap(result.rows);
  result.rows.reserve(checks_.size());
  size_t next_good = 0;
  for (size_t r = 0; r < checks_.size(); ++r) {
    if (checks_[r].ok()) {
      result.rows.push_back(std::move(good_rows[next_good++]));
    } else {
      RowResult failed;
      failed.seq_id = seq_ids_[r];
      failed.status = checks_[r];
      result.rows.push_back(std::move(failed));
    }
  }
  return result;
}

}  // namespace convoy
