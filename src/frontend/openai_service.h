// The OpenAI-compatible HTTP API on the HTTP server: POST /v1/chat/completions and
// /v1/completions (whole, or streamed as server-sent events) and GET /v1/models, over the shared
// request path (generation.h). openai_api.h owns the JSON; this file owns the HTTP exchange:
// one OpenAiCall per request, woken by its session, writing what is new whenever the connection
// has taken what was written before (a slow reader gets several tokens per event), and
// cancelling the request when the client goes away (its KV blocks are freed at the next step).
// Each request is parsed, tokenized and rendered by its chat template on the service's own
// threads, never on the HTTP server's io threads, which stay free to answer /health and /ready
// however long the prompts in flight.
#ifndef CONVOY_FRONTEND_OPENAI_SERVICE_H_
#define CONVOY_FRONTEND_OPENAI_SERVICE_H_

#include <functional>

#include "absl/status/status.h"
#include "frontend/generation.h"
#include "frontend/worker_pool.h"
#include "http/http_router.h"

namespace convoy {

struct OpenAiOptions {
  // Threads that parse, tokenize and render requests (at least 1).
  int prepare_threads = 2;
  // For tests: runs on a preparing thread before each request is parsed.
  std::function<void()> before_prepare;
};

// Owns the threads that prepare the requests. Thread-safe.
class OpenAiService {
 public:
  // `hub` must outlive the service.
  OpenAiService(GenerationHub* hub, OpenAiOptions options);
  // Prepares the requests still queued (each gets its answer, or finds its client gone), then
  // ends the threads. REQUIRES: the HTTP server holding the routes has been destroyed.
  ~OpenAiService();
  OpenAiService(const OpenAiService&) = delete;
  OpenAiService& operator=(const OpenAiService&) = delete;

  // Adds the routes to `router`, whose HTTP server must be destroyed before the service.
  absl::Status AddRoutes(HttpRouter* router);

 private:
  GenerationHub* const hub_;
  const std::function<void()> before_prepare_;
  WorkerPool pool_;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OPENAI_SERVICE_H_
