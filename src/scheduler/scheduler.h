// The dynamic batcher and iteration-level scheduler: pure bookkeeping over requests, sequences and
// KV blocks, with no threads and no clock of its own (every call takes `now`). The engine loop owns
// one and drives it:
//
//   Submit / Cancel (any time between steps)
//   Schedule(now)        -> a StepPlan to run, or the time until which there is nothing to do
//   OnStepResult(r, now) (or OnStepFailed) after the executor ran that plan
//   TakeEvents()         -> token events and final outcomes, in order
//
// With an executor that runs steps asynchronously, the next step can be planned while one is in
// flight (the engine loop does so, engine_loop.h):
//
//   Schedule -> step N launched -> ScheduleAhead(now): step N+1, its decode rows' tokens pending
//   OnStepResult(N) -> CommitAhead(plan N+1, now): pending tokens filled from N, the rows of
//                      sequences that N ended left out, requests that came meanwhile admitted
//                      -> step N+1 launched -> ScheduleAhead ...
//
// Rules (each checked by tests/scheduler):
// - Admission: a bounded queue per priority level (RESOURCE_EXHAUSTED when full), shared fairly
//   between the clients of the level (client_share.h), preempted sequences first; a queue timeout
//   per request, reported through Schedule's wake_at so a caller sleeps exactly until it fires;
//   a request is admitted to the running batch only when the KV blocks of all its tokens fit.
// - Firing (firing_rule.h): an idle engine starts when the batch reaches max_batch_size or a
//   preferred size, or when the oldest request has waited max_queue_delay. In continuous mode a
//   running batch takes new requests at every step boundary; in static mode it takes none until its
//   last member finishes, and its members' final events are held until then.
// - A step: every decoding sequence (one token each), then prompt chunks of running sequences, then
//   new admissions, highest (aged) priority first, at most max_batch_size rows and
//   max_num_batched_tokens padded tokens (rows x longest row); prompt chunks are shortened to fit
//   (chunked prefill). Admissions take the head of the queue first, then within a window prefer
//   those that add the least padding.
// - KV: when decoding sequences need blocks that are not free, running sequences are preempted,
//   lowest priority first and latest admitted first: blocks freed, tokens kept, recomputed later
//   from the head of their queue.
// - Prefix caching (enable_prefix_caching, and per request): a full block of a sequence, once
//   computed, is published under the hash of its tokens chained with the previous block's
//   (kv/block_hash.h). An admission (a re-admission after preemption too) takes every leading
//   block already cached, shared by reference, and its first row starts at the first position
//   not cached; at least the last prompt block is always computed, so the row has a token to
//   sample from and no sequence ever writes a block it shares. Blocks released with known content
//   stay cached until an allocation needs them, least recently released first; the KV admission
//   check counts a request's own cached prefix as available.
// - Shared prefills (prefix caching, continuous batching): a waiting request whose prompt blocks
//   after its cached prefix are being computed by a running sequence (the same tokens after the
//   same prefix, not yet published), for at least as many tokens as it would compute after them,
//   is not admitted until they are published; it then takes them from the cache. So a request's
//   n choices, or requests that arrive together with one long system prompt, compute the prompt
//   once. Candidates behind it are admitted as usual.
// - Sliding window (sliding_window): after each step a running sequence gives back the blocks that
//   lie wholly before its next token's window (kv/block_table.h), so its KV memory stops growing
//   at the window; blocks after one given back are no longer published. Admission still reserves
//   a prompt's (or a resumed sequence's) blocks whole, and a request must fit the cache whole.
// - Plan, then commit: a step's allocations succeed whole or nothing changes.
// - The executor keeps each sequence's block table between steps (executor/block_tables.h): a
//   row carries the entries the executor does not hold yet (all of them for a new or resumed
//   sequence; for a decode row, a block now and then), and a plan names the sequences that ended
//   or were preempted since their last row (StepPlan::released), at the first plan handed out
//   after it.
// - Every accepted request ends with exactly one final event; at the end all blocks are free.
//
// Not thread-safe.
#ifndef CONVOY_SCHEDULER_SCHEDULER_H_
#define CONVOY_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kv/block_allocator.h"
#include "scheduler/batch_policy.h"
#include "scheduler/client_share.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/sequence.h"
#include "scheduler/service_rate.h"
#include "step/step.h"

namespace convoy {

struct ScheduleDecision {
  // The step to run now; then call OnStepResult or OnStepFailed before anything else but
  // Submit, Cancel and TakeEvents.
  std::optional<StepPlan> plan;
  // When there is no plan: the earliest time something changes without new calls (a queue
  // timeout or the queue delay expiring); nullopt: nothing until a new Submit.
  std::optional<absl::Time> wake_at;
};

class Scheduler {
 public:
  // `observer` may be null; it must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options,
                                                           SchedulerObserver* observer = nullptr);

  // Queues a request. RESOURCE_EXHAUSTED when its level's queue is full; INVALID_ARGUMENT for a
  // bad priority, an empty prompt, or one that could never fit the model or the KV cache;
  // ALREADY_EXISTS for an id in use. On error the request is not held and gets no events.
  absl::Status Submit(Request request, absl::Time now);

  // Ends a waiting or running request as cancelled, freeing its queue place and blocks now, or,
  // when its step is in flight, when that step's result arrives. A static batch's member that is
  // complete but held back until its batch ends stays complete. NOT_FOUND when it is not held.
  absl::Status Cancel(RequestId id, absl::Time now);

  // Times out expired requests and plans the next step.
  // REQUIRES: no step in flight and none planned ahead.
  ScheduleDecision Schedule(absl::Time now);

  // Plans the step after the one in flight, before its result: a sequence whose in-flight row
  // samples gets a decode row at the position of that sample, its token kPendingToken; a prompt
  // goes on after its in-flight chunk; waiting requests may be admitted. The step's blocks are
  // reserved now. A sequence with a constraint gets its row at CommitAhead (its next mask needs
  // the token in flight); one that the in-flight step brings to its max_tokens gets none. Nullopt
  // (nothing changed) when that cannot be done without the result: static batching, KV blocks
  // that only a preemption would free, nothing to plan.
  // REQUIRES: a step in flight, none planned ahead.
  std::optional<StepPlan> ScheduleAhead(absl::Time now);
  // After OnStepResult (or OnStepFailed) of the step that was in flight: the step planned ahead,
  // made runnable. Pending tokens become the tokens sampled; rows of sequences that have ended
  // since (a stop, a failure, a cancellation) are left out; constrained sequences get their
  // decode rows; requests waiting now join where the step has room (expired ones time out first).
  // The result is the step in flight from here (then OnStepResult as usual); with no row left,
  // nothing is in flight and Schedule plans as usual. REQUIRES: no step in flight, `plan` the one
  // ScheduleAhead returned.
  StepPlan CommitAhead(StepPlan plan, absl::Time now);
  bool step_planned_ahead() const { return ahead_; }
  // Hands back a plan that has run, so that later plans reuse its storage: in the steady state a
  // step is planned with no allocation per row (its rows' token and block lists keep their
  // capacity).
  void RecyclePlan(StepPlan plan);

  // Applies the in-flight step's result: tokens appended, stop rules applied. A row whose
  // RowResult::status is not OK (left out of the step) ends its request as failed with it.
  // INTERNAL when the result does not match the plan (then the step's requests fail).
  absl::Status OnStepResult(const StepResult& result, absl::Time now);
  // The executor failed the in-flight step: its requests end as failed with `status`.
  void OnStepFailed(const absl::Status& status, absl::Time now);

  // Replaces the batcher's knobs between steps; what is held stays held (queued requests stay
  // queued in their order; their timeouts stay as they were set). When max_batch_size shrinks
  // below the running batch, the excess is preempted (lowest priority, latest admitted first) and
  // resumes later. FAILED_PRECONDITION when a fixed knob changes (CheckFixedKnobsKept) or a step
  // is in flight; INVALID_ARGUMENT for invalid options. On error nothing changes.
  absl::Status Reconfigure(const SchedulerOptions& options);

  // Events since the last call, in the order they happened.
  std::vector<Event> TakeEvents();

  bool step_in_flight() const { return in_flight_; }
  // No request held.
  bool empty() const { return sequences_.empty(); }
  int64_t num_held() const { return static_cast<int64_t>(sequences_.size()); }
  int64_t num_waiting() const;
  int64_t num_waiting(int32_t level) const { return queues_[level - 1].size(); }
  // Waiting at `level` and never started: what the level's max_queue_size bounds (a preempted
  // sequence waits too, but it was admitted already and its place is not a new request's).
  int64_t num_new_waiting(int32_t level) const { return new_waiting_[level - 1]; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  const BlockAllocator& allocator() const { return allocator_; }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerOptions& options() const { return options_; }
  // How fast waiting requests have been starting (service_rate.h), as of the last pass.
  const QueueServiceRate& service_rate() const { return service_rate_; }
  // The level a request's priority resolves to, or INVALID_ARGUMENT.
  absl::StatusOr<int32_t> ResolveLevel(int32_t priority) const {
    return options_.ResolveLevel(priority);
  }

  // Cross-checks queues, running set, blocks and counts (tests).
  absl::Status CheckInvariants() const;

 private:
  struct RowRecord {
    RequestId id;
    int32_t num_tokens;
    bool sample;
    bool decode;
  };
  // The step being planned.
  struct Draft {
    bool ahead = false;  // planned while a step is in flight (ScheduleAhead)
    StepPlan plan;
    std::vector<RowRecord> records;                   // per row of `plan`
    std::vector<std::pair<Sequence*, int32_t>> rows;  // sequence, tokens this step
    int32_t padded_length = 0;
    int64_t real_tokens = 0;
    int32_t blocks_needed = 0;  // beyond what the rows' sequences hold
    int64_t cache_queries = 0;  // prefix cache lookups of this step's admissions, in tokens
    int64_t cache_hits = 0;
  };

  Scheduler(const SchedulerOptions& options, SchedulerObserver* observer);

  void ExpireTimeouts(absl::Time now);
  void PreemptForDecodes(absl::Time now);
  // The running batch is shared between the clients of a level too. UnderShare: the first of
  // the next candidates whose client runs at least two sequences fewer at its level than another
  // client does, and that client's latest admitted sequence that has not yielded before; or nulls.
  // Continuous batching only; nothing while sequences preempted for KV blocks wait.
  std::pair<Sequence*, Sequence*> UnderShare(absl::Time now) const;
  bool BatchFull() const;
  // Moves UnderShare's waiting request to the front of the new ones, so that it takes the next
  // free slot; with `may_preempt`, a full batch frees one: the other client's sequence is
  // preempted and waits right behind it (and never yields again).
  void PromoteUnderShare(absl::Time now, bool may_preempt);
  void Preempt(Sequence* seq);
  // The executor's copy of `seq`'s table is to be dropped: its id goes to the next plan's
  // released list.
  void ReleaseExecutorTable(Sequence* seq);
  // Hands the pending releases to a plan about to be returned.
  void AttachReleases(StepPlan* plan);
  // Adds prompt chunks of running sequences that are not decoding.
  void AddRunningPrefills(absl::Time now, Draft* draft);
  // Whether window[i] would pass over another client's request that its fair share put first.
  static bool PassesFairShare(const std::vector<Sequence*>& window, size_t i);
  // Admits waiting requests, at most `limit`; returns how many.
  // `joining`: into a batch that runs (only those the policy lets join), rather than one that
  // fires.
  int32_t Admit(absl::Time now, int32_t limit, bool joining, Draft* draft);
  // The longest chunk of `seq` the draft can take now, when its first `cached_tokens` uncomputed
  // tokens come from the prefix cache; 0 when no row fits.
  int32_t ChunkThatFits(const Sequence& seq, const Draft& draft, int64_t cached_tokens = 0) const;
  // Prefix caching: the cached blocks of the longest prefix of a waiting sequence's tokens that
  // it may reuse (never its last token's block).
  std::vector<BlockId> CachedPrefix(const Sequence& seq) const;
  // Shared prefills (above): whether `seq`, whose first `cached` blocks are cached, waits for a
  // running sequence to compute and publish the blocks after them.
  bool WaitsForSharedPrefill(const Sequence& seq, size_t cached) const;
  // Publishes the blocks of `seq` that its computed tokens have filled.
  void PublishComputedBlocks(Sequence* seq);
  bool UsesPrefixCache(const Sequence& seq) const {
    return options_.enable_prefix_caching && seq.request.use_prefix_cache;
  }
  // `offset`: tokens past num_computed where the row starts (a row planned ahead of the step in
  // flight); a row that starts at tokens.size() takes the token that step samples
  // (kPendingToken).
  void AddRow(Sequence* seq, int32_t num_tokens, Draft* draft, int64_t offset = 0);
  // An empty draft over recycled storage (RecyclePlan).
  Draft NewDraft();
  // A step about to run: its counters, gauges and the observer's call.
  // Keeps what a prompt-scoring row of `seq` scored (before num_computed counts the row).
  void RecordPromptScores(Sequence* seq, const RowResult& row);
  void CountStep(const std::vector<RowRecord>& records, int64_t cache_queries, int64_t cache_hits);
  // The gauges of `stats` (running, KV blocks, queue depths) and the evictions since the last
  // report.
  void FillGauges(StepStats* stats);
  std::optional<absl::Time> OldestWaitingArrival() const;
  int32_t EffectiveLevel(const Sequence& seq, absl::Time now) const;
  // The waiting sequences in the order they would be admitted (`joining`: those the policy lets
  // join the batch that runs).
  // `skip`: sequences to pass over (null: none).
  std::vector<Sequence*> NextCandidates(
      absl::Time now, size_t max_count, bool joining,
      const absl::flat_hash_set<const Sequence*>* skip = nullptr) const;

  void RemoveFromQueue(Sequence* seq);
  void RemoveFromRunning(Sequence* seq);
  void Finish(Sequence* seq, Outcome outcome, absl::Status status, absl::Time now);
  void EmitFinal(const Event& event);

  SchedulerOptions options_;  // replaced only by Reconfigure
  SchedulerObserver* const observer_;

  BlockAllocator allocator_;
  absl::flat_hash_map<RequestId, std::unique_ptr<Sequence>> sequences_;
  // Per level, index 0 is level 1: preempted sequences first, then new ones in their clients'
  // fair order (share_tag, then arrival).
  std::vector<std::list<Sequence*>> queues_;
  ClientShare client_share_;
  std::vector<int64_t> new_waiting_;  // per level: waiting and never started
  std::vector<Sequence*> running_;
  std::set<std::pair<absl::Time, RequestId>> deadlines_;
  uint64_t next_arrival_order_ = 0;
  uint64_t next_admit_order_ = 0;

  bool in_flight_ = false;
  std::vector<RowRecord> in_flight_rows_;
  // The step planned ahead (ScheduleAhead) until CommitAhead: its rows, as in_flight_rows_, and
  // its admissions' prefix cache lookups and hits, in tokens.
  bool ahead_ = false;
  std::vector<RowRecord> ahead_rows_;
  int64_t ahead_cache_queries_ = 0;
  int64_t ahead_cache_hits_ = 0;
  // Storage of plans that have run (RecyclePlan): rows whose lists keep their capacity, and
  // emptied row vectors.
  std::vector<StepRow> spare_rows_;
  // Sequences whose executor tables are to be dropped, until a plan is handed out (AttachReleases).
  std::vector<int64_t> released_;
  std::vector<std::vector<StepRow>> spare_row_vectors_;

  // Continuous or static: who joins the running batch and when results go out.
  std::unique_ptr<BatchPolicy> policy_;

  std::vector<Event> events_;
  SchedulerStats stats_;
  QueueServiceRate service_rate_;
  int64_t started_this_pass_ = 0;   // waiting requests that started running in this pass
  int64_t evictions_reported_ = 0;  // allocator evictions already in a StepStats
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_SCHEDULER_H_
