// Runs a fixed set of prompts to completion on one executor, all batched together: every step
// carries each unfinished sequence's next prompt chunk or its newest token. A test oracle, kept
// deliberately simpler than the scheduler (no queue, no preemption, no prefix cache): the
// executor tests and the daemon's parity tests compare against it. It lives with the tests:
// convoyd and convoy-run both serve through the scheduler and engine loop, never through it.
#ifndef CONVOY_TESTS_ENGINE_GENERATOR_H_
#define CONVOY_TESTS_ENGINE_GENERATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "convoy/sampling_params.h"
#include "executor/executor.h"
#include "kv/block_allocator.h"

namespace convoy {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  SamplingParams sampling;
  // Generation ends after any of these tokens (which is kept in the output).
  std::vector<int32_t> stop_token_ids;
};

enum class FinishReason { kLength, kStop };
const char* FinishReasonName(FinishReason reason);

struct GenerationOutput {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when asked
  FinishReason finish_reason = FinishReason::kLength;
};

struct GeneratorOptions {
  // Longest prompt piece one step carries per sequence; 0 puts the whole prompt in one step.
  int32_t prefill_chunk_tokens = 0;
};

struct GenerationStats {
  int64_t steps = 0;
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;
};

class Generator {
 public:
  // `executor` must outlive the generator. Owns a block allocator over the executor's cache.
  Generator(Executor* executor, const GeneratorOptions& options);

  // INVALID_ARGUMENT for a bad request (naming its index and field); RESOURCE_EXHAUSTED when the
  // KV cache cannot hold the batch. Every block is free again when it returns, whatever happened.
  absl::StatusOr<std::vector<GenerationOutput>> Generate(
      const std::vector<GenerationRequest>& requests);

  const BlockAllocator& allocator() const { return allocator_; }
  const GenerationStats& stats() const { return stats_; }

 private:
  Executor* executor_;
  GeneratorOptions options_;
  BlockAllocator allocator_;
  GenerationStats stats_;
};

}  // namespace convoy

#endif  // CONVOY_TESTS_ENGINE_GENERATOR_H_
