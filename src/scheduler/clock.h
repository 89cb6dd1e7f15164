// Where the scheduler's "now" comes from. The scheduler itself takes `now` as an argument; the
// engine loop reads it from a Clock, and tests drive a FakeClock by hand.
#ifndef CONVOY_SCHEDULER_CLOCK_H_
#define CONVOY_SCHEDULER_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convoy {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock. Thread-safe.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  // A process-wide instance.
  static RealClock* Get() {
    static RealClock* clock = new RealClock;
    return clock;
  }
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_;
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_CLOCK_H_
