#include "engine/mask_prefetcher.h"

#include <utility>

namespace convoy {

MaskPrefetcher::~MaskPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void MaskPrefetcher::Prefetch(const StepPlan& plan) {
  bool any = false;
  {
    absl::MutexLock lock(&mu_);
    for (const StepRow& row : plan.rows) {
      if (row.allowed_tokens == nullptr) continue;
      queue_.push_back(row.allowed_tokens);
      any = true;
    }
  }
  if (any && !thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void MaskPrefetcher::Run() {
  for (;;) {
    std::shared_ptr<TokenMask> mask;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &MaskPrefetcher::HasWork));
      if (stopping_) return;
      mask = std::move(queue_.front());
      queue_.pop_front();
    }
    mask->Prefetch();
  }
}

}  // namespace convoy
