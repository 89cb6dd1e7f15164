// How the running batch is formed, the one place where continuous and static batching differ.
//
// Continuous (Orca's iteration-level scheduling): any waiting request may join the running batch
// between two steps, and each leaves it, with its result, when it is done. Static (the baseline of
// the comparison in docs/perf/cpu.md): the firing rule starts a batch, no one else joins it until
// its last member has finished (only its own members come back after a preemption), and its
// members' results are handed back together when it ends, as a server that runs whole batches
// returns them.
//
// The scheduler asks its policy at those points and nowhere else keeps mode-specific state.
#ifndef CONVOY_SCHEDULER_BATCH_POLICY_H_
#define CONVOY_SCHEDULER_BATCH_POLICY_H_

#include <memory>
#include <vector>

#include "scheduler/request.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/sequence.h"

namespace convoy {

class BatchPolicy {
 public:
  static std::unique_ptr<BatchPolicy> Create(BatchingMode mode);
  virtual ~BatchPolicy() = default;

  // Whether a batch runs now (`any_running`: some sequence is in the running set). While one
  // does, waiting sequences that MayJoin it are admitted between steps; otherwise the firing rule
  // decides when a new one starts.
  virtual bool BatchRunning(bool any_running) const = 0;
  // The firing rule starts a new batch; the sequences admitted next are its members.
  virtual void BatchFired() {}
  // The batch that fired admitted no one: none runs.
  virtual void NoneAdmitted() {}
  // Whether the waiting `seq` may join the batch that runs.
  virtual bool MayJoin(const Sequence& seq) const = 0;
  // `seq` was admitted.
  virtual void Joined(Sequence* seq) = 0;
  // `seq` (a sequence of the scheduler) ended with `final`: into `out` now, or held back until
  // its batch ends, and then every held one in the order they ended.
  virtual void Ended(const Sequence& seq, Event final, bool complete, std::vector<Event>* out) = 0;
  // Whether the final event of `id` is held back (its request is done but not yet returned).
  virtual bool Holds(RequestId id) const = 0;
};

}  // namespace convoy

#endif  // CONVOY_SCHEDULER_BATCH_POLICY_H_
