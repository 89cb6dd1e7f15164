#include "scheduler/scheduler_options.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace convoy {

absl::StatusOr<int32_t> SchedulerOptions::ResolveLevel(int32_t priority) const {
  if (priority == 0) return default_priority_level;
  if (priority < 0 || priority > priority_levels) {
    return absl::InvalidArgumentError(absl::StrCat("priority ", priority, " is outside 1..",
                                                   priority_levels, " (0 for the default level)"));
  }
  return priority;
}

absl::Status SchedulerOptions::CheckFixedKnobsKept(const SchedulerOptions& next) const {
  std::vector<std::string> changed;
  if (mode != next.mode) changed.push_back("mode");
  if (priority_levels != next.priority_levels) changed.push_back("priority_levels");
  if (budget_counts_padding != next.budget_counts_padding) {
    changed.push_back("budget_counts_padding");
  }
  if (block_size != next.block_size) changed.push_back("block_size");
  if (num_blocks != next.num_blocks) changed.push_back("num_blocks");
  if (max_model_len != next.max_model_len) changed.push_back("max_model_len");
  if (enable_prefix_caching != next.enable_prefix_caching) {
    changed.push_back("enable_prefix_caching");
  }
  if (changed.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot change while serving (restart instead): ", absl::StrJoin(changed, ", ")));
}

std::optional<InvalidOption> SchedulerOptions::FindInvalid() const {
  auto bad = [](const char* field, auto&&... parts) {
    return InvalidOption{field, -1, 0, absl::StrCat(parts...)};
  };
  if (max_batch_size < 1) {
    return bad("max_batch_size", "max_batch_size must be at least 1, got ", max_batch_size);
  }
  if (max_queue_delay < absl::ZeroDuration()) {
    return bad("max_queue_delay", "max_queue_delay must not be negative");
  }
  for (size_t i = 0; i < preferred_batch_sizes.size(); ++i) {
    const int32_t p = preferred_batch_sizes[i];
    std::optional<InvalidOption> error;
    if (p < 1) error = bad("preferred_batch_sizes", "preferred_batch_size must be at least 1");
    if (p > max_batch_size) {
      error = bad("preferred_batch_sizes", "preferred_batch_size ", p, " exceeds max_batch_size ",
                  max_batch_size);
    }
    if (error) {
      error->index = static_cast<int>(i);
      return error;
    }
  }
  if (max_num_batched_tokens < max_batch_size) {
    return bad("max_num_batched_tokens", "max_num_batched_tokens ", max_num_batched_tokens,
               " is less than max_batch_size ", max_batch_size,
               " (each running sequence needs a token per step)");
  }
  if (prefill_chunk_size < 1) {
    return bad("prefill_chunk_size", "prefill_chunk_size must be at least 1");
  }
  if (length_grouping_window < 1) {
    return bad("length_grouping_window",
               "length_grouping_window must be at least 1 (1: strict order)");
  }
  if (priority_levels < 1) {
    return bad("priority_levels", "priority_levels must be at least 1, got ", priority_levels);
  }
  if (default_priority_level < 1 || default_priority_level > priority_levels) {
    return bad("default_priority_level", "default_priority_level ", default_priority_level,
               " is outside 1..priority_levels (", priority_levels, ")");
  }
  if (!queue_policies.empty() && static_cast<int32_t>(queue_policies.size()) != priority_levels) {
    return bad("queue_policies", "queue_policies has ", queue_policies.size(), " entries for ",
               priority_levels, " priority levels");
  }
  auto check_policy = [&](const QueuePolicy& policy, int32_t level) {
    std::optional<InvalidOption> error;
    if (policy.max_queue_size < 0) {
      error = bad("queue_policies.max_queue_size", "max_queue_size must not be negative");
    } else if (policy.default_timeout <= absl::ZeroDuration()) {
      error = bad("queue_policies.default_timeout",
                  "default_timeout must be positive (InfiniteDuration for none)");
    }
    if (error) error->level = level;
    return error;
  };
  if (auto error = check_policy(default_queue_policy, 0)) return error;
  for (size_t i = 0; i < queue_policies.size(); ++i) {
    if (auto error = check_policy(queue_policies[i], static_cast<int32_t>(i) + 1)) return error;
  }
  if (priority_aging <= absl::ZeroDuration()) {
    return bad("priority_aging", "priority_aging must be positive (InfiniteDuration for none)");
  }
  if (block_size < 1) return bad("block_size", "block_size must be at least 1, got ", block_size);
  if (num_blocks < 1) return bad("num_blocks", "num_blocks must be at least 1, got ", num_blocks);
  if (default_max_tokens < 1) {
    return bad("default_max_tokens", "max_tokens must be at least 1, got ", default_max_tokens);
  }
  if (max_model_len < 0) return bad("max_model_len", "max_model_len must not be negative");
  if (sliding_window < 0) return bad("sliding_window", "sliding_window must not be negative");
  return std::nullopt;
}

absl::Status SchedulerOptions::Validate() const {
  std::optional<InvalidOption> error = FindInvalid();
  if (!error) return absl::OkStatus();
  if (error->level > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(error->reason, " (priority level ", error->level, ")"));
  }
  return absl::InvalidArgumentError(error->reason);
}

}  // namespace convoy
