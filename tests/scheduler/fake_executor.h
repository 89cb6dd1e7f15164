// A fake executor for scheduler tests. It keeps a fake KV cache of token ids, written and read only
// through each row's block table, and "samples" a token that is a hash of every token at positions
// [0, end) read back from that cache (under a sliding window, of the latest `window` only). So a
// request's tokens depend only on its own tokens, exactly when the scheduler's block tables,
// positions and recomputation are right; a wrong block, a block shared by two live sequences, or a
// lost token changes them.
#ifndef CONVOY_TESTS_SCHEDULER_FAKE_EXECUTOR_H_
#define CONVOY_TESTS_SCHEDULER_FAKE_EXECUTOR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "executor/executor.h"
#include "kv/block_table.h"

namespace convoy::testing {

// Tokens the fake samples are under kFakeVocab; its model takes prompt tokens under
// kFakeModelVocab (tests use ids from 1000 up for shared prefixes).
inline constexpr int32_t kFakeVocab = 1000;
inline constexpr int32_t kFakeModelVocab = 1 << 20;

// The token that follows `tokens` (the whole sequence so far).
inline int32_t FakeNextToken(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ull;
    h *= 1099511628211ull;
  }
  return static_cast<int32_t>(h % kFakeVocab);
}

// The tokens a request generates when it runs alone (no stop tokens); under a sliding window of
// `window` positions (0: none), each from the latest `window` tokens.
inline std::vector<int32_t> FakeExpectedTokens(std::vector<int32_t> prompt, int n,
                                               int64_t window = 0) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const auto first = prompt.end() - std::min<int64_t>(window > 0 ? window : std::ssize(prompt),
                                                        std::ssize(prompt));
    out.push_back(FakeNextToken(std::vector<int32_t>(first, prompt.end())));
    prompt.push_back(out.back());
  }
  return out;
}

class FakeExecutor final : public Executor {
 public:
  FakeExecutor(int32_t num_blocks, int32_t block_size)
      : cache_(static_cast<size_t>(num_blocks) * block_size, -1) {
    model_.vocab_size = kFakeModelVocab;
    kv_.block_size = block_size;
    kv_.num_blocks = num_blocks;
  }

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override {
    plans_.push_back(plan);
    if (absl::Status within = WithinLimits(plan); !within.ok()) {
      ++steps_beyond_limits_;
      return within;
    }
    if (fail_next_) {
      fail_next_ = false;
      return absl::InternalError("injected failure");
    }
    const int32_t bs = kv_.block_size;
    // The block tables are the executor's copy, kept between steps from what each row carries
    // (executor/block_tables.h): a wrong delta from the scheduler reads the wrong tokens below.
    if (absl::Status accepted = AcceptTables(plan); !accepted.ok()) return accepted;
    StepResult result;
    std::vector<std::vector<BlockId>>& tables = tables_.emplace_back();
    for (size_t r = 0; r < plan.rows.size(); ++r) {
      const StepRow& row = plan.rows[r];
      const absl::Span<const BlockId> table = TableOf(row);
      tables.emplace_back(table.begin(), table.end());
      const int64_t end = row.start_pos + static_cast<int64_t>(row.token_ids.size());
      if (row.token_ids.empty() || static_cast<int64_t>(table.size()) * bs < end) {
        return absl::InvalidArgumentError(absl::StrCat("row ", r, " is malformed"));
      }
      const int64_t unread = BlocksBeforeWindow(row.start_pos, model_.KvWindow(), kv_.block_size);
      for (size_t i = 0; i < table.size(); ++i) {
        const BlockId b = table[i];
        if (b == kNoBlock && static_cast<int64_t>(i) < unread) continue;
        if (b < 0 || b >= kv_.num_blocks) {
          return absl::InvalidArgumentError(absl::StrCat("row ", r, " has block ", b));
        }
      }
      for (size_t i = 0; i < row.token_ids.size(); ++i) {
        const int64_t pos = row.start_pos + static_cast<int64_t>(i);
        cache_[Slot(row, pos)] = row.token_ids[i];
      }
      result.padded_length =
          std::max(result.padded_length, static_cast<int32_t>(row.token_ids.size()));
      result.real_tokens += static_cast<int64_t>(row.token_ids.size());
    }
    for (const StepRow& row : plan.rows) {
      RowResult out;
      out.seq_id = row.seq_id;
      if (row.sample) {
        const int64_t end = row.start_pos + static_cast<int64_t>(row.token_ids.size());
        std::vector<int32_t> context;
        const int64_t window = model_.KvWindow();
        for (int64_t pos = window > 0 ? std::max<int64_t>(0, end - window) : 0; pos < end; ++pos) {
          context.push_back(cache_[Slot(row, pos)]);
        }
        out.token = FakeNextToken(context);
        out.logprob = -1.0f;
      }
      result.rows.push_back(std::move(out));
    }
    result.padded_tokens =
        static_cast<int64_t>(plan.rows.size()) * result.padded_length - result.real_tokens;
    return result;
  }
  const ModelConfig& model_config() const override { return model_; }
  // A model whose every layer attends through a sliding window of `window` positions (0: none).
  void set_sliding_window(int64_t window) { model_.sliding_window = window; }
  const KvCacheSpec& kv_spec() const override { return kv_; }
  ExecutorLimits limits() const override { return limits_; }
  // The limits this fake states and enforces: a step beyond them fails (INTERNAL) and counts.
  void set_limits(const ExecutorLimits& limits) { limits_ = limits; }
  int64_t steps_beyond_limits() const { return steps_beyond_limits_; }

  const std::vector<StepPlan>& plans() const { return plans_; }
  // Per step that ran, each row's whole block table as this executor held it (the plans carry
  // only what changed).
  const std::vector<std::vector<std::vector<BlockId>>>& tables() const { return tables_; }
  void FailNextStep() { fail_next_ = true; }

 private:
  std::vector<std::vector<std::vector<BlockId>>> tables_;

  size_t Slot(const StepRow& row, int64_t pos) const {
    const int32_t bs = kv_.block_size;
    return static_cast<size_t>(TableOf(row)[pos / bs]) * bs + pos % bs;
  }

  absl::Status WithinLimits(const StepPlan& plan) const {
    const int64_t rows = static_cast<int64_t>(plan.rows.size());
    int64_t longest = 0, packed = 0;
    for (const StepRow& row : plan.rows) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(row.token_ids.size()));
      packed += static_cast<int64_t>(row.token_ids.size());
    }
    const int64_t slots = limits_.computes_padding ? rows * longest : packed;
    if (limits_.max_rows_per_step > 0 && rows > limits_.max_rows_per_step) {
      return absl::InternalError(
          absl::StrCat("a step of ", rows, " rows; the limit is ", limits_.max_rows_per_step));
    }
    if (limits_.max_tokens_per_step > 0 && slots > limits_.max_tokens_per_step) {
      return absl::InternalError(absl::StrCat("a step of ", slots, " token slots; the limit is ",
                                              limits_.max_tokens_per_step));
    }
    return absl::OkStatus();
  }

  ExecutorLimits limits_;
  std::atomic<int64_t> steps_beyond_limits_{0};
  ModelConfig model_;
  KvCacheSpec kv_;
  std::vector<int32_t> cache_;
  std::vector<StepPlan> plans_;
  bool fail_next_ = false;
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SCHEDULER_FAKE_EXECUTOR_H_
