// Prefix caching in the kv module: the chained block hash, and the allocator's cached blocks
// (reuse, least-recently-released eviction, reference counts).
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv/block_allocator.h"
#include "kv/block_hash.h"
#include "kv/block_table.h"
#include "status_matchers.h"

namespace convoy {
namespace {

std::vector<int32_t> Iota(int n, int first) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

TEST(BlockHashTest, SameTokensGiveTheSameChain) {
  std::vector<BlockHash> a;
  std::vector<BlockHash> b;
  ExtendBlockHashes(Iota(12, 7), 4, &a);
  ExtendBlockHashes(Iota(12, 7), 4, &b);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b);
  // Equal blocks at different places in the chain differ.
  std::vector<BlockHash> repeated;
  ExtendBlockHashes(std::vector<int32_t>{1, 2, 1, 2}, 2, &repeated);
  ASSERT_EQ(repeated.size(), 2u);
  EXPECT_NE(repeated[0], repeated[1]);
}

TEST(BlockHashTest, ADifferentEarlierBlockChangesEveryLaterHash) {
  std::vector<int32_t> tokens = Iota(16, 0);
  std::vector<BlockHash> base;
  ExtendBlockHashes(tokens, 4, &base);
  tokens[5] = 99;  // in block 1
  std::vector<BlockHash> changed;
  ExtendBlockHashes(tokens, 4, &changed);
  ASSERT_EQ(changed.size(), 4u);
  EXPECT_EQ(changed[0], base[0]);
  for (int i = 1; i < 4; ++i) EXPECT_NE(changed[i], base[i]) << i;
}

TEST(BlockHashTest, PartialBlocksHaveNoHashAndGrowingTokensExtendTheChain) {
  std::vector<int32_t> tokens = Iota(7, 3);
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(tokens, 4, &hashes);
  EXPECT_EQ(hashes.size(), 1u);  // 4 of 7 tokens fill one block; 3 are partial
  tokens.push_back(50);
  ExtendBlockHashes(tokens, 4, &hashes);
  std::vector<BlockHash> fresh;
  ExtendBlockHashes(tokens, 4, &fresh);
  EXPECT_EQ(hashes, fresh);
  EXPECT_EQ(hashes.size(), 2u);
}

TEST(PrefixCacheAllocatorTest, ReleasedPublishedBlocksStayFindableAndCountAsFree) {
  BlockAllocator a(4);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(2, &got));
  EXPECT_TRUE(a.Publish(got[0], 11));
  EXPECT_FALSE(a.Publish(got[1], 11)) << "one block per content";
  EXPECT_FALSE(a.Publish(got[0], 12)) << "a block's content does not change";
  EXPECT_EQ(a.Lookup(11), got[0]);
  EXPECT_EQ(a.Lookup(12), std::nullopt);
  ASSERT_OK(a.Release(got[0]));
  ASSERT_OK(a.Release(got[1]));
  EXPECT_EQ(a.num_free(), 4);
  EXPECT_EQ(a.num_cached(), 1);
  EXPECT_EQ(a.num_evictable(), 1);
  EXPECT_EQ(a.Lookup(11), got[0]);
  // Taken back into use: no longer evictable.
  ASSERT_OK(a.AddRef(got[0]));
  EXPECT_EQ(a.ref_count(got[0]), 1);
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_OK(a.CheckInvariants());
  // A block with no content cannot be taken back once free.
  EXPECT_THAT(a.AddRef(got[1]),
              testing::StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

TEST(PrefixCacheAllocatorTest, FreeBlocksGoFirstThenTheLeastRecentlyReleasedCachedOnes) {
  BlockAllocator a(4);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(3, &got));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.Publish(got[i], 100 + i));
  // Released in the order 1, 0, 2: 1 is the least recently released.
  ASSERT_OK(a.Release(got[1]));
  ASSERT_OK(a.Release(got[0]));
  ASSERT_OK(a.Release(got[2]));
  std::vector<BlockId> next;
  ASSERT_OK(a.Allocate(1, &next));  // the one block never used
  EXPECT_EQ(a.num_evictions(), 0);
  EXPECT_EQ(a.num_cached(), 3);
  ASSERT_OK(a.Allocate(1, &next));
  EXPECT_EQ(next.back(), got[1]);
  EXPECT_EQ(a.Lookup(101), std::nullopt);
  ASSERT_OK(a.Allocate(1, &next));
  EXPECT_EQ(next.back(), got[0]);
  EXPECT_EQ(a.num_evictions(), 2);
  EXPECT_EQ(a.Lookup(102), got[2]);
  EXPECT_OK(a.CheckInvariants());
}

TEST(PrefixCacheAllocatorTest, ACachedBlockInUseIsNeverEvicted) {
  BlockAllocator a(3);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(2, &got));
  ASSERT_TRUE(a.Publish(got[0], 1));
  ASSERT_TRUE(a.Publish(got[1], 2));
  ASSERT_OK(a.Release(got[0]));
  ASSERT_OK(a.Release(got[1]));
  // A second sequence shares block 0's content; only block 1 may be evicted.
  ASSERT_OK(a.AddRef(got[0]));
  ASSERT_OK(a.AddRef(got[0]));
  EXPECT_EQ(a.ref_count(got[0]), 2);
  std::vector<BlockId> next;
  EXPECT_THAT(a.Allocate(3, &next),
              testing::StatusIs(absl::StatusCode::kResourceExhausted, ::testing::_));
  ASSERT_OK(a.Allocate(2, &next));
  EXPECT_EQ(a.Lookup(1), got[0]);
  EXPECT_EQ(a.Lookup(2), std::nullopt);
  EXPECT_EQ(a.num_free(), 0);
  // Only after the last reference goes is it evictable again.
  ASSERT_OK(a.Release(got[0]));
  EXPECT_EQ(a.num_evictable(), 0);
  ASSERT_OK(a.Release(got[0]));
  EXPECT_EQ(a.num_evictable(), 1);
  EXPECT_OK(a.CheckInvariants());
}

TEST(PrefixCacheAllocatorTest, ATableReleasesItsLastBlockFirst) {
  BlockAllocator a(4);
  BlockTable table(4);
  ASSERT_OK(table.Reserve(12, &a));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.Publish(table.blocks()[i], 10 + i));
  const std::vector<BlockId> held = table.blocks();
  table.ReleaseAll(&a);
  // The prefix's head is evicted last: the unused block, then blocks 2, 1, 0.
  std::vector<BlockId> next;
  ASSERT_OK(a.Allocate(3, &next));
  EXPECT_EQ(next[1], held[2]);
  EXPECT_EQ(next[2], held[1]);
  EXPECT_EQ(a.Lookup(10), held[0]);
  // A new table shares the cached head.
  BlockTable shared(4);
  ASSERT_OK(shared.AppendCached({held[0]}, &a));
  EXPECT_EQ(shared.capacity(), 4);
  EXPECT_EQ(a.ref_count(held[0]), 1);
  EXPECT_OK(a.CheckInvariants());
}

}  // namespace
}  // namespace convoy

namespace convoy {
namespace {

TEST(PrefixCacheAllocatorTest, LookupChecksTheTokensAndTheParentNotOnlyTheHash) {
  BlockAllocator a(4);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(3, &got));
  const std::vector<int32_t> first = {1, 2, 3, 4}, second = {5, 6, 7, 8};
  ASSERT_TRUE(a.Publish(got[0], 11, first));
  ASSERT_TRUE(a.Publish(got[1], 12, second, got[0]));
  EXPECT_EQ(a.Lookup(11, first), got[0]);
  EXPECT_EQ(a.Lookup(12, second, got[0]), got[1]);
  // The same hash with other tokens, or after another parent, finds nothing.
  EXPECT_EQ(a.Lookup(11, second), std::nullopt);
  EXPECT_EQ(a.Lookup(12, first, got[0]), std::nullopt);
  EXPECT_EQ(a.Lookup(12, second), std::nullopt);
  EXPECT_EQ(a.Lookup(12, second, got[2]), std::nullopt);
  // A parent that is not published vouches for no child.
  EXPECT_FALSE(a.Publish(got[2], 13, first, BlockId{3}));
  EXPECT_OK(a.CheckInvariants());
}

TEST(PrefixCacheAllocatorTest, AParentEvictedAndPublishedAgainNoLongerVouchesForItsChild) {
  BlockAllocator a(3);
  std::vector<BlockId> got;
  ASSERT_OK(a.Allocate(2, &got));
  const std::vector<int32_t> parent = {1, 2}, child = {3, 4}, other = {9, 9};
  ASSERT_TRUE(a.Publish(got[0], 21, parent));
  ASSERT_TRUE(a.Publish(got[1], 22, child, got[0]));
  // The parent is released first, so it is evicted first; the child stays cached.
  ASSERT_OK(a.Release(got[0]));
  ASSERT_OK(a.Release(got[1]));
  std::vector<BlockId> next;
  ASSERT_OK(a.Allocate(2, &next));  // the free block, then the parent's, evicted
  ASSERT_EQ(next[1], got[0]);
  ASSERT_TRUE(a.Publish(got[0], 23, other));
  ASSERT_OK(a.Release(got[0]));
  ASSERT_OK(a.Release(next[0]));
  // The child's hash is still published, but its parent's publication is gone.
  EXPECT_EQ(a.Lookup(22, child, got[0]), std::nullopt);
  EXPECT_OK(a.CheckInvariants());
}

}  // namespace
}  // namespace convoy
