// Serving a list of requests through an EngineLoop and collecting what each got, for tests of
// the sampling hooks (token constraints, logit adjustments) on a real executor.
#ifndef CONVOY_TESTS_SCHEDULER_SERVE_ENGINE_H_
#define CONVOY_TESTS_SCHEDULER_SERVE_ENGINE_H_

#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine_loop.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "status_matchers.h"

namespace convoy::testing {

struct Served {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<float>> logprobs;
  std::map<RequestId, Event> finals;
  // What the first token's event brought of a request that scores its prompt.
  std::map<RequestId, std::vector<float>> prompt_logprobs;
  int64_t preemptions = 0;
};

// Serves `requests` through an EngineLoop over `executor` and waits for every final event.
inline Served Serve(Executor& executor, std::vector<Request> requests, int32_t max_batch_size = 16,
                    int32_t prefill_chunk_size = 512) {
  EngineLoopOptions options;
  options.scheduler = TestOptions();
  options.scheduler.max_batch_size = max_batch_size;
  options.scheduler.prefill_chunk_size = prefill_chunk_size;
  options.scheduler.enable_prefix_caching = false;
  auto loop = EngineLoop::Create(&executor, options);
  EXPECT_OK(loop);
  Served served;
  if (!loop.ok()) return served;
  absl::Mutex mu;
  const size_t n = requests.size();
  for (Request& request : requests) {
    EXPECT_OK((*loop)->Submit(std::move(request), [&](const Event& event) {
      absl::MutexLock lock(&mu);
      if (event.kind == Event::Kind::kToken) {
        served.tokens[event.request_id].push_back(event.token);
        served.logprobs[event.request_id].push_back(event.logprob);
        if (!event.prompt_logprobs.empty()) {
          served.prompt_logprobs[event.request_id] = event.prompt_logprobs;
        }
      } else {
        served.finals[event.request_id] = event;
      }
    }));
  }
  {
    absl::MutexLock lock(&mu);
    auto done = [&] { return served.finals.size() >= n; };
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Minutes(2)));
  }
  served.preemptions = (*loop)->snapshot().stats.preemptions;
  return served;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_SCHEDULER_SERVE_ENGINE_H_
