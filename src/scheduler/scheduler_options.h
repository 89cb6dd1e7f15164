// The scheduler's knobs as plain data. Filled from the config file (server_config.h) or directly
// by tests. See proto/convoy/v1/server_config.proto for what each knob means to an operator.
//
// This struct owns the scheduler's defaults (the initializers below; the config loader fills an
// unset field from them) and its rules (Validate; the config loader runs the same check and points
// at the line of the field it names).
#ifndef CONVOY_SCHEDULER_SCHEDULER_OPTIONS_H_
#define CONVOY_SCHEDULER_SCHEDULER_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace convoy {

enum class BatchingMode {
  kContinuous,  // iteration-level: sequences join and leave between steps (Orca)
  kStatic,      // a batch runs until its longest member finishes; no one joins it
};

struct QueuePolicy {
  int32_t max_queue_size = 1024;  // new requests waiting at the level; 0: unbounded
  absl::Duration default_timeout = absl::InfiniteDuration();
};

// The first knob that breaks a rule: its name as a member of SchedulerOptions ("max_batch_size",
// "preferred_batch_sizes", "queue_policies.max_queue_size", ...), the element of a list or the
// priority level it concerns (`index`: the element of preferred_batch_sizes; `level`: 0 for
// default_queue_policy, else the level of queue_policies), and the reason, which names the knob.
struct InvalidOption {
  std::string field;
  int index = -1;
  int32_t level = 0;
  std::string reason;
};

struct SchedulerOptions {
  BatchingMode mode = BatchingMode::kContinuous;
  int32_t max_batch_size = 32;
  // 0: an idle engine never waits for a batch to fill.
  absl::Duration max_queue_delay = absl::ZeroDuration();
  std::vector<int32_t> preferred_batch_sizes;
  // Rows x the longest row of a step (padding included); at least max_batch_size.
  int64_t max_num_batched_tokens = 2048;
  // Whether the executor computes padding slots (the engine loop asks the executor). When it does
  // not, the token budget counts real tokens only and a step's rows need not share a length.
  bool budget_counts_padding = true;
  int32_t prefill_chunk_size = 512;
  // Waiting requests looked at together to group similar lengths; 1: strict order.
  int32_t length_grouping_window = 16;

  int32_t priority_levels = 1;
  int32_t default_priority_level = 1;
  // One per level (index 0 is level 1). Empty: every level uses `default_queue_policy`.
  std::vector<QueuePolicy> queue_policies;
  QueuePolicy default_queue_policy;
  // A waiting request ranks one level higher per interval waited; InfiniteDuration(): no aging.
  absl::Duration priority_aging = absl::Seconds(1);
  // Refuse at arrival (RESOURCE_EXHAUSTED) a request whose expected wait in the queue exceeds its
  // queue timeout: the requests ahead of it over the rate the queue has been served at while
  // requests waited (service_rate.h). Off: it waits, and times out.
  bool refuse_expected_timeouts = false;

  int32_t block_size = 16;
  int32_t num_blocks = 0;
  // Reuse the KV blocks of prompt prefixes already computed (see scheduler.h).
  bool enable_prefix_caching = true;
  int32_t default_max_tokens = 256;
  // Prompt plus generated tokens at most (the model's context); 0: no limit.
  int64_t max_model_len = 0;
  // The model's sliding window through every layer (ModelConfig::KvWindow; 0: none): a running
  // sequence gives back the KV blocks wholly before its next token's window (scheduler.h).
  int64_t sliding_window = 0;

  const QueuePolicy& queue_policy(int32_t level) const {
    return queue_policies.empty() ? default_queue_policy : queue_policies[level - 1];
  }
  // The level a request's priority resolves to (0: default_priority_level), or INVALID_ARGUMENT.
  absl::StatusOr<int32_t> ResolveLevel(int32_t priority) const;
  // Checks every knob and their relations: the first that breaks a rule, or nullopt.
  std::optional<InvalidOption> FindInvalid() const;
  // FindInvalid as a status: INVALID_ARGUMENT with the reason, which names the field.
  absl::Status Validate() const;
  // The knobs that cannot change while requests are held (Scheduler::Reconfigure): mode,
  // priority_levels, budget_counts_padding, block_size, num_blocks, max_model_len,
  // enable_prefix_caching. OK when
  // `next` keeps every one of them; otherwise FAILED_PRECONDITION naming each that differs.
  absl::Status CheckFixedKnobsKept(const SchedulerOptions& next) const;
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_SCHEDULER_OPTIONS_H_
