// A fixed set of threads that run queued tasks, first queued first started: for work a front end
// must keep off threads that have to stay responsive (the HTTP server's io threads).
#ifndef CONVOY_FRONTEND_WORKER_POOL_H_
#define CONVOY_FRONTEND_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace convoy {

// Thread-safe.
class WorkerPool {
 public:
  // Starts max(threads, 1) threads.
  explicit WorkerPool(int threads);
  // Runs every task still queued, then joins the threads. REQUIRES: not called from a task.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` to run on one of the threads.
  void Run(std::function<void()> task);

 private:
  void Work();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_WORKER_POOL_H_
