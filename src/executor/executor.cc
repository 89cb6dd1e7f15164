#include "executor/executor.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"

namespace convoy {

absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv) {
  if (plan.rows.empty()) return absl::InvalidArgumentError("step plan has no rows");
  absl::flat_hash_set<int64_t> seq_ids;
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrFormat("step row %d (sequence %d): %s", r, row.seq_id, what));
    };
    if (!seq_ids.insert(row.seq_id).second) return error("sequence appears twice in one step");
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
      RETURN_IF_ERROR(ValidateSamplingParams(row.sampling, static_cast<int32_t>(model.vocab_size)));
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy
