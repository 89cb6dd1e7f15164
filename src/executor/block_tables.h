// The block tables of the sequences an executor holds between steps (the persistent batch). A plan
// sends a sequence's table whole once (a new or resumed sequence: StepRow::first_block 0) and then
// only the entries that changed since its last row: the blocks appended for its new tokens, and,
// under a sliding window, the entries given back (kNoBlock) from the first one that changed.
// StepPlan::released names the sequences that have ended or were preempted since their last row;
// their tables are dropped.
//
// Who owns what: the scheduler owns the true table of every sequence (kv/block_table.h) and knows
// how many of its entries the executor holds (Sequence::executor_entries); this copy belongs to
// the executor. It changes only when a plan is accepted (Executor::AcceptTables, on the thread that
// launches the step, with no step in flight) and is read by the step that plan launches, on
// whatever thread or stream runs it, until Collect returns.
#ifndef CONVOY_EXECUTOR_BLOCK_TABLES_H_
#define CONVOY_EXECUTOR_BLOCK_TABLES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kv/block_allocator.h"
#include "step/step.h"

namespace convoy {

class BlockTables {
 public:
  // Entries held for `seq_id`; 0 when none.
  int32_t held(int64_t seq_id) const;
  // How many sequences have a table here.
  size_t num_sequences() const { return tables_.size(); }

  // INVALID_ARGUMENT naming the sequence when the row's entries do not continue what is held
  // (first_block beyond the held entries); `released`: its sequence is dropped by the same plan,
  // so it holds nothing.
  absl::Status CheckRow(const StepRow& row, bool released) const;
  // Every row of `plan` (CheckRow), each against what it would hold after the plan's releases;
  // INVALID_ARGUMENT names the row.
  absl::Status CheckPlan(const StepPlan& plan) const;

  // Drops the tables of `seq_ids` (ids not held are ignored).
  void Release(absl::Span<const int64_t> seq_ids);
  // The plan's releases, then each row's entries from first_block on.
  // REQUIRES: CheckPlan(plan) is OK.
  void Apply(const StepPlan& plan);

  // The table of `seq_id` as the last plan left it; empty when none is held. Valid until the next
  // Release or Apply.
  absl::Span<const BlockId> table(int64_t seq_id) const;

 private:
  absl::flat_hash_map<int64_t, std::vector<BlockId>> tables_;
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_BLOCK_TABLES_H_
