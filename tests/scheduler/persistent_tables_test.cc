// The persistent batch: the executor keeps each sequence's block table between steps
// (executor/block_tables.h) and a plan carries only what changed. The FakeExecutor reads every
// token through its own copy of the tables, so a wrong delta changes the tokens these tests
// compare with FakeExpectedTokens.
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/algorithm/container.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "kv/block_table.h"

namespace convoy::testing {
namespace {

// What the rows of every plan that ran sent, per sequence: entries in all, rows, rows that sent
// nothing.
struct Sent {
  int64_t entries = 0;
  int64_t rows = 0;
  int64_t empty_rows = 0;
};

std::map<int64_t, Sent> SentPerSequence(const Harness& h) {
  std::map<int64_t, Sent> sent;
  for (const StepPlan& plan : h.plans()) {
    for (const StepRow& row : plan.rows) {
      Sent& s = sent[row.seq_id];
      s.entries += static_cast<int64_t>(row.block_table.size());
      ++s.rows;
      if (row.block_table.empty()) ++s.empty_rows;
    }
  }
  return sent;
}

void ExpectEachBlockSentOnce(bool plan_ahead) {
  Harness h(TestOptions());  // blocks of 4 tokens
  h.plan_ahead = plan_ahead;
  const Request a = MakeRequest(1, 10, 30);
  const Request b = MakeRequest(2, 3, 45);
  ASSERT_OK(h.Submit(a));
  ASSERT_OK(h.Submit(b));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(a.prompt_tokens, 30));
  EXPECT_EQ(h.tokens[2], FakeExpectedTokens(b.prompt_tokens, 45));
  const std::map<int64_t, Sent> sent = SentPerSequence(h);
  // Positions computed: the prompt and every token but the last. 10 + 29 = 39 in 10 blocks;
  // 3 + 44 = 47 in 12.
  EXPECT_EQ(sent.at(1).entries, 10);
  EXPECT_EQ(sent.at(2).entries, 12);
  // Rows that carry entries: the prompt's (3 blocks; 1) and each decode row that starts a block.
  // Every other decode row fits the blocks already sent and carries none.
  EXPECT_EQ(sent.at(1).rows - sent.at(1).empty_rows, 1 + (10 - 3));
  EXPECT_EQ(sent.at(2).rows - sent.at(2).empty_rows, 1 + (12 - 1));
  EXPECT_EQ(sent.at(1).rows, 30);
}

TEST(PersistentTablesTest, EachBlockIsSentOnce) { ExpectEachBlockSentOnce(false); }

TEST(PersistentTablesTest, EachBlockIsSentOnceWithStepsPlannedAhead) {
  ExpectEachBlockSentOnce(true);
}

// Each row continues the entries the executor holds: first_block is what the sequence's earlier
// rows sent.
TEST(PersistentTablesTest, RowsContinueWhatTheExecutorHolds) {
  Harness h(TestOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 9, 20)));
  h.RunUntilIdle();
  int64_t held = 0;
  for (const StepPlan& plan : h.plans()) {
    ASSERT_EQ(plan.rows.size(), 1u);
    const StepRow& row = plan.rows[0];
    EXPECT_EQ(row.first_block, held) << "row at " << row.start_pos;
    held = row.first_block + static_cast<int64_t>(row.block_table.size());
  }
  ASSERT_FALSE(h.executor.tables().empty());
  EXPECT_EQ(static_cast<int64_t>(h.executor.tables().back()[0].size()), held);
}

// A sequence that ends is named in the next plan, and the executor drops its table.
TEST(PersistentTablesTest, TheNextPlanReleasesASequenceThatEnded) {
  Harness h(TestOptions());
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 2)));
  ASSERT_OK(h.Submit(MakeRequest(2, 4, 10)));
  while (!h.Finished(1)) ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.executor.block_tables().held(1), 2);  // ended with the step it ran last
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.decision.plan->released, std::vector<int64_t>{1});
  EXPECT_EQ(h.executor.block_tables().held(1), 0);
  EXPECT_EQ(h.executor.block_tables().num_sequences(), 1u);
  h.RunUntilIdle();
  // A later request's first plan releases the last ones.
  ASSERT_OK(h.Submit(MakeRequest(3, 4, 2)));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.decision.plan->released, std::vector<int64_t>{2});
  EXPECT_EQ(h.executor.block_tables().num_sequences(), 1u);
  EXPECT_EQ(h.executor.block_tables().held(3), 1);
}

// A cancelled sequence and one whose row fails the executor's check are released too.
TEST(PersistentTablesTest, CancelledAndFailedSequencesAreReleased) {
  Harness h(TestOptions());
  Request bad = MakeRequest(3, 4, 5);
  bad.prompt_tokens[1] = kFakeModelVocab + 1;  // outside the model's vocabulary: its row fails
  ASSERT_OK(h.Submit(MakeRequest(1, 4, 8)));
  ASSERT_OK(h.Submit(MakeRequest(2, 4, 8)));
  ASSERT_TRUE(h.Step());
  ASSERT_OK(h.Submit(bad));
  ASSERT_OK(h.Cancel(2));
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.Final(3).outcome, Outcome::kFailed);
  EXPECT_EQ(h.Final(2).outcome, Outcome::kCancelled);
  // The plan as planned: the executor saw it without the bad row, its releases applied first.
  EXPECT_EQ(h.decision.plan->released, std::vector<int64_t>{2});
  EXPECT_EQ(h.executor.block_tables().held(3), 0);
  ASSERT_TRUE(h.Step());
  EXPECT_EQ(h.decision.plan->released, std::vector<int64_t>{3});
  EXPECT_EQ(h.executor.block_tables().num_sequences(), 1u);
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(MakePrompt(1, 4), 8));
}

// A preempted sequence is released, and its first row after it resumes sends its table whole.
TEST(PersistentTablesTest, APreemptedSequenceIsSentWholeWhenItResumes) {
  SchedulerOptions options = TestOptions();
  options.num_blocks = 8;
  options.enable_prefix_caching = false;
  Harness h(options);
  ASSERT_OK(h.Submit(MakeRequest(1, 8, 16)));
  ASSERT_OK(h.Submit(MakeRequest(2, 8, 16)));
  h.RunUntilIdle();
  ASSERT_GT(h.scheduler->stats().preemptions, 0);
  std::set<int64_t> released;  // since their last row
  int64_t resumed = 0;
  for (const StepPlan& plan : h.plans()) {
    for (int64_t id : plan.released) released.insert(id);
    for (const StepRow& row : plan.rows) {
      if (released.erase(row.seq_id) > 0) {
        ++resumed;
        EXPECT_EQ(row.first_block, 0);
        EXPECT_EQ(row.start_pos, 0);
      }
    }
  }
  EXPECT_EQ(resumed, h.scheduler->stats().preemptions);
  for (int id = 1; id <= 2; ++id) {
    EXPECT_EQ(h.tokens[id], FakeExpectedTokens(MakePrompt(id, 8), 16)) << id;
  }
}

// Under a sliding window the entries given back are sent again as kNoBlock, so the executor's
// copy names no block its sequence gave back.
TEST(PersistentTablesTest, EntriesGivenBackUnderAWindowReachTheExecutor) {
  SchedulerOptions options = TestOptions();
  options.sliding_window = 6;
  Harness h(options);
  const Request request = MakeRequest(1, 5, 40);
  ASSERT_OK(h.Submit(request));
  h.RunUntilIdle();
  EXPECT_EQ(h.tokens[1], FakeExpectedTokens(request.prompt_tokens, 40, 6));
  ASSERT_EQ(h.executor.tables().size(), h.plans().size());
  // Each step's copy: an entry is kNoBlock exactly when it lies wholly before the window of the
  // row's first position.
  for (size_t i = 0; i < h.plans().size(); ++i) {
    const StepRow& row = h.plans()[i].rows[0];
    const std::vector<BlockId>& table = h.executor.tables()[i][0];
    const int64_t unread = BlocksBeforeWindow(row.start_pos, 6, 4);
    const int64_t gone = absl::c_count(table, kNoBlock);
    EXPECT_EQ(gone, unread) << "step " << i;
    for (int64_t e = 0; e < gone; ++e) EXPECT_EQ(table[e], kNoBlock);
  }
}

}  // namespace
}  // namespace convoy::testing
