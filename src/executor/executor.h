// The executor runs one forward step of the model over a batch of sequences. Implementations: the
// CPU executor (cpu/) and the CUDA executor. A StepPlan is plain data; the executor owns the KV
// cache memory and reads and writes it only through each row's block table.
#ifndef CONVOY_EXECUTOR_EXECUTOR_H_
#define CONVOY_EXECUTOR_EXECUTOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "convoy/sampling_params.h"
#include "kv/block_allocator.h"
#include "kv/kv_cache_spec.h"
#include "model/model_config.h"

namespace convoy {

// One sequence's part of a step: a chunk of its prompt (prefill) or its newest token (decode).
struct StepRow {
  int64_t seq_id = 0;
  // The tokens at positions [start_pos, start_pos + token_ids.size()); at least one.
  std::vector<int32_t> token_ids;
  // Tokens of this sequence already in the KV cache (positions [0, start_pos)).
  int32_t start_pos = 0;
  // Blocks covering positions [0, start_pos + token_ids.size()); the step writes K and V of
  // token_ids into them.
  std::vector<BlockId> block_table;
  // Sample a token after the row's last position (false for a prompt chunk that is not the last).
  bool sample = true;
  SamplingParams sampling;
  // Index of the token being generated (0 for the first); with the seed it fixes the random draw,
  // so a request's tokens do not depend on what else shares its steps.
  int64_t sample_index = 0;
  // Return the logits at every position of the row (tests and debugging).
  bool return_logits = false;
};

struct StepPlan {
  std::vector<StepRow> rows;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct RowResult {
  int64_t seq_id = 0;
  // Set when the row asked to sample.
  int32_t token = -1;
  // log softmax of the model's logits at the chosen token (before temperature, top-k, top-p).
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // most likely first
  // [token_ids.size() x vocab_size], when the row asked for them.
  std::vector<float> logits;
};

struct StepResult {
  std::vector<RowResult> rows;  // in the plan's order
  int32_t padded_length = 0;    // the longest row: every row is padded to it
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;  // rows x padded_length - real_tokens
  // Token slots the dense layers computed: real plus padded, or only real when the executor
  // skips padding.
  int64_t computed_tokens = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one forward step. Rows are padded to the longest row and masked (causal plus padding).
  // INVALID_ARGUMENT names the row and field of a malformed plan; nothing is written then.
  virtual absl::StatusOr<StepResult> Step(const StepPlan& plan) = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual const KvCacheSpec& kv_spec() const = 0;
  // Whether padding slots cost compute (rows padded to the longest), which the scheduler's token
  // budget then counts.
  virtual bool computes_padding() const { return true; }
};

// Checks a plan against the model and cache before anything runs. Shared by the executors.
absl::Status ValidateStepPlan(const StepPlan& plan, const ModelConfig& model,
                              const KvCacheSpec& kv);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_EXECUTOR_H_
