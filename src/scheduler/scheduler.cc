#include "scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "scheduler/firing_rule.h"

namespace convoy {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options,
                                                             SchedulerObserver* observer) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Scheduler>(new Scheduler(options, observer));
}

Scheduler::Scheduler(const SchedulerOptions& options, SchedulerObserver* observer)
    : options_(options),
      observer_(observer),
      allocator_(options.num_blocks),
      queues_(options.priority_levels),
      client_share_(options.priority_levels),
      new_waiting_(options.priority_levels, 0),
      policy_(BatchPolicy::Create(options.mode)) {
  running_.reserve(options.max_batch_size);
}

absl::Status Scheduler::Reconfigure(const SchedulerOptions& options) {
  if (in_flight_ || ahead_) {
    return absl::FailedPreconditionError("a step is in flight or planned ahead");
  }
  RETURN_IF_ERROR(options_.CheckFixedKnobsKept(options));
  RETURN_IF_ERROR(options.Validate());
  options_ = options;
  while (static_cast<int32_t>(running_.size()) > options_.max_batch_size) {
    // As PreemptForDecodes: the lowest priority, then the latest admitted.
    auto victim = std::max_element(running_.begin(), running_.end(), [](Sequence* a, Sequence* b) {
      return std::tie(a->level, a->admit_order) < std::tie(b->level, b->admit_order);
    });
    Preempt(*victim);
  }
  stats_.largest_step_rows_since_reconfigure = 0;
  return absl::OkStatus();
}

int64_t Scheduler::num_waiting() const {
  int64_t n = 0;
  for (const auto& queue : queues_) n += static_cast<int64_t>(queue.size());
  return n;
}

absl::Status Scheduler::Submit(Request request, absl::Time now) {
  auto reject = [&](RejectReason reason, absl::Status status) {
    ++stats_.rejections[static_cast<int>(reason)];
    if (observer_ != nullptr) observer_->OnRejected(reason);
    return status;
  };
  auto invalid = [&](auto&&... parts) {
    return reject(RejectReason::kInvalidArgument,
                  absl::InvalidArgumentError(absl::StrCat("request ", request.id, ": ", parts...)));
  };
  if (sequences_.contains(request.id)) {
    return reject(RejectReason::kDuplicateId,
                  absl::AlreadyExistsError(absl::StrCat("request id ", request.id, " is in use")));
  }
  absl::StatusOr<int32_t> level = ResolveLevel(request.priority);
  if (!level.ok()) return invalid(level.status().message());
  if (request.prompt_tokens.empty()) return invalid("the prompt is empty");
  if (request.max_tokens < 0) return invalid("max_tokens ", request.max_tokens, " is negative");
  if (request.timeout < absl::ZeroDuration()) return invalid("the timeout is negative");
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  const int32_t max_tokens =
      request.max_tokens == 0 ? options_.default_max_tokens : request.max_tokens;
  int64_t max_len = prompt_len + max_tokens;
  if (options_.max_model_len > 0) {
    if (prompt_len >= options_.max_model_len) {
      return invalid("the prompt has ", prompt_len, " tokens; the model takes at most ",
                     options_.max_model_len - 1, " before generating");
    }
    max_len = std::min<int64_t>(max_len, options_.max_model_len);
  }
  const int64_t blocks = CeilDiv(max_len, options_.block_size);
  if (blocks > options_.num_blocks) {
    return invalid(max_len, " tokens need ", blocks, " KV blocks; the cache has ",
                   options_.num_blocks);
  }
  const QueuePolicy& policy = options_.queue_policy(*level);
  if (policy.max_queue_size > 0 && new_waiting_[*level - 1] >= policy.max_queue_size) {
    return reject(RejectReason::kQueueFull,
                  absl::ResourceExhaustedError(absl::StrCat(
                      "the queue of priority level ", *level, " is full (max_queue_size ",
                      policy.max_queue_size, "); retry later")));
  }

  auto seq = std::make_unique<Sequence>(std::move(request), options_.block_size);
  seq->level = *level;
  seq->max_tokens = max_tokens;
  seq->arrival = now;
  seq->arrival_order = next_arrival_order_++;
  seq->tokens = seq->request.prompt_tokens;
  seq->prompt_len = prompt_len;
  if (UsesPrefixCache(*seq)) {
    ExtendBlockHashes(seq->tokens, options_.block_size, &seq->block_hashes);
  }
  const absl::Duration timeout =
      seq->request.timeout == absl::ZeroDuration() ? policy.default_timeout : seq->request.timeout;
  if (timeout != absl::InfiniteDuration()) {
    seq->deadline = now + timeout;
    deadlines_.emplace(*seq->deadline, seq->request.id);
  }
  // After the preempted sequences and every new one its client's fair share puts before it.
  auto& queue = queues_[seq->level - 1];
  // Waiting requests are in tag order behind the preempted ones (started) at the front.
  auto first_new =
      std::find_if(queue.begin(), queue.end(), [](const Sequence* s) { return !s->started; });
  seq->share_tag = client_share_.Arrive(
      seq->level, seq->request.client,
      first_new == queue.end() ? std::nullopt : std::optional<uint64_t>((*first_new)->share_tag));
  auto pos = queue.end();
  while (pos != queue.begin() && !(*std::prev(pos))->started &&
         (*std::prev(pos))->share_tag > seq->share_tag) {
    --pos;
  }
  seq->queue_pos = queue.insert(pos, seq.get());
  ++new_waiting_[seq->level - 1];
  const RequestId id = seq->request.id;
  sequences_.emplace(id, std::move(seq));
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(RequestId id, absl::Time now) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    // A static batch's member that is complete but not yet returned: nothing left to cancel.
    if (policy_->Holds(id)) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat("request ", id, " is not held"));
  }
  Sequence* seq = it->second.get();
  if (seq->in_flight) {
    seq->cancel_requested = true;
    return absl::OkStatus();
  }
  Finish(seq, Outcome::kCancelled, absl::CancelledError("cancelled"), now);
  return absl::OkStatus();
}

void Scheduler::ExpireTimeouts(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    auto [deadline, id] = *deadlines_.begin();
    Sequence* seq = sequences_.at(id).get();
    Finish(seq, Outcome::kTimedOut,
           absl::DeadlineExceededError(absl::StrCat("waited in the queue for ",
                                                    absl::FormatDuration(now - seq->arrival),
                                                    ", past its timeout")),
           now);
  }
}

int32_t Scheduler::EffectiveLevel(const Sequence& seq, absl::Time now) const {
  if (options_.priority_aging == absl::InfiniteDuration() || now <= seq.arrival) return seq.level;
  absl::Duration remainder;
  const int64_t boost = absl::IDivDuration(now - seq.arrival, options_.priority_aging, &remainder);
  return static_cast<int32_t>(std::max<int64_t>(1, seq.level - boost));
}

std::vector<Sequence*> Scheduler::NextCandidates(
    absl::Time now, size_t max_count, bool joining,
    const absl::flat_hash_set<const Sequence*>* skip) const {
  std::vector<std::list<Sequence*>::const_iterator> heads;
  heads.reserve(queues_.size());
  for (const auto& queue : queues_) heads.push_back(queue.begin());
  std::vector<Sequence*> out;
  while (out.size() < max_count) {
    int best = -1;
    std::tuple<int32_t, uint64_t> best_key;
    for (size_t l = 0; l < queues_.size(); ++l) {
      while (skip != nullptr && heads[l] != queues_[l].end() && skip->contains(*heads[l])) {
        ++heads[l];
      }
      if (heads[l] == queues_[l].end()) continue;
      const Sequence& seq = **heads[l];
      // A static batch that runs takes back only its preempted members (at the queue heads).
      if (joining && !policy_->MayJoin(seq)) continue;
      std::tuple<int32_t, uint64_t> key{EffectiveLevel(seq, now), seq.arrival_order};
      if (best < 0 || key < best_key) {
        best = static_cast<int>(l);
        best_key = key;
      }
    }
    if (best < 0) break;
    out.push_back(*heads[best]);
    ++heads[best];
  }
  return out;
}

std::optional<absl::Time> Scheduler::OldestWaitingArrival() const {
  std::optional<absl::Time> oldest;
  for (const auto& queue : queues_) {
    // Fair order is not arrival order: every waiting sequence is looked at.
    for (const Sequence* seq : queue) {
      if (!oldest || seq->arrival < *oldest) oldest = seq->arrival;
    }
  }
  return oldest;
}

int32_t Scheduler::ChunkThatFits(const Sequence& seq, const Draft& draft,
                                 int64_t cached_tokens) const {
  const int64_t rows = static_cast<int64_t>(draft.rows.size()) + 1;
  if (rows > options_.max_batch_size) return 0;
  int64_t cap;
  if (options_.budget_counts_padding) {
    if (rows * draft.padded_length > options_.max_num_batched_tokens) return 0;
    cap = options_.max_num_batched_tokens / rows;
  } else {
    cap = options_.max_num_batched_tokens - draft.real_tokens;
    if (cap <= 0) return 0;
  }
  return static_cast<int32_t>(
      std::min({seq.num_uncomputed() - cached_tokens, int64_t{options_.prefill_chunk_size}, cap}));
}

std::vector<BlockId> Scheduler::CachedPrefix(const Sequence& seq) const {
  std::vector<BlockId> cached;
  if (!UsesPrefixCache(seq)) return cached;
  // The block holding the last token is always computed: the row must end at it to sample, and
  // it must be the sequence's own to be written.
  const size_t limit = std::min(seq.block_hashes.size(),
                                (seq.tokens.size() - 1) / static_cast<size_t>(options_.block_size));
  const size_t block_size = static_cast<size_t>(options_.block_size);
  for (size_t i = 0; i < limit; ++i) {
    // The hash finds a block; the allocator then checks its tokens and its parent.
    const std::optional<BlockId> block = allocator_.Lookup(
        seq.block_hashes[i], absl::MakeConstSpan(seq.tokens).subspan(i * block_size, block_size),
        i == 0 ? std::nullopt : std::optional<BlockId>(cached.back()));
    if (!block) break;
    cached.push_back(*block);
  }
  return cached;
}

bool Scheduler::WaitsForSharedPrefill(const Sequence& seq, size_t cached) const {
  if (options_.mode != BatchingMode::kContinuous || !UsesPrefixCache(seq)) return false;
  // CachedPrefix's limit: the last token's block is the sequence's own.
  const size_t limit = std::min(seq.block_hashes.size(),
                                (seq.tokens.size() - 1) / static_cast<size_t>(options_.block_size));
  if (cached >= limit) return false;
  // The longest run of blocks from `cached` on that one running sequence holds unpublished. Block
  // hashes chain their prefix, so equal hashes at the same index are the same tokens after the
  // same prefix (a collision only delays this request: the cache checks tokens when it is read).
  size_t longest = 0;
  for (const Sequence* other : running_) {
    if (other == &seq || !UsesPrefixCache(*other) ||
        static_cast<size_t>(other->num_published) > cached) {
      continue;
    }
    const size_t end = std::min(limit, other->block_hashes.size());
    size_t i = cached;
    while (i < end && other->block_hashes[i] == seq.block_hashes[i]) ++i;
    longest = std::max(longest, i - cached);
  }
  if (longest == 0) return false;
  const int64_t shared = static_cast<int64_t>(longest) * options_.block_size;
  const int64_t rest = static_cast<int64_t>(seq.tokens.size()) -
                       static_cast<int64_t>(cached + longest) * options_.block_size;
  return shared >= rest;
}

void Scheduler::PublishComputedBlocks(Sequence* seq) {
  if (!UsesPrefixCache(*seq)) return;
  ExtendBlockHashes(seq->tokens, options_.block_size, &seq->block_hashes);
  const auto& blocks = seq->blocks.blocks();
  const int64_t full = seq->num_computed / options_.block_size;
  const size_t block_size = static_cast<size_t>(options_.block_size);
  for (; seq->num_published < full; ++seq->num_published) {
    // False when another sequence computed the same content first (or its parent block stayed
    // private, or was given back under a sliding window: kNoBlock): this block then stays
    // private and is freed, not cached, when released.
    const size_t i = static_cast<size_t>(seq->num_published);
    allocator_.Publish(blocks[i], seq->block_hashes[i],
                       absl::MakeConstSpan(seq->tokens).subspan(i * block_size, block_size),
                       i == 0 ? std::nullopt : std::optional<BlockId>(blocks[i - 1]));
  }
}

void Scheduler::AddRow(Sequence* seq, int32_t num_tokens, Draft* draft, int64_t offset) {
  const int64_t start = seq->num_computed + offset;
  const int64_t end = start + num_tokens;
  const int64_t known = static_cast<int64_t>(seq->tokens.size());
  const bool pending = start >= known;  // the token the step in flight samples
  StepRow row;
  if (!spare_rows_.empty()) {  // its lists keep their capacity
    row = std::move(spare_rows_.back());
    spare_rows_.pop_back();
  }
  row.seq_id = seq->request.id;
  if (pending) {
    row.token_ids.assign(1, kPendingToken);
  } else {
    row.token_ids.assign(seq->tokens.begin() + start, seq->tokens.begin() + end);
  }
  row.start_pos = static_cast<int32_t>(start);
  // Only the entries the executor does not hold yet (its copy from this sequence's earlier rows).
  const auto& blocks = seq->blocks.blocks();
  const int32_t needed = static_cast<int32_t>(CeilDiv(end, options_.block_size));
  row.first_block = std::min(seq->executor_entries, needed);
  row.block_table.assign(blocks.begin() + row.first_block, blocks.begin() + needed);
  seq->executor_entries = needed;
  row.sample = end >= known;
  row.sampling = seq->request.sampling;
  row.sample_index = seq->num_generated() + (pending ? 1 : 0);
  row.return_logits = false;
  row.score_tokens.clear();
  if (seq->request.score_prompt && seq->num_generated() == 0 && !pending) {
    // Position p's logits score prompt token p + 1; the last prompt position's sample instead.
    for (int64_t p = start; p < end; ++p) {
      row.score_tokens.push_back(p + 1 < seq->prompt_len ? seq->tokens[p + 1] : -1);
    }
  }
  row.allowed_tokens = row.sample ? seq->request.constraint : nullptr;
  row.logit_adjustments = row.sample ? seq->request.logit_adjustments : nullptr;
  draft->plan.rows.push_back(std::move(row));
  draft->rows.emplace_back(seq, num_tokens);
  draft->records.push_back({seq->request.id, num_tokens, end >= known, pending || seq->decoding()});
  draft->padded_length = std::max(draft->padded_length, num_tokens);
  draft->real_tokens += num_tokens;
  if (draft->ahead) {
    seq->ahead = true;
  } else {
    seq->in_flight = true;
    seq->in_flight_tokens = num_tokens;
  }
}

void Scheduler::ReleaseExecutorTable(Sequence* seq) {
  if (seq->executor_entries == 0) return;
  released_.push_back(seq->request.id);
  seq->executor_entries = 0;
}

void Scheduler::AttachReleases(StepPlan* plan) {
  plan->released.clear();
  plan->released.swap(released_);  // the plan's old list, emptied, takes the next releases
}

void Scheduler::Preempt(Sequence* seq) {
  ReleaseExecutorTable(seq);
  seq->blocks.ReleaseAll(&allocator_);
  seq->num_computed = 0;
  seq->num_published = 0;
  RemoveFromRunning(seq);
  seq->state = SequenceState::kWaiting;
  auto& queue = queues_[seq->level - 1];
  seq->queue_pos = queue.insert(queue.begin(), seq);
  ++stats_.preemptions;
  if (observer_ != nullptr) observer_->OnPreempted(seq->request.id);
}

void Scheduler::PreemptForDecodes(absl::Time /*now*/) {
  auto decode_need = [&](const Sequence& seq) -> int64_t {
    return seq.decoding() ? seq.blocks.BlocksNeeded(static_cast<int64_t>(seq.tokens.size())) : 0;
  };
  int64_t need = 0;
  for (const Sequence* seq : running_) need += decode_need(*seq);
  while (need > allocator_.num_free()) {
    // The lowest priority, then the latest admitted.
    auto victim = std::max_element(running_.begin(), running_.end(), [](Sequence* a, Sequence* b) {
      return std::tie(a->level, a->admit_order) < std::tie(b->level, b->admit_order);
    });
    need -= decode_need(**victim);
    Preempt(*victim);
  }
}

std::pair<Sequence*, Sequence*> Scheduler::UnderShare(absl::Time now) const {
  if (options_.mode != BatchingMode::kContinuous || running_.empty()) return {nullptr, nullptr};
  const std::vector<Sequence*> window =
      NextCandidates(now, static_cast<size_t>(options_.length_grouping_window), true);
  if (window.empty()) return {nullptr, nullptr};
  // The running sequences of each (level, client), counted once; then, per running sequence, its
  // client's count, so that the loops below compare integers (this runs every step).
  absl::flat_hash_map<std::pair<int32_t, std::string_view>, int32_t> running_of;
  for (const Sequence* seq : running_) ++running_of[{seq->level, seq->request.client}];
  std::vector<int32_t> count_of(running_.size());
  for (size_t i = 0; i < running_.size(); ++i) {
    count_of[i] = running_of[{running_[i]->level, running_[i]->request.client}];
  }
  std::vector<const Sequence*> tried;  // candidates whose client found no one over its share
  for (Sequence* waiting : window) {
    if (waiting->started && !waiting->yielded) break;  // preempted for KV blocks: they go first
    if (waiting->started) continue;                    // yielded: its client is over its share
    const bool seen = std::any_of(tried.begin(), tried.end(), [&](const Sequence* t) {
      return t->level == waiting->level && t->request.client == waiting->request.client;
    });
    if (seen) continue;
    auto own = running_of.find({waiting->level, waiting->request.client});
    Sequence* yields = nullptr;
    int32_t most = (own == running_of.end() ? 0 : own->second) + 1;
    for (size_t i = 0; i < running_.size(); ++i) {
      Sequence* seq = running_[i];
      if (count_of[i] < most || seq->level != waiting->level || seq->yielded) continue;
      if (count_of[i] > most ||
          (yields != nullptr && seq->request.client == yields->request.client &&
           seq->admit_order > yields->admit_order)) {
        most = count_of[i];
        yields = seq;
      }
    }
    if (yields != nullptr) return {waiting, yields};
    tried.push_back(waiting);
  }
  return {nullptr, nullptr};
}

bool Scheduler::BatchFull() const {
  return static_cast<int32_t>(running_.size()) >= options_.max_batch_size;
}

void Scheduler::PromoteUnderShare(absl::Time now, bool may_preempt) {
  const auto [waiting, yields] = UnderShare(now);
  if (waiting == nullptr) return;
  const bool preempt = BatchFull();
  if (preempt && !may_preempt) return;
  auto& queue = queues_[waiting->level - 1];
  if (preempt) {
    Preempt(yields);
    yields->yielded = true;
    queue.erase(yields->queue_pos);
  }
  // The waiting request goes first after the sequences preempted for KV blocks (its client is
  // under its share: ahead of other yielded ones and of the new ones), the yielding one right
  // after it.
  queue.erase(waiting->queue_pos);
  auto first = std::find_if(queue.begin(), queue.end(),
                            [](const Sequence* s) { return !s->started || s->yielded; });
  waiting->queue_pos = queue.insert(first, waiting);
  if (preempt) yields->queue_pos = queue.insert(std::next(waiting->queue_pos), yields);
}

void Scheduler::AddRunningPrefills(absl::Time now, Draft* draft) {
  std::vector<Sequence*> prefills;
  for (Sequence* seq : running_) {
    if (!seq->decoding() && !seq->in_flight) prefills.push_back(seq);
  }
  std::sort(prefills.begin(), prefills.end(), [&](Sequence* a, Sequence* b) {
    return std::make_tuple(EffectiveLevel(*a, now), a->admit_order) <
           std::make_tuple(EffectiveLevel(*b, now), b->admit_order);
  });
  for (Sequence* seq : prefills) {
    const int32_t chunk = ChunkThatFits(*seq, *draft);
    if (chunk == 0) break;
    AddRow(seq, chunk, draft);
  }
}

// Whether starting window[i] before the candidates ahead of it would pass over another client's
// request of the same level with a lower fair-share tag (ClientShare): the length grouping may
// reorder one client's requests, and requests of equal tags, but not let a client's backlog
// overtake a request that its fair share put first.
bool Scheduler::PassesFairShare(const std::vector<Sequence*>& window, size_t i) {
  const Sequence& pick = *window[i];
  for (size_t j = 0; j < i; ++j) {
    const Sequence& ahead = *window[j];
    if (ahead.level == pick.level && ahead.share_tag < pick.share_tag &&
        ahead.request.client != pick.request.client) {
      return true;
    }
  }
  return false;
}

int32_t Scheduler::Admit(absl::Time now, int32_t limit, bool joining, Draft* draft) {
  int32_t admitted = 0;
  // Padding a candidate's first chunk would add to the draft, or -1 when it does not fit.
  auto added_padding = [&](const Sequence& seq) -> int64_t {
    const int64_t cached_tokens =
        static_cast<int64_t>(CachedPrefix(seq).size()) * options_.block_size;
    const int32_t chunk = ChunkThatFits(seq, *draft, cached_tokens);
    if (chunk == 0) return -1;
    const int64_t rows = static_cast<int64_t>(draft->rows.size());
    const int64_t length = std::max(draft->padded_length, chunk);
    return (rows + 1) * length - rows * draft->padded_length - chunk;
  };
  // Candidates that wait for a running sequence's prefill (WaitsForSharedPrefill) this pass.
  absl::flat_hash_set<const Sequence*> waiting_for_shared;
  while (admitted < limit) {
    std::vector<Sequence*> window = NextCandidates(
        now, static_cast<size_t>(options_.length_grouping_window), joining, &waiting_for_shared);
    if (window.empty()) break;
    bool head = true;
    while (!window.empty() && admitted < limit) {
      // The head of each window goes first, so no length waits forever; then the least padding
      // among the candidates that pass no one their clients' fair shares put first.
      size_t pick = 0;
      if (!head) {
        int64_t best = std::numeric_limits<int64_t>::max();
        for (size_t i = 0; i < window.size(); ++i) {
          if (PassesFairShare(window, i)) continue;
          const int64_t padding = added_padding(*window[i]);
          if (padding >= 0 && padding < best) {
            best = padding;
            pick = i;
          }
        }
      }
      head = false;
      Sequence* seq = window[pick];
      if (static_cast<int32_t>(running_.size()) >= options_.max_batch_size) return admitted;
      const std::vector<BlockId> cached = CachedPrefix(*seq);
      if (WaitsForSharedPrefill(*seq, cached.size())) {
        waiting_for_shared.insert(seq);
        window.erase(window.begin() + static_cast<std::ptrdiff_t>(pick));
        continue;
      }
      const int64_t cached_tokens = static_cast<int64_t>(cached.size()) * options_.block_size;
      const int32_t chunk = ChunkThatFits(*seq, *draft, cached_tokens);
      if (chunk == 0) return admitted;
      // Admitted only when the blocks of all its tokens fit; then they are reserved whole. Its
      // cached prefix counts as available, but taking the blocks of it that nobody uses removes
      // them from what Allocate may evict.
      const int64_t tokens = static_cast<int64_t>(seq->tokens.size());
      int32_t idle_cached = 0;
      for (BlockId b : cached) idle_cached += allocator_.ref_count(b) == 0 ? 1 : 0;
      const int32_t new_blocks =
          static_cast<int32_t>(CeilDiv(tokens, options_.block_size) - std::ssize(cached));
      if (!allocator_.CanAllocate(new_blocks + idle_cached)) return admitted;
      if (!seq->blocks.AppendCached(cached, &allocator_).ok()) return admitted;
      if (!seq->blocks.Reserve(tokens, &allocator_).ok()) {
        seq->blocks.ReleaseAll(&allocator_);
        return admitted;
      }
      seq->num_computed = cached_tokens;
      seq->num_published = static_cast<int32_t>(cached.size());
      if (UsesPrefixCache(*seq)) {
        draft->cache_queries += tokens;
        draft->cache_hits += cached_tokens;
      }
      RemoveFromQueue(seq);
      seq->state = SequenceState::kRunning;
      seq->admit_order = next_admit_order_++;
      if (!seq->started) {
        seq->started = true;
        client_share_.Started(seq->level, seq->share_tag);
        ++started_this_pass_;
        seq->queue_time = now - seq->arrival;
        seq->cached_prompt_tokens = cached_tokens;
        if (seq->deadline) {
          deadlines_.erase({*seq->deadline, seq->request.id});
          seq->deadline.reset();
        }
        if (observer_ != nullptr) observer_->OnQueueTime(seq->level, now - seq->arrival);
      }
      policy_->Joined(seq);
      running_.push_back(seq);
      AddRow(seq, chunk, draft);
      window.erase(window.begin() + static_cast<std::ptrdiff_t>(pick));
      ++admitted;
    }
  }
  return admitted;
}

void Scheduler::FillGauges(StepStats* stats) {
  stats->num_running = num_running();
  stats->kv_blocks_used = allocator_.num_used();
  stats->kv_blocks_free = allocator_.num_free();
  stats->kv_blocks_cached = allocator_.num_cached();
  stats->prefix_cache_evictions = allocator_.num_evictions() - evictions_reported_;
  evictions_reported_ = allocator_.num_evictions();
  stats->queue_depth.reserve(queues_.size());
  for (const auto& queue : queues_)
    stats->queue_depth.push_back(static_cast<int64_t>(queue.size()));
}

ScheduleDecision Scheduler::Schedule(absl::Time now) {
  ScheduleDecision decision;
  if (in_flight_ || ahead_) return decision;
  // Whatever the pass decides, the queue's service rate sees who started and who still waits.
  absl::Cleanup observe_service = [this, now] {
    service_rate_.Observe(now, started_this_pass_, num_waiting() > 0);
    started_this_pass_ = 0;
  };
  ExpireTimeouts(now);

  Draft draft = NewDraft();
  std::optional<absl::Time> fire_at;
  const bool batch_running = policy_->BatchRunning(!running_.empty());
  if (batch_running) {
    PreemptForDecodes(now);
    PromoteUnderShare(now, /*may_preempt=*/true);
    for (Sequence* seq : running_) {
      // PreemptForDecodes left enough free blocks for every decoding sequence.
      if (seq->decoding() &&
          seq->blocks.Reserve(static_cast<int64_t>(seq->tokens.size()), &allocator_).ok()) {
        AddRow(seq, 1, &draft);
      }
    }
    AddRunningPrefills(now, &draft);
    Admit(now, options_.max_batch_size, /*joining=*/true, &draft);
  } else {
    const std::optional<absl::Time> oldest = OldestWaitingArrival();
    const FiringDecision firing =
        DecideFiring(num_waiting(), oldest.value_or(now), now, options_.max_batch_size,
                     options_.preferred_batch_sizes, options_.max_queue_delay);
    if (firing.batch_size > 0) {
      policy_->BatchFired();
      if (Admit(now, firing.batch_size, /*joining=*/false, &draft) == 0) policy_->NoneAdmitted();
    }
    fire_at = firing.wake_at;
  }

  if (draft.rows.empty()) {
    if (observer_ != nullptr) {
      StepStats idle;  // no rows: the gauges only, so that they follow requests leaving
      FillGauges(&idle);
      observer_->OnStepPlanned(idle);
    }
    decision.wake_at = fire_at;
    if (!deadlines_.empty() &&
        (!decision.wake_at || deadlines_.begin()->first < *decision.wake_at)) {
      decision.wake_at = deadlines_.begin()->first;
    }
    return decision;
  }

  in_flight_ = true;
  in_flight_rows_ = std::move(draft.records);
  CountStep(in_flight_rows_, draft.cache_queries, draft.cache_hits);
  AttachReleases(&draft.plan);
  decision.plan = std::move(draft.plan);
  return decision;
}

Scheduler::Draft Scheduler::NewDraft() {
  Draft draft;
  if (!spare_row_vectors_.empty()) {
    draft.plan.rows = std::move(spare_row_vectors_.back());
    spare_row_vectors_.pop_back();
  }
  draft.records.reserve(running_.size() + 16);
  return draft;
}

void Scheduler::RecyclePlan(StepPlan plan) {
  // Bounded by what a step can hold, so a burst of large steps does not keep memory forever.
  const size_t limit = 2 * static_cast<size_t>(std::max(options_.max_batch_size, 1));
  for (StepRow& row : plan.rows) {
    if (spare_rows_.size() >= limit) break;
    // What a finished request owns is not kept alive by a spare row.
    row.allowed_tokens.reset();
    row.logit_adjustments.reset();
    spare_rows_.push_back(std::move(row));
  }
  plan.rows.clear();
  if (spare_row_vectors_.size() < 2) spare_row_vectors_.push_back(std::move(plan.rows));
}

void Scheduler::CountStep(const std::vector<RowRecord>& records, int64_t cache_queries,
                          int64_t cache_hits) {
  StepStats step;
  step.num_rows = static_cast<int32_t>(records.size());
  for (const RowRecord& record : records) {
    if (record.decode) {
      ++step.num_decode_rows;
    } else {
      ++step.num_prefill_rows;
    }
    step.padded_length = std::max(step.padded_length, record.num_tokens);
    step.real_tokens += record.num_tokens;
  }
  step.padded_tokens = int64_t{step.num_rows} * step.padded_length - step.real_tokens;
  FillGauges(&step);
  step.prefix_cache_queries = cache_queries;
  step.prefix_cache_hits = cache_hits;
  stats_.prefix_cache_queries += cache_queries;
  stats_.prefix_cache_hits += cache_hits;
  ++stats_.steps;
  stats_.largest_step_rows_since_reconfigure =
      std::max(stats_.largest_step_rows_since_reconfigure, step.num_rows);
  stats_.rows += step.num_rows;
  stats_.real_tokens += step.real_tokens;
  stats_.padded_tokens += step.padded_tokens;
  if (observer_ != nullptr) observer_->OnStepPlanned(step);
}

std::optional<StepPlan> Scheduler::ScheduleAhead(absl::Time now) {
  if (!in_flight_ || ahead_ || options_.mode != BatchingMode::kContinuous) return std::nullopt;
  // The first position of `seq` that the step in flight does not cover, and whether that step
  // samples the token there.
  auto after_flight = [](const Sequence& seq) {
    return seq.num_computed + (seq.in_flight ? seq.in_flight_tokens : 0);
  };
  auto decodes_ahead = [&](const Sequence& seq) {
    const int64_t known = static_cast<int64_t>(seq.tokens.size());
    if (!seq.in_flight || after_flight(seq) != known) return false;
    // A constraint's next mask needs the token in flight: its row joins at CommitAhead.
    if (seq.request.constraint != nullptr) return false;
    // The step in flight brings it to its length: it ends there.
    if (seq.num_generated() + 1 >= seq.max_tokens) return false;
    return options_.max_model_len == 0 || known + 1 < options_.max_model_len;
  };
  int64_t need = 0;  // blocks for every decode row, checked before anything changes
  for (const Sequence* seq : running_) {
    if (decodes_ahead(*seq)) {
      need += seq->blocks.BlocksNeeded(static_cast<int64_t>(seq->tokens.size()) + 1);
    } else if (!seq->in_flight && seq->decoding()) {
      need += seq->blocks.BlocksNeeded(static_cast<int64_t>(seq->tokens.size()));
    }
  }
  if (need > allocator_.num_free()) return std::nullopt;  // only a preemption would do
  // A client under its share of a full batch takes a slot at the next step planned now.
  if (BatchFull() && UnderShare(now).first != nullptr) return std::nullopt;

  absl::Cleanup observe_service = [this, now] {
    service_rate_.Observe(now, started_this_pass_, num_waiting() > 0);
    started_this_pass_ = 0;
  };
  ExpireTimeouts(now);
  Draft draft = NewDraft();
  draft.ahead = true;
  std::vector<std::pair<Sequence*, int64_t>> prefills;  // sequence, offset past num_computed
  for (Sequence* seq : running_) {
    const int64_t known = static_cast<int64_t>(seq->tokens.size());
    if (decodes_ahead(*seq)) {
      if (seq->blocks.Reserve(known + 1, &allocator_).ok()) {
        AddRow(seq, 1, &draft, known - seq->num_computed);
      }
    } else if (!seq->in_flight && seq->decoding()) {
      if (seq->blocks.Reserve(known, &allocator_).ok()) AddRow(seq, 1, &draft);
    } else if (after_flight(*seq) < known && !seq->decoding()) {
      prefills.emplace_back(seq, after_flight(*seq) - seq->num_computed);
    }
  }
  std::sort(prefills.begin(), prefills.end(), [&](const auto& a, const auto& b) {
    return std::make_tuple(EffectiveLevel(*a.first, now), a.first->admit_order) <
           std::make_tuple(EffectiveLevel(*b.first, now), b.first->admit_order);
  });
  for (const auto& [seq, offset] : prefills) {
    // ChunkThatFits counts the tokens in flight as if they came from the cache.
    const int32_t chunk = ChunkThatFits(*seq, draft, offset);
    if (chunk == 0) break;
    AddRow(seq, chunk, &draft, offset);
  }
  PromoteUnderShare(now, /*may_preempt=*/false);
  Admit(now, options_.max_batch_size, /*joining=*/true, &draft);
  if (draft.rows.empty()) return std::nullopt;
  ahead_ = true;
  ahead_rows_ = std::move(draft.records);
  ahead_cache_queries_ = draft.cache_queries;
  ahead_cache_hits_ = draft.cache_hits;
  return std::move(draft.plan);
}

StepPlan Scheduler::CommitAhead(StepPlan plan, absl::Time now) {
  ahead_ = false;
  std::vector<RowRecord> kept_rows;
  kept_rows.reserve(ahead_rows_.size());
  size_t kept = 0;
  for (size_t i = 0; i < plan.rows.size() && i < ahead_rows_.size(); ++i) {
    StepRow& row = plan.rows[i];
    const RowRecord& record = ahead_rows_[i];
    auto it = sequences_.find(record.id);
    Sequence* seq = it == sequences_.end() ? nullptr : it->second.get();
    if (seq != nullptr) seq->ahead = false;
    // Ended since (a stop, a failure, a cancellation), or its step in flight did not leave it
    // where the row starts: the row is left out, and the blocks reserved for it went (or go)
    // with the sequence.
    if (seq == nullptr || seq->state != SequenceState::kRunning || seq->cancel_requested ||
        seq->in_flight || seq->num_computed != row.start_pos) {
      // The executor never sees this row's entries: a later row sends them.
      if (seq != nullptr) seq->executor_entries = std::min(seq->executor_entries, row.first_block);
      continue;
    }
    if (row.token_ids[0] == kPendingToken) {
      if (row.start_pos >= static_cast<int64_t>(seq->tokens.size())) {
        seq->executor_entries = std::min(seq->executor_entries, row.first_block);
        continue;
      }
      row.token_ids[0] = seq->tokens[row.start_pos];
      row.sample_index = seq->num_generated();
    }
    seq->in_flight = true;
    seq->in_flight_tokens = record.num_tokens;
    if (kept != i) plan.rows[kept] = std::move(row);
    ++kept;
    kept_rows.push_back(record);
  }
  plan.rows.resize(kept);
  ahead_rows_.clear();
  if (kept == 0) return plan;
  ExpireTimeouts(now);
  // Constrained sequences decode in it too, now that their last token is known (their masks are
  // computed once the step is handed to be launched).
  bool constrained_decodes = false;
  for (const Sequence* seq : running_) {
    constrained_decodes = constrained_decodes || (seq->request.constraint != nullptr &&
                                                  seq->decoding() && !seq->in_flight);
  }
  if (num_waiting() > 0 || constrained_decodes) {
    // Requests that came while the step was planned ahead join it where it has room, as they
    // would have joined a step planned now.
    Draft draft;
    draft.plan = std::move(plan);
    draft.records = std::move(kept_rows);
    for (const StepRow& row : draft.plan.rows) {
      const int32_t n = static_cast<int32_t>(row.token_ids.size());
      draft.rows.emplace_back(sequences_.at(row.seq_id).get(), n);
      draft.padded_length = std::max(draft.padded_length, n);
      draft.real_tokens += n;
    }
    for (Sequence* seq : running_) {
      if (seq->request.constraint == nullptr || !seq->decoding() || seq->in_flight) continue;
      // Without a free block it waits for the next step planned now (which may preempt).
      if (seq->blocks.Reserve(static_cast<int64_t>(seq->tokens.size()), &allocator_).ok()) {
        AddRow(seq, 1, &draft);
      }
    }
    PromoteUnderShare(now, /*may_preempt=*/false);
    Admit(now, options_.max_batch_size, /*joining=*/true, &draft);
    plan = std::move(draft.plan);
    kept_rows = std::move(draft.records);
    ahead_cache_queries_ += draft.cache_queries;
    ahead_cache_hits_ += draft.cache_hits;
  }
  in_flight_ = true;
  in_flight_rows_ = std::move(kept_rows);
  CountStep(in_flight_rows_, ahead_cache_queries_, ahead_cache_hits_);
  AttachReleases(&plan);
  return plan;
}

absl::Status Scheduler::OnStepResult(const StepResult& result, absl::Time now) {
  if (!in_flight_) return absl::FailedPreconditionError("no step is in flight");
  absl::Status mismatch;
  if (result.rows.size() != in_flight_rows_.size()) {
    mismatch = absl::InternalError(absl::StrCat("the step result has ", result.rows.size(),
                                                " rows; the plan had ", in_flight_rows_.size()));
  }
  for (size_t i = 0; mismatch.ok() && i < in_flight_rows_.size(); ++i) {
    if (result.rows[i].seq_id != in_flight_rows_[i].id) {
      mismatch = absl::InternalError(absl::StrCat("row ", i, " of the step result is sequence ",
                                                  result.rows[i].seq_id, "; the plan had ",
                                                  in_flight_rows_[i].id));
    }
  }
  if (!mismatch.ok()) {
    OnStepFailed(mismatch, now);
    return mismatch;
  }
  in_flight_ = false;
  events_.reserve(events_.size() + in_flight_rows_.size());
  for (size_t i = 0; i < in_flight_rows_.size(); ++i) {
    const RowRecord& record = in_flight_rows_[i];
    auto it = sequences_.find(record.id);
    if (it == sequences_.end()) continue;
    Sequence* seq = it->second.get();
    seq->in_flight = false;
    seq->in_flight_tokens = 0;
    if (seq->cancel_requested) {
      Finish(seq, Outcome::kCancelled, absl::CancelledError("cancelled"), now);
      continue;
    }
    if (!result.rows[i].status.ok()) {  // left out of the step: this request alone ends
      Finish(seq, Outcome::kFailed, result.rows[i].status, now);
      continue;
    }
    if (!result.rows[i].scored_logprobs.empty()) RecordPromptScores(seq, result.rows[i]);
    seq->num_computed += record.num_tokens;
    PublishComputedBlocks(seq);
    const int32_t given_back =
        static_cast<int32_t>(seq->blocks.blocks().size()) - seq->blocks.num_held();
    if (seq->blocks.ReleaseBefore(
            BlocksBeforeWindow(seq->num_computed, options_.sliding_window, options_.block_size),
            &allocator_) > 0) {
      // Entries from `given_back` on are now kNoBlock: the next row sends them again, so that
      // the executor's copy never names a block this sequence no longer holds.
      seq->executor_entries = std::min(seq->executor_entries, given_back);
    }
    if (!record.sample) continue;
    const RowResult& row = result.rows[i];
    Event event;
    event.kind = Event::Kind::kToken;
    event.request_id = record.id;
    event.token = row.token;
    event.logprob = row.logprob;
    event.top_logprobs = row.top_logprobs;
    event.token_index = seq->num_generated();
    if (event.token_index == 0 && seq->request.score_prompt) {
      event.prompt_logprobs = std::move(seq->prompt_logprobs);
      event.prompt_top_logprobs = std::move(seq->prompt_top_logprobs);
    }
    seq->tokens.push_back(row.token);
    events_.push_back(std::move(event));
    if (observer_ != nullptr) {
      if (seq->last_token_time) {
        observer_->OnInterTokenTime(now - *seq->last_token_time);
      } else {
        observer_->OnFirstToken(now - seq->arrival);
      }
    }
    seq->last_token_time = now;
    const auto& stops = seq->request.stop_token_ids;
    absl::Status accepted = absl::OkStatus();
    if (seq->request.constraint != nullptr) accepted = seq->request.constraint->Accept(row.token);
    if (seq->request.logit_adjustments != nullptr) {
      seq->request.logit_adjustments->CountOutput(row.token);
    }
    if (!accepted.ok()) {
      Finish(seq, Outcome::kFailed, std::move(accepted), now);
    } else if (std::find(stops.begin(), stops.end(), row.token) != stops.end() ||
               (seq->request.constraint != nullptr && seq->request.constraint->terminated())) {
      Finish(seq, Outcome::kCompleteStop, absl::OkStatus(), now);
    } else if (seq->num_generated() >= seq->max_tokens ||
               (options_.max_model_len > 0 &&
                static_cast<int64_t>(seq->tokens.size()) >= options_.max_model_len)) {
      Finish(seq, Outcome::kCompleteLength, absl::OkStatus(), now);
    }
  }
  in_flight_rows_.clear();
  return absl::OkStatus();
}

void Scheduler::RecordPromptScores(Sequence* seq, const RowResult& row) {
  if (seq->prompt_logprobs.empty()) {
    seq->prompt_logprobs.assign(seq->prompt_len, std::numeric_limits<float>::quiet_NaN());
    seq->prompt_top_logprobs.resize(seq->prompt_len);
  }
  // The row started at num_computed; its position p scored prompt token p + 1.
  for (size_t j = 0; j < row.scored_logprobs.size(); ++j) {
    const int64_t scored = seq->num_computed + static_cast<int64_t>(j) + 1;
    if (scored >= seq->prompt_len || std::isnan(row.scored_logprobs[j])) continue;
    seq->prompt_logprobs[scored] = row.scored_logprobs[j];
    if (j < row.scored_top_logprobs.size()) {
      seq->prompt_top_logprobs[scored] = row.scored_top_logprobs[j];
    }
  }
}

void Scheduler::OnStepFailed(const absl::Status& status, absl::Time now) {
  if (!in_flight_) return;
  in_flight_ = false;
  for (const RowRecord& record : in_flight_rows_) {
    auto it = sequences_.find(record.id);
    if (it == sequences_.end()) continue;
    Sequence* seq = it->second.get();
    seq->in_flight = false;
    seq->in_flight_tokens = 0;
    if (seq->cancel_requested) {
      Finish(seq, Outcome::kCancelled, absl::CancelledError("cancelled"), now);
    } else {
      Finish(seq, Outcome::kFailed, status, now);
    }
  }
  in_flight_rows_.clear();
}

std::vector<Event> Scheduler::TakeEvents() {
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

void Scheduler::RemoveFromQueue(Sequence* seq) {
  queues_[seq->level - 1].erase(seq->queue_pos);
  if (!seq->started) --new_waiting_[seq->level - 1];
}

void Scheduler::RemoveFromRunning(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::Finish(Sequence* seq, Outcome outcome, absl::Status status, absl::Time /*now*/) {
  if (seq->state == SequenceState::kWaiting) {
    RemoveFromQueue(seq);
  } else if (seq->state == SequenceState::kRunning) {
    RemoveFromRunning(seq);
  }
  if (seq->deadline) deadlines_.erase({*seq->deadline, seq->request.id});
  ReleaseExecutorTable(seq);
  seq->blocks.ReleaseAll(&allocator_);
  seq->state = SequenceState::kFinished;

  Event event;
  event.kind = Event::Kind::kFinal;
  event.request_id = seq->request.id;
  event.outcome = outcome;
  event.status = std::move(status);
  event.num_generated = seq->num_generated();
  event.queue_time = seq->queue_time;
  event.cached_prompt_tokens = seq->cached_prompt_tokens;
  ++stats_.outcomes[static_cast<int>(outcome)];
  if (observer_ != nullptr) observer_->OnFinished(outcome);

  const bool complete = outcome == Outcome::kCompleteLength || outcome == Outcome::kCompleteStop;
  policy_->Ended(*seq, std::move(event), complete, &events_);
  sequences_.erase(seq->request.id);  // `seq` is gone from here on
}

absl::Status Scheduler::CheckInvariants() const {
  RETURN_IF_ERROR(allocator_.CheckInvariants());
  auto fail = [](auto&&... parts) { return absl::InternalError(absl::StrCat(parts...)); };
  if (static_cast<int32_t>(running_.size()) > options_.max_batch_size) {
    return fail(running_.size(), " running sequences exceed max_batch_size");
  }
  // Every reference the allocator counts is one running sequence's table entry.
  absl::flat_hash_map<BlockId, int32_t> references;
  for (const Sequence* seq : running_) {
    if (seq->state != SequenceState::kRunning) return fail("running sequence not kRunning");
    if (seq->blocks.capacity() < seq->num_computed) return fail("blocks do not cover the cache");
    if (seq->num_published * int64_t{options_.block_size} > seq->num_computed) {
      return fail("sequence ", seq->request.id, " published blocks it has not computed");
    }
    int32_t held = 0;
    for (BlockId b : seq->blocks.blocks()) {
      if (b == kNoBlock) continue;
      ++references[b];
      ++held;
    }
    if (held != seq->blocks.num_held()) {
      return fail("sequence ", seq->request.id, " holds ", held, " blocks; its table counts ",
                  seq->blocks.num_held());
    }
    const int64_t before_window =
        BlocksBeforeWindow(seq->num_computed, options_.sliding_window, options_.block_size);
    for (size_t i = static_cast<size_t>(before_window); i < seq->blocks.blocks().size(); ++i) {
      if (seq->blocks.blocks()[i] == kNoBlock) {
        return fail("sequence ", seq->request.id, " gave back block ", i, " inside its window");
      }
    }
  }
  if (static_cast<int32_t>(references.size()) != allocator_.num_used()) {
    return fail("running sequences hold ", references.size(),
                " distinct blocks; the allocator has ", allocator_.num_used(), " in use");
  }
  for (const auto& [block, count] : references) {
    if (allocator_.ref_count(block) != count) {
      return fail("block ", block, " is held ", count, " times; its ref count is ",
                  allocator_.ref_count(block));
    }
  }
  int64_t waiting = 0;
  int64_t with_deadline = 0;
  for (size_t l = 0; l < queues_.size(); ++l) {
    int64_t fresh = 0;
    for (const Sequence* seq : queues_[l]) {
      if (seq->state != SequenceState::kWaiting) return fail("queued sequence not kWaiting");
      if (!seq->blocks.blocks().empty()) return fail("waiting sequence holds blocks");
      if (seq->num_computed != 0) return fail("waiting sequence has computed tokens");
      if (!seq->started) ++fresh;
      if (seq->deadline) ++with_deadline;
    }
    if (fresh != new_waiting_[l]) return fail("new_waiting_ of level ", l + 1, " is off");
    waiting += static_cast<int64_t>(queues_[l].size());
  }
  if (with_deadline != static_cast<int64_t>(deadlines_.size())) return fail("deadlines are off");
  if (waiting + static_cast<int64_t>(running_.size()) != num_held()) {
    return fail(waiting, " waiting + ", running_.size(), " running != ", num_held(), " held");
  }
  return absl::OkStatus();
}

}  // namespace convoy
