// Packing a step for the CUDA kernels, checked where no GPU runs: which tokens go to the prefill
// attention kernel in tiles and which to the decode kernel, each exactly once.
#include "executor/cuda/step_inputs.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/paged_attention_prefill.cuh"
#include "status_matchers.h"

namespace convoy::cuda {
namespace {

StepPlan Plan(const std::vector<int>& lengths) {
  StepPlan plan;
  for (size_t r = 0; r < lengths.size(); ++r) {
    StepRow row;
    row.seq_id = static_cast<int64_t>(r);
    row.start_pos = static_cast<int32_t>(3 * r);
    row.token_ids.assign(lengths[r], 7);
    for (int b = 0; b < (row.start_pos + lengths[r] + 15) / 16; ++b) row.block_table.push_back(b);
    plan.rows.push_back(std::move(row));
  }
  return plan;
}

struct Attention {
  std::vector<int32_t> tiles;   // pairs
  std::vector<int32_t> decode;  // token indices
  std::vector<int32_t> positions, token_row;
};

Attention Pack(const StepPlan& plan, int64_t pad_to_rows, int32_t min_tokens) {
  std::vector<std::byte> staging(1 << 20);
  std::vector<const BlockId*> tables;
  for (const StepRow& row : plan.rows) tables.push_back(row.block_table.data());
  absl::StatusOr<PackedStep> packed =
      PackStep(plan, tables, 16, 99, pad_to_rows, min_tokens, staging.data(), staging.size());
  EXPECT_OK(packed);
  Attention a;
  if (!packed.ok()) return a;
  const StepLayout& l = packed->layout;
  auto ints = [&](size_t offset, int64_t count) {
    const auto* p = reinterpret_cast<const int32_t*>(staging.data() + offset);
    return std::vector<int32_t>(p, p + count);
  };
  a.tiles = ints(l.prefill_tiles, 2 * l.num_prefill_tiles);
  a.decode = ints(l.decode_tokens, l.num_decode_tokens);
  a.positions = ints(l.positions, l.num_tokens);
  a.token_row = ints(l.token_row, l.num_tokens);
  EXPECT_LE(l.num_prefill_tiles, MaxPrefillTiles(l.num_tokens, l.num_rows));
  return a;
}

TEST(PackStepTest, LongRowsGoToPrefillTilesAndEveryTokenIsCoveredOnce) {
  const StepPlan plan = Plan({1, 5, 16, 70, 130, 1, 15});
  const Attention a = Pack(plan, 0, 16);
  std::vector<int> covered(a.positions.size(), 0);
  for (size_t i = 0; i < a.tiles.size(); i += 2) {
    const int32_t first = a.tiles[i], count = a.tiles[i + 1];
    ASSERT_GE(count, 1);
    ASSERT_LE(count, kernels::kPrefillTile);
    for (int32_t t = first; t < first + count; ++t) {
      ++covered[t];
      EXPECT_EQ(a.token_row[t], a.token_row[first]) << "a tile stays in one row";
      EXPECT_EQ(a.positions[t], a.positions[first] + (t - first)) << "consecutive positions";
      EXPECT_GE(plan.rows[a.token_row[t]].token_ids.size(), 16u);
    }
  }
  for (int32_t t : a.decode) {
    ++covered[t];
    EXPECT_LT(plan.rows[a.token_row[t]].token_ids.size(), 16u);
  }
  for (size_t t = 0; t < covered.size(); ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
  // 16 -> one tile; 70 -> 64 + 6; 130 -> 64 + 64 + 2.
  EXPECT_EQ(a.tiles.size() / 2, 6u);
  EXPECT_EQ(a.decode.size(), 1u + 5u + 1u + 15u);
}

TEST(PackStepTest, ZeroMinimumSendsEveryTokenToTheDecodeKernel) {
  const Attention a = Pack(Plan({1, 40, 200}), 0, 0);
  EXPECT_TRUE(a.tiles.empty());
  ASSERT_EQ(a.decode.size(), 241u);
  for (size_t t = 0; t < a.decode.size(); ++t) EXPECT_EQ(a.decode[t], static_cast<int32_t>(t));
}

TEST(PackStepTest, PaddedGraphStepsAreAllDecodeQueriesInOrder) {
  // A decode step padded to a graph size: the layout must be the same as the graph's, with the
  // padding rows' tokens in the decode list too.
  const Attention a = Pack(Plan({1, 1, 1}), 8, 16);
  EXPECT_TRUE(a.tiles.empty());
  ASSERT_EQ(a.decode.size(), 8u);
  for (size_t t = 0; t < 8; ++t) EXPECT_EQ(a.decode[t], static_cast<int32_t>(t));
  const StepLayout graph = StepLayout::For(8, 8, 8, 8);
  EXPECT_EQ(graph.num_decode_tokens, 8);
  EXPECT_EQ(graph.num_prefill_tiles, 0);
}

}  // namespace
}  // namespace convoy::cuda
