#include "scheduler/batch_policy.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace convoy {
namespace {

class ContinuousBatching final : public BatchPolicy {
 public:
  bool BatchRunning(bool any_running) const override { return any_running; }
  bool MayJoin(const Sequence& /*seq*/) const override { return true; }
  void Joined(Sequence* /*seq*/) override {}
  void Ended(const Sequence& /*seq*/, Event final, bool /*complete*/,
             std::vector<Event>* out) override {
    out->push_back(std::move(final));
  }
  bool Holds(RequestId /*id*/) const override { return false; }
};

class StaticBatching final : public BatchPolicy {
 public:
  bool BatchRunning(bool /*any_running*/) const override { return batch_ >= 0; }
  void BatchFired() override {
    batch_ = next_batch_++;
    members_left_ = 0;
  }
  void NoneAdmitted() override { batch_ = -1; }
  // Only the batch's own members (back after a preemption) join a running batch.
  bool MayJoin(const Sequence& seq) const override { return seq.static_batch == batch_; }
  void Joined(Sequence* seq) override {
    if (seq->static_batch >= 0) return;  // a member coming back
    seq->static_batch = batch_;
    ++members_left_;
  }
  void Ended(const Sequence& seq, Event final, bool complete, std::vector<Event>* out) override {
    if (batch_ < 0 || seq.static_batch != batch_) {
      out->push_back(std::move(final));
      return;
    }
    --members_left_;
    // A member that failed or was cancelled is answered at once; the complete ones wait.
    if (complete) {
      held_.push_back(std::move(final));
    } else {
      out->push_back(std::move(final));
    }
    if (members_left_ > 0) return;
    for (Event& event : held_) out->push_back(std::move(event));
    held_.clear();
    batch_ = -1;
  }
  bool Holds(RequestId id) const override {
    return std::any_of(held_.begin(), held_.end(),
                       [id](const Event& event) { return event.request_id == id; });
  }

 private:
  int64_t batch_ = -1;  // the batch that runs; -1: none
  int64_t next_batch_ = 0;
  int64_t members_left_ = 0;
  std::vector<Event> held_;
};

}  // namespace

std::unique_ptr<BatchPolicy> BatchPolicy::Create(BatchingMode mode) {
  if (mode == BatchingMode::kStatic) return std::make_unique<StaticBatching>();
  return std::make_unique<ContinuousBatching>();
}

}  // namespace convoy
