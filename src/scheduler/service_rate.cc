#include "scheduler/service_rate.h"

#include <cmath>

namespace convoy {

void QueueServiceRate::Observe(absl::Time now, int64_t started, bool still_waiting) {
  if (last_ && now > *last_) {
    const double dt = absl::ToDoubleSeconds(now - *last_);
    const double decay = std::exp(-dt / absl::ToDoubleSeconds(time_constant_));
    busy_seconds_ *= decay;
    started_ *= decay;
    if (waiting_) busy_seconds_ += dt;
  }
  // Starts after an interval with nobody waiting served new arrivals, not the queue. (A pass at
  // the same instant as the last one adds its starts to that interval.)
  if (last_ && waiting_) started_ += static_cast<double>(started);
  if (!last_ || now > *last_) last_ = now;
  waiting_ = still_waiting;
}

std::optional<double> QueueServiceRate::per_second() const {
  if (busy_seconds_ < absl::ToDoubleSeconds(kMinBusy)) return std::nullopt;
  return started_ / busy_seconds_;
}

std::optional<absl::Duration> QueueServiceRate::ExpectedWait(int64_t ahead) const {
  if (ahead <= 0) return absl::ZeroDuration();
  const std::optional<double> rate = per_second();
  if (!rate) return std::nullopt;
  if (*rate <= 0) return absl::InfiniteDuration();  // nothing started in a second of waiting
  return absl::Seconds(static_cast<double>(ahead) / *rate);
}

}  // namespace convoy
