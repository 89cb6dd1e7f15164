#include "kv/block_allocator.h"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kv/block_table.h"
#include "kv/kv_cache_spec.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

TEST(BlockAllocatorTest, HandsOutDistinctBlocksUntilFull) {
  BlockAllocator a(8);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(5, &got));
  ASSERT_OK(a.Allocate(3, &got));
  EXPECT_EQ(std::set<BlockId>(got.begin(), got.end()).size(), 8u);
  EXPECT_EQ(a.num_free(), 0);
  for (BlockId b : got) EXPECT_EQ(a.ref_count(b), 1);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, AllocationIsAllOrNothing) {
  BlockAllocator a(4);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(3, &got));
  EXPECT_THAT(a.Allocate(2, &got),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("2 blocks needed, 1 of 4")));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, SharedBlockReturnsOnlyAfterLastRelease) {
  BlockAllocator a(2);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(1, &got));
  ASSERT_OK(a.AddRef(got[0]));
  EXPECT_EQ(a.ref_count(got[0]), 2);
  ASSERT_OK(a.Release(got[0]));
  EXPECT_EQ(a.num_free(), 1);
  ASSERT_OK(a.Release(got[0]));
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, RejectsReleaseOrAddRefOfFreeBlocks) {
  BlockAllocator a(2);
  EXPECT_THAT(a.Release(0), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("block 0")));
  EXPECT_THAT(a.AddRef(1), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("block 1")));
  EXPECT_THAT(a.Release(7), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("block 7")));
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockTableTest, ReservesWholeBlocksAndReleasesAll) {
  BlockAllocator a(10);
  BlockTable t(16);
  EXPECT_EQ(t.BlocksNeeded(1), 1);
  EXPECT_EQ(t.BlocksNeeded(16), 1);
  EXPECT_EQ(t.BlocksNeeded(17), 2);
  ASSERT_OK(t.Reserve(17, &a));
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(t.capacity(), 32);
  ASSERT_OK(t.Reserve(32, &a));  // already held
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_THAT(t.Reserve(16 * 12, &a),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("")));
  EXPECT_EQ(t.blocks().size(), 2u) << "a failed reserve must change nothing";
  EXPECT_EQ(a.num_free(), 8);
  t.ReleaseAll(&a);
  EXPECT_TRUE(t.blocks().empty());
  EXPECT_EQ(a.num_free(), 10);
  EXPECT_OK(a.CheckInvariants());
}

TEST(KvCacheSpecTest, BlocksComeFromTheMemoryBudget) {
  KvCacheSpec spec;
  spec.num_layers = 2;
  spec.num_kv_heads = 4;
  spec.head_dim = 8;
  spec.block_size = 16;
  EXPECT_EQ(spec.BytesPerBlock(), 2 * 2 * 4 * 8 * 16 * 4);
  EXPECT_EQ(spec.BlocksForBudget(spec.BytesPerBlock() * 10 + 5), 10);
  spec.dtype = KvDtype::kBF16;
  EXPECT_EQ(spec.BytesPerBlock(), 2 * 2 * 4 * 8 * 16 * 2);
  // One byte per element and a 2-byte scale per token, KV head and k|v.
  spec.dtype = KvDtype::kInt8;
  EXPECT_EQ(spec.BytesPerBlock(), 2 * 2 * 4 * 16 * (8 + 2));
}

// Random sequences grow, share and end; the invariants hold after every operation and every
// block is free at the end.
TEST(BlockAllocatorTest, RandomWorkloadKeepsInvariantsAndLeaksNothing) {
  std::mt19937 rng(7);
  BlockAllocator a(64);
  std::vector<BlockTable> live;
  std::vector<std::vector<BlockId>> shared;  // extra references taken on others' blocks
  for (int op = 0; op < 5000; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind == 0 || live.empty()) {
      BlockTable t(8);
      if (t.Reserve(std::uniform_int_distribution<int>(1, 40)(rng), &a).ok())
        live.push_back(std::move(t));
    } else if (kind == 1) {
      BlockTable& t = live[rng() % live.size()];
      const int64_t before = static_cast<int64_t>(t.blocks().size());
      const int32_t free_before = a.num_free();
      absl::Status s = t.Reserve(t.capacity() + std::uniform_int_distribution<int>(1, 20)(rng), &a);
      if (!s.ok()) {
        EXPECT_EQ(static_cast<int64_t>(t.blocks().size()), before);
        EXPECT_EQ(a.num_free(), free_before);
      }
    } else if (kind == 2) {
      BlockTable& t = live[rng() % live.size()];
      if (!t.blocks().empty()) {
        const BlockId b = t.blocks()[rng() % t.blocks().size()];
        ASSERT_OK(a.AddRef(b));
        shared.push_back({b});
      }
    } else {
      const size_t i = rng() % live.size();
      live[i].ReleaseAll(&a);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      if (!shared.empty() && rng() % 2 == 0) {
        ASSERT_OK(a.Release(shared.back()[0]));
        shared.pop_back();
      }
    }
    ASSERT_OK(a.CheckInvariants());
  }
  for (BlockTable& t : live) t.ReleaseAll(&a);
  for (auto& s : shared) ASSERT_OK(a.Release(s[0]));
  EXPECT_EQ(a.num_free(), a.num_blocks());
  EXPECT_OK(a.CheckInvariants());
}

}  // namespace
}  // namespace convoy
