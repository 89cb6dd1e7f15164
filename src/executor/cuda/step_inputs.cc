#include "executor/cuda/step_inputs.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/paged_attention_prefill.cuh"
#include "kernels/sampling.cuh"

namespace convoy::cuda {
namespace {

size_t Align16(size_t x) { return (x + 15) / 16 * 16; }

}  // namespace

int64_t MaxPrefillTiles(int64_t tokens, int64_t rows) {
  // Each row's tiles are full but its last.
  return tokens / kernels::kPrefillTile + rows;
}

StepLayout StepLayout::For(int64_t tokens, int64_t rows, int64_t logit_rows, int64_t samples) {
  StepLayout l;
  l.num_tokens = tokens;
  l.num_rows = rows;
  l.num_logit_rows = logit_rows;
  l.num_samples = samples;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t start = at;
    at = Align16(at + bytes);
    return start;
  };
  l.token_ids = take(4 * tokens);
  l.positions = take(4 * tokens);
  l.token_row = take(4 * tokens);
  l.row_block_offset = take(4 * rows);
  l.logit_token = take(4 * logit_rows);
  l.sample_rows = take(sizeof(kernels::SampleRow) * samples);
  l.prefill_tiles = take(4 * 2 * MaxPrefillTiles(tokens, rows));
  l.decode_tokens = take(4 * tokens);
  l.num_decode_tokens = tokens;
  l.block_ids = take(0);
  return l;
}

absl::StatusOr<PackedStep> PackStep(const StepPlan& plan, absl::Span<const BlockId* const> tables,
                                    int32_t block_size, int32_t scratch_block, int64_t pad_to_rows,
                                    int32_t prefill_min_tokens, void* staging, size_t capacity) {
  const int64_t plan_rows = static_cast<int64_t>(plan.rows.size());
  if (static_cast<int64_t>(tables.size()) != plan_rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d block tables for %d rows", tables.size(), plan_rows));
  }
  const int64_t rows = std::max(plan_rows, pad_to_rows);
  const int64_t pad = rows - plan_rows;
  PackedStep packed;
  packed.sample_index.assign(plan_rows, -1);
  packed.first_logits_row.assign(plan_rows, -1);
  int64_t tokens = pad, logit_rows = pad, samples = pad, block_ids = pad > 0 ? 1 : 0;
  for (int64_t r = 0; r < plan_rows; ++r) {
    const StepRow& row = plan.rows[r];
    const int64_t n = static_cast<int64_t>(row.token_ids.size());
    tokens += n;
    packed.padded_length = std::max<int32_t>(packed.padded_length, static_cast<int32_t>(n));
    if (row.return_logits) {
      packed.first_logits_row[r] = logit_rows;
      logit_rows += n;
    } else if (row.sample) {
      logit_rows += 1;
    }
    if (row.sample) samples += 1;
    const int64_t needed = (row.start_pos + n + block_size - 1) / block_size;
    block_ids += needed;
  }
  packed.real_tokens = tokens - pad;
  packed.layout = StepLayout::For(tokens, rows, logit_rows, samples);
  packed.num_block_ids = block_ids;
  if (packed.layout.Bytes(block_ids) > capacity) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("step needs %d bytes of inputs, the staging buffer holds %d",
                        packed.layout.Bytes(block_ids), capacity));
  }

  auto* base = static_cast<std::byte*>(staging);
  auto* ids = reinterpret_cast<int32_t*>(base + packed.layout.token_ids);
  auto* positions = reinterpret_cast<int32_t*>(base + packed.layout.positions);
  auto* token_row = reinterpret_cast<int32_t*>(base + packed.layout.token_row);
  auto* row_block_offset = reinterpret_cast<int32_t*>(base + packed.layout.row_block_offset);
  auto* logit_token = reinterpret_cast<int32_t*>(base + packed.layout.logit_token);
  auto* sample_rows = reinterpret_cast<kernels::SampleRow*>(base + packed.layout.sample_rows);
  auto* blocks = reinterpret_cast<int32_t*>(base + packed.layout.block_ids);
  auto* tiles = reinterpret_cast<int32_t*>(base + packed.layout.prefill_tiles);
  auto* decode_tokens = reinterpret_cast<int32_t*>(base + packed.layout.decode_tokens);
  int64_t num_tiles = 0, num_decode = 0;

  int64_t t = 0, l = 0, s = 0, b = 0;
  for (int64_t r = 0; r < plan_rows; ++r) {
    const StepRow& row = plan.rows[r];
    const int64_t n = static_cast<int64_t>(row.token_ids.size());
    const int64_t needed = (row.start_pos + n + block_size - 1) / block_size;
    row_block_offset[r] = static_cast<int32_t>(b);
    std::memcpy(blocks + b, tables[r], needed * sizeof(int32_t));
    b += needed;
    for (int64_t i = 0; i < n; ++i) {
      ids[t + i] = row.token_ids[i];
      positions[t + i] = row.start_pos + static_cast<int32_t>(i);
      token_row[t + i] = static_cast<int32_t>(r);
    }
    if (prefill_min_tokens > 0 && n >= prefill_min_tokens) {
      for (int64_t i = 0; i < n; i += kernels::kPrefillTile) {
        tiles[2 * num_tiles] = static_cast<int32_t>(t + i);
        tiles[2 * num_tiles + 1] =
            static_cast<int32_t>(std::min<int64_t>(kernels::kPrefillTile, n - i));
        ++num_tiles;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) decode_tokens[num_decode++] = static_cast<int32_t>(t + i);
    }
    if (row.return_logits) {
      for (int64_t i = 0; i < n; ++i) logit_token[l + i] = static_cast<int32_t>(t + i);
    } else if (row.sample) {
      logit_token[l] = static_cast<int32_t>(t + n - 1);
    }
    if (row.sample) {
      kernels::SampleRow& sr = sample_rows[s];
      sr = kernels::SampleRow();
      sr.logits_row = static_cast<int32_t>(row.return_logits ? l + n - 1 : l);
      sr.temperature = row.sampling.temperature;
      sr.top_k = row.sampling.top_k;
      sr.top_p = row.sampling.top_p;
      sr.seed = row.sampling.seed;
      sr.sample_index = row.sample_index;
      sr.num_top_logprobs = row.sampling.num_top_logprobs;
      packed.sample_index[r] = s++;
    }
    l += row.return_logits ? n : (row.sample ? 1 : 0);
    t += n;
  }
  if (pad > 0) blocks[b] = scratch_block;
  for (int64_t r = plan_rows; r < rows; ++r) {
    ids[t] = 0;
    positions[t] = 0;
    token_row[t] = static_cast<int32_t>(r);
    row_block_offset[r] = static_cast<int32_t>(b);
    logit_token[l] = static_cast<int32_t>(t);
    sample_rows[s] = kernels::SampleRow();
    sample_rows[s].logits_row = static_cast<int32_t>(l);
    decode_tokens[num_decode++] = static_cast<int32_t>(t);
    ++t, ++l, ++s;
  }
  packed.layout.num_prefill_tiles = num_tiles;
  packed.layout.num_decode_tokens = num_decode;
  return packed;
}

}  // namespace convoy::cuda
