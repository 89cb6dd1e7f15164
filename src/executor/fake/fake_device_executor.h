// An executor with no model behind it, for measuring the engine without a GPU: every step takes a
// fixed time from its launch, as a step launched on an idle device stream would, while the engine
// thread goes on; the plan is checked and sampled on a thread of the fake's own, and Collect sleeps
// until the step's end. It checks each plan as the real executors do and "samples" a token that
// depends only on the row's last token and position, so a request's output is the same whatever
// shares its steps. It keeps no KV cache and no weights: only the model's shape, for the plan
// checks and the scheduler's KV accounting.
//
// convoyd runs it with executor.device: FAKE (server_config.proto), so that convoy-bench measures
// the whole serving path against a known step time.
#ifndef CONVOY_EXECUTOR_FAKE_FAKE_DEVICE_EXECUTOR_H_
#define CONVOY_EXECUTOR_FAKE_FAKE_DEVICE_EXECUTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "executor/executor.h"

namespace convoy {

struct FakeDeviceOptions {
  // How long every step takes, from the device thread taking the plan to its result being ready.
  absl::Duration step_time = absl::Milliseconds(2);
  // Added per token slot of the step (a prefill chunk costs more than a decode row); 0 by default.
  absl::Duration time_per_token = absl::ZeroDuration();
  int32_t block_size = 16;
  // The KV cache the scheduler plans for; nothing is allocated. Must hold at least one block.
  int64_t kv_cache_bytes = int64_t{1} << 30;
  // Tokens never sampled (the model's end-of-generation ids), so that every request runs to its
  // max_tokens unless a constraint or stop string ends it.
  std::vector<int32_t> never_sample;
};

class FakeDeviceExecutor final : public Executor {
 public:
  // INVALID_ARGUMENT for a model without a vocabulary, a non-positive step time or block size, or
  // a KV budget that holds no block.
  static absl::StatusOr<std::unique_ptr<FakeDeviceExecutor>> Create(
      const ModelConfig& model, const FakeDeviceOptions& options);
  // Waits for the step in flight, if any.
  ~FakeDeviceExecutor() override;

  absl::StatusOr<StepResult> Step(const StepPlan& plan) override;
  absl::Status Launch(const StepPlan& plan) override;
  absl::StatusOr<StepResult> Collect() override;
  bool steps_asynchronously() const override { return true; }

  const ModelConfig& model_config() const override { return model_; }
  const KvCacheSpec& kv_spec() const override { return kv_; }
  ExecutorLimits limits() const override;
  // Its tokens come from no logits: it refuses min_p, penalties and logit_bias.
  absl::Status CheckRow(const StepRow& row) const override;

  // Whether a step is launched and not yet collected (tests).
  bool step_launched() const {
    absl::MutexLock lock(&mu_);
    return launched_;
  }
  // The token a sampling row gets after `last_token` at `position` with no constraint.
  int32_t TokenAfter(int32_t last_token, int64_t position) const;

 private:
  FakeDeviceExecutor(const ModelConfig& model, const FakeDeviceOptions& options);
  void DeviceThread();
  // Checks the plan and samples its rows (the step's time is the device thread's to spend).
  absl::Status Run(const StepPlan& plan, StepResult* result) const;

  const ModelConfig model_;
  KvCacheSpec kv_;
  const FakeDeviceOptions options_;
  const absl::flat_hash_set<int32_t> never_sample_;

  mutable absl::Mutex mu_;
  // The caller's side: a step is launched from Launch until Collect returns its result.
  bool launched_ ABSL_GUARDED_BY(mu_) = false;
  // The launched plan (the caller's, unchanged until Collect), until the device thread takes it.
  const StepPlan* pending_ ABSL_GUARDED_BY(mu_) = nullptr;
  // When the launched step started and when it ends.
  std::chrono::steady_clock::time_point step_start_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point step_end_ ABSL_GUARDED_BY(mu_);
  // The device thread's answer for the launched step, once done_.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status done_status_ ABSL_GUARDED_BY(mu_);
  StepResult done_result_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread device_;
};

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_FAKE_FAKE_DEVICE_EXECUTOR_H_
