// One request's state inside the scheduler. Owned by the Scheduler; only the engine loop's thread
// touches it.
#ifndef CONVOY_SCHEDULER_SEQUENCE_H_
#define CONVOY_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "kv/block_hash.h"
#include "kv/block_table.h"
#include "scheduler/request.h"

namespace convoy {

enum class SequenceState {
  kWaiting,  // in its level's queue (new, or preempted and waiting to be recomputed)
  kRunning,  // holds KV blocks for every token it has, prefilling or decoding
  kFinished,
};

struct Sequence {
  Sequence(Request r, int32_t block_size) : request(std::move(r)), blocks(block_size) {}

  Request request;
  int32_t level = 1;  // resolved priority level
  int32_t max_tokens = 0;
  absl::Time arrival;
  std::optional<absl::Time> deadline;  // queue timeout; cleared once first scheduled
  uint64_t arrival_order = 0;          // tie-breaker: earlier submits rank first
  uint64_t share_tag = 0;              // its client's fair share (ClientShare): lower starts first

  // The prompt followed by the generated tokens. After preemption they are all recomputed.
  std::vector<int32_t> tokens;
  int64_t prompt_len = 0;
  // Tokens whose K and V are in the cache: positions [0, num_computed).
  int64_t num_computed = 0;
  BlockTable blocks;
  // Leading entries of `blocks` that the executor holds as they are here (its copy, kept between
  // steps: executor/block_tables.h), as of the plans handed out; a row sends the entries from
  // here on. 0 when the executor holds none (never planned, preempted or ended: its id then goes
  // to the next plan's StepPlan::released).
  int32_t executor_entries = 0;
  // Prefix caching (empty when off for this sequence): the hash of each full block of `tokens`,
  // and how many leading blocks of `blocks` are published or were taken from the cache.
  std::vector<BlockHash> block_hashes;
  int32_t num_published = 0;

  SequenceState state = SequenceState::kWaiting;
  bool started = false;                      // scheduled at least once
  std::optional<absl::Duration> queue_time;  // arrival to the first step that held it
  int64_t cached_prompt_tokens = 0;          // from the prefix cache, when first scheduled
  bool cancel_requested = false;             // cancelled while its step was in flight
  bool in_flight = false;
  int32_t in_flight_tokens = 0;  // the tokens of its row in the step in flight
  bool ahead = false;            // has a row in the step planned ahead
  uint64_t admit_order = 0;      // larger: admitted (or re-admitted) later
  bool yielded = false;  // preempted once to give its slot to another client (PromoteUnderShare)
  int64_t static_batch = -1;                 // static mode: the batch it belongs to
  std::list<Sequence*>::iterator queue_pos;  // valid while kWaiting in a level queue
  std::optional<absl::Time> last_token_time;
  // Prompt scoring (Request::score_prompt): what the steps so far scored, by prompt position,
  // until the first token's event takes them.
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs;

  int64_t num_generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t num_uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
  bool decoding() const { return num_uncomputed() == 1 && num_generated() > 0; }
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_SEQUENCE_H_
