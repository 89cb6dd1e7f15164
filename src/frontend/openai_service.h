// The OpenAI-compatible HTTP API on the HTTP server: POST /v1/chat/completions and
// /v1/completions (whole, or streamed as server-sent events) and GET /v1/models, over the shared
// request path (generation.h). openai_api.h owns the JSON; this file owns the HTTP exchange:
// one OpenAiCall per request, woken by its session, writing what is new whenever the connection
// has taken what was written before (a slow reader gets several tokens per event), and
// cancelling the request when the client goes away (its KV blocks are freed at the next step).
#ifndef CONVOY_FRONTEND_OPENAI_SERVICE_H_
#define CONVOY_FRONTEND_OPENAI_SERVICE_H_

#include "absl/status/status.h"
#include "frontend/generation.h"
#include "http/http_router.h"

namespace convoy {

// Adds the routes to `router`. `hub` must outlive the HTTP server.
absl::Status AddOpenAiRoutes(GenerationHub* hub, HttpRouter* router);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_OPENAI_SERVICE_H_
