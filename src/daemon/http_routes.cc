#include "daemon/http_routes.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "http/http_error.h"
#include "http/http_exchange.h"

namespace convoy {

absl::Status AddHealthRoutes(const HealthService* health, HttpRouter* router) {
  auto live = [](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    exchange->Respond(200, kJsonContentType, R"({"live":true})").IgnoreError();
  };
  auto ready = [health](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    const HealthService::Readiness readiness = health->readiness();
    if (readiness.serving) {
      exchange->Respond(200, kJsonContentType, R"({"ready":true})").IgnoreError();
    } else {
      exchange->RespondError(503, absl::StrCat("not ready: ", readiness.reason), "not_ready")
          .IgnoreError();
    }
  };
  for (const char* path : {"/health", "/v2/health/live"}) {
    RETURN_IF_ERROR(router->Add("GET", path, live));
  }
  for (const char* path : {"/ready", "/v2/health/ready"}) {
    RETURN_IF_ERROR(router->Add("GET", path, ready));
  }
  return absl::OkStatus();
}

}  // namespace convoy
