// convoyd's health endpoints on its HTTP port, for load balancers and Kubernetes probes:
//   GET /health, /v2/health/live   200 whenever the process answers (liveness)
//   GET /ready,  /v2/health/ready  200 once the model is loaded and warmed up and the server is
//                                  not draining; 503 otherwise, with the reason in the JSON
//                                  error body (readiness)
// Readiness is the grpc.health.v1 service's own state (HealthService::readiness()), so the two
// protocols never disagree.
#ifndef CONVOY_DAEMON_HTTP_ROUTES_H_
#define CONVOY_DAEMON_HTTP_ROUTES_H_

#include "absl/status/status.h"
#include "frontend/health_service.h"
#include "http/http_router.h"

namespace convoy {

// `health` must outlive the server that serves the routes.
absl::Status AddHealthRoutes(const HealthService* health, HttpRouter* router);

}  // namespace convoy

#endif  // CONVOY_DAEMON_HTTP_ROUTES_H_
