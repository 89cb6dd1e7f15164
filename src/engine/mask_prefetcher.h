// Computes constrained rows' token masks (step/token_constraint.h) on a thread of its own while
// the executor runs the step's forward pass, so that a grammar's work overlaps the model's. The
// executor's sampler waits for a mask still being computed, or computes one not yet started
// itself, so nothing depends on this thread keeping up. The thread starts with the first mask:
// an engine that never sees a constraint has no thread and no cost.
#ifndef CONVOY_ENGINE_MASK_PREFETCHER_H_
#define CONVOY_ENGINE_MASK_PREFETCHER_H_

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "step/step.h"

namespace convoy {

class MaskPrefetcher {
 public:
  MaskPrefetcher() = default;
  MaskPrefetcher(const MaskPrefetcher&) = delete;
  MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;
  // Stops the thread; masks not yet computed are left to their samplers.
  ~MaskPrefetcher();

  // Queues the allowed_tokens of `plan`'s sampling rows. Called by one thread (the engine loop).
  void Prefetch(const StepPlan& plan);

 private:
  void Run();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); }

  absl::Mutex mu_;
  std::deque<std::shared_ptr<TokenMask>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first Prefetch with a mask
};

}  // namespace convoy

#endif  // CONVOY_ENGINE_MASK_PREFETCHER_H_
