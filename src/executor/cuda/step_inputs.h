// Packing a StepPlan into the flat arrays the kernels read: tokens are packed row after row (no
// padding is computed; the causal and padding masks follow from each token's row and position),
// and every array lives in one staging buffer that is copied to the device with one copy.
#ifndef CONVOY_EXECUTOR_CUDA_STEP_INPUTS_H_
#define CONVOY_EXECUTOR_CUDA_STEP_INPUTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "executor/executor.h"

namespace convoy::cuda {

// Byte offsets of each array for a step of the given sizes. The block ids come last, so a decode
// step of a given batch size has the same layout whatever its context lengths (CUDA graphs keep
// the pointers they were captured with).
struct StepLayout {
  int64_t num_tokens = 0;
  int64_t num_rows = 0;
  int64_t num_logit_rows = 0;  // rows of logits computed: sampled tokens and returned logits
  int64_t num_samples = 0;
  size_t token_ids = 0;         // int32 [num_tokens]
  size_t positions = 0;         // int32 [num_tokens]
  size_t token_row = 0;         // int32 [num_tokens]
  size_t row_block_offset = 0;  // int32 [num_rows]
  size_t logit_token = 0;       // int32 [num_logit_rows]: the token each logits row is for
  size_t sample_rows = 0;       // kernels::SampleRow [num_samples]
  // Attention work: tokens of long rows go to the prefill kernel in tiles (first token, count),
  // the others to the decode kernel by index. Room for the most a step of this size can have;
  // the counts say how many are used.
  size_t prefill_tiles = 0;  // int32 [2 * MaxPrefillTiles(num_tokens, num_rows)]
  size_t decode_tokens = 0;  // int32 [num_tokens]
  int64_t num_prefill_tiles = 0;
  int64_t num_decode_tokens = 0;  // For() sets num_tokens: every token a decode query
  size_t block_ids = 0;           // int32 [...]

  static StepLayout For(int64_t tokens, int64_t rows, int64_t logit_rows, int64_t samples);
  size_t Bytes(int64_t num_block_ids) const { return block_ids + 4 * num_block_ids; }
};

// The most tiles `tokens` packed into `rows` rows can need.
int64_t MaxPrefillTiles(int64_t tokens, int64_t rows);

struct PackedStep {
  StepLayout layout;
  int64_t num_block_ids = 0;
  std::vector<int64_t> sample_index;      // per plan row: its sample slot, or -1
  std::vector<int64_t> first_logits_row;  // per plan row: its first returned logits row, or -1
  int32_t padded_length = 0;
  int64_t real_tokens = 0;
};

// Writes the plan's arrays into `staging` (`capacity` bytes). With pad_to_rows > the plan's rows
// (decode steps replayed from a CUDA graph), adds dummy decode rows that read and write only
// `scratch_block`. Rows of at least `prefill_min_tokens` tokens (0: none) are cut into prefill
// tiles of kernels::kPrefillTile tokens; every other token is a decode query. RESOURCE_EXHAUSTED
// when the step does not fit. `tables`: each plan row's whole block table (the executor's copy,
// executor/block_tables.h), at least as many entries as the row's positions need.
absl::StatusOr<PackedStep> PackStep(const StepPlan& plan, absl::Span<const BlockId* const> tables,
                                    int32_t block_size, int32_t scratch_block, int64_t pad_to_rows,
                                    int32_t prefill_min_tokens, void* staging, size_t capacity);

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_STEP_INPUTS_H_
