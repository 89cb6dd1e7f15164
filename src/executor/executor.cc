#include "executor/executor.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"

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
  const int64_t capacity = static_cast<int64_t>(row.block_table.size()) * kv.block_size;
  if (capacity < end) {
    return error(absl::StrFormat("block_table holds %d tokens, the row needs %d", capacity, end));
  }
  for (size_t i = 0; i < row.block_table.size(); ++i) {
    const BlockId b = row.block_table[i];
    if (b < 0 || b >= kv.num_blocks) {
      return error(absl::StrFormat("block_table[%d] = %d is outside the cache's %d blocks", i, b,
                                   kv.num_blocks));
    }
  }
  if (row.sample) {
    if (absl::Status s =
            ValidateSamplingParams(row.sampling, static_cast<int32_t>(model.vocab_size));
        !s.ok()) {
      return error(s.message());
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

absl::StatusOr<StepResult> RunStepIsolatingRows(Executor& executor, const StepPlan& plan) {
  std::vector<absl::Status> checks;
  checks.reserve(plan.rows.size());
  bool all_good = true;
  for (const StepRow& row : plan.rows) {
    checks.push_back(executor.CheckRow(row));
    all_good = all_good && checks.back().ok();
  }
  if (all_good) return executor.Step(plan);

  StepPlan good;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    if (checks[r].ok()) good.rows.push_back(plan.rows[r]);
  }
  StepResult result;  // stays empty when no row is good: nothing runs
  if (!good.rows.empty()) {
    ASSIGN_OR_RETURN(result, executor.Step(good));
    if (result.rows.size() != good.rows.size()) {
      return absl::InternalError(absl::StrFormat("the executor returned %d rows for a step of %d",
                                                 result.rows.size(), good.rows.size()));
    }
  }
  std::vector<RowResult> good_rows;
  good_rows.swap(result.rows);
  result.rows.reserve(plan.rows.size());
  size_t next_good = 0;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    if (checks[r].ok()) {
      result.rows.push_back(std::move(good_rows[next_good++]));
    } else {
      RowResult failed;
      failed.seq_id = plan.rows[r].seq_id;
      failed.status = checks[r];
      result.rows.push_back(std::move(failed));
    }
  }
  return result;
}

}  // namespace convoy
