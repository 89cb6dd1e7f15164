#include "executor/block_tables.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace convoy {

int32_t BlockTables::held(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  return it == tables_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

absl::Status BlockTables::CheckRow(const StepRow& row, bool released) const {
  const int32_t held_entries = released ? 0 : held(row.seq_id);
  if (row.first_block < 0 || row.first_block > held_entries) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: first_block %d, but the executor holds %d entries of its block table%s",
        row.seq_id, row.first_block, held_entries, released ? " (the same plan releases it)" : ""));
  }
  return absl::OkStatus();
}

absl::Status BlockTables::CheckPlan(const StepPlan& plan) const {
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const StepRow& row = plan.rows[r];
    // Releases are few (the sequences that ended since the last step), so a scan beats a set.
    const bool released =
        row.first_block > 0 &&
        std::find(plan.released.begin(), plan.released.end(), row.seq_id) != plan.released.end();
    if (absl::Status s = CheckRow(row, released); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("step row %d: %s", r, s.message()));
    }
  }
  return absl::OkStatus();
}

void BlockTables::Release(absl::Span<const int64_t> seq_ids) {
  for (int64_t id : seq_ids) tables_.erase(id);
}

void BlockTables::Apply(const StepPlan& plan) {
  Release(plan.released);
  for (const StepRow& row : plan.rows) {
    std::vector<BlockId>& table = tables_[row.seq_id];
    // Capacity is kept: a sequence's table grows by a block now and then, with no allocation in
    // most steps.
    table.resize(row.first_block);
    table.insert(table.end(), row.block_table.begin(), row.block_table.end());
  }
}

absl::Span<const BlockId> BlockTables::table(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return {};
  return it->second;
}

}  // namespace convoy
