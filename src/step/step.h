// What one engine step is, as plain data shared by the scheduler (which plans it) and the
// executors (which run it): the plan, the result, and the limits an executor states for one step.
// No executor, CUDA or gRPC header here: the scheduler includes this and nothing of executor/.
#ifndef CONVOY_STEP_STEP_H_
#define CONVOY_STEP_STEP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "convoy/sampling_params.h"
#include "kv/block_allocator.h"
#include "step/logit_adjustments.h"
#include "step/token_constraint.h"

namespace convoy {

// The most top logprobs any request may ask for, whatever the protocol or executor (OpenAI's API
// allows 20 too). An executor may state fewer (ExecutorLimits::max_top_logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

// A decode row's token in a step planned ahead of the step in flight: the token that step samples
// for the sequence. The scheduler fills it in before the step is launched (Scheduler::CommitAhead);
// no executor sees it.
inline constexpr int32_t kPendingToken = -1;

// One sequence's part of a step: a chunk of its prompt (prefill) or its newest token (decode).
struct StepRow {
  int64_t seq_id = 0;
  // The tokens at positions [start_pos, start_pos + token_ids.size()); at least one.
  std::vector<int32_t> token_ids;
  // Tokens of this sequence already in the KV cache (positions [0, start_pos)).
  int32_t start_pos = 0;
  // The row's block table covers positions [0, start_pos + token_ids.size()); the step writes K
  // and V of token_ids into it. The executor keeps each sequence's table between steps
  // (executor/block_tables.h), so a row carries only entries [first_block, first_block +
  // block_table.size()) of it, and the entries before first_block are those the executor holds
  // from the sequence's earlier rows. first_block 0 sends the whole table (a sequence new to the
  // executor, or resumed after a preemption); a decode row whose token fits the blocks already
  // sent carries none.
  int32_t first_block = 0;
  std::vector<BlockId> block_table;
  // Sample a token after the row's last position (false for a prompt chunk that is not the last).
  bool sample = true;
  SamplingParams sampling;
  // Index of the token being generated (0 for the first); with the seed it fixes the random draw,
  // so a request's tokens do not depend on what else shares its steps.
  int64_t sample_index = 0;
  // Return the logits at every position of the row (tests and debugging).
  bool return_logits = false;
  // Prompt scoring (echo with logprobs): empty, or one entry per token_ids position, the token
  // whose log-probability under that position's logits the step returns
  // (RowResult::scored_logprobs), with sampling.num_top_logprobs alternatives; -1: none there.
  std::vector<int32_t> score_tokens;
  // Set on a sampling row of a constrained request: sample only among the tokens it allows
  // (TokenMask::Get). Null: every token.
  std::shared_ptr<TokenMask> allowed_tokens;
  // Set on a sampling row of a request with logit_bias or penalties: applied to the logits before
  // the choice (the reported logprobs stay the model's own). Null: none.
  std::shared_ptr<const LogitAdjustments> logit_adjustments;
};

struct StepPlan {
  std::vector<StepRow> rows;
  // Sequences that ended or were preempted since their last row: the executor drops their block
  // tables before it takes the rows (a resumed sequence's row then sends its table whole).
  std::vector<int64_t> released;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct RowResult {
  int64_t seq_id = 0;
  // Not OK when this row could not run (a malformed row left out of the step): its request ends
  // with this error and the rows beside it are unaffected. The fields below are unset then.
  absl::Status status;
  // Set when the row asked to sample.
  int32_t token = -1;
  // log softmax of the model's logits at the chosen token (before temperature, top-k, top-p).
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // most likely first
  // [token_ids.size() x vocab_size], when the row asked for them.
  std::vector<float> logits;
  // One per score_tokens entry (NaN where it was -1), and their alternatives, most likely first.
  std::vector<float> scored_logprobs;
  std::vector<std::vector<TokenLogprob>> scored_top_logprobs;
};

// Where an executor's time went in one step, for the step-phase metrics (engine/step_phases.h).
// Zero where the executor does not say.
struct ExecutorTimes {
  absl::Duration prepare;  // checking the plan and laying out its inputs
  absl::Duration forward;  // the layers and the logits (a device's whole run of the step)
  absl::Duration sample;   // choosing each sampling row's token
};

struct StepResult {
  std::vector<RowResult> rows;  // in the plan's order
  int32_t padded_length = 0;    // the longest row: every row is padded to it
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;  // rows x padded_length - real_tokens
  // Token slots the dense layers computed: real plus padded, or only real when the executor
  // skips padding.
  int64_t computed_tokens = 0;
  ExecutorTimes times;
};

// What an executor can run in one step. The engine reconciles these with the scheduler's options
// at start and at every reload (EngineLoop): a config asking for more is refused naming its field,
// so that no step ever exceeds them.
struct ExecutorLimits {
  // Token slots one step may hold: packed tokens, or rows x the longest row when padding is
  // computed. 0: no limit but memory.
  int64_t max_tokens_per_step = 0;
  // Rows (sequences) one step may hold. 0: no limit.
  int32_t max_rows_per_step = 0;
  // Top logprobs a sampled row may ask for, at most kMaxTopLogprobs (and the vocabulary).
  int32_t max_top_logprobs = kMaxTopLogprobs;
  // Whether padding slots cost compute: rows padded to the longest and masked. When false the
  // scheduler's token budget counts real tokens only.
  bool computes_padding = true;
  // Whether sampling honours StepRow::allowed_tokens; an executor that does not refuses such rows
  // (CheckRow), and the front ends refuse constrained requests before they are queued.
  bool applies_token_constraints = true;
  // Whether sampling honours StepRow::logit_adjustments and SamplingParams::min_p (and the
  // penalties they hold); an executor that does not refuses such rows (CheckRow), and the front
  // ends refuse such requests before they are queued, naming the field.
  bool applies_extended_sampling = true;
  // Whether it scores StepRow::score_tokens (prompt logprobs); likewise refused where not.
  bool scores_prompts = true;
};

}  // namespace convoy

#endif  // CONVOY_STEP_STEP_H_
