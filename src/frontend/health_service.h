// The standard gRPC health service (grpc.health.v1.Health), on the callback API. The whole server
// ("") and every service named at construction share one status: NOT_SERVING until SetServing(true)
// (the daemon calls it once the model is loaded and warmed up), and again from SetServing(false)
// (shutdown). Watch streams the status now and every change.
//
// The one owner of the server's readiness: the HTTP /ready endpoints read it too (readiness()),
// with the reason it is not ready.
//
// Thread-safe.
#ifndef CONVOY_FRONTEND_HEALTH_SERVICE_H_
#define CONVOY_FRONTEND_HEALTH_SERVICE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace convoy {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(std::vector<std::string> services);
  // REQUIRES: the gRPC server holding this service has shut down (no call is open).
  ~HealthService() override = default;

  // `reason` says why the server does not serve (for readiness()); ignored when serving.
  void SetServing(bool serving, std::string reason = "");
  bool serving() const;
  struct Readiness {
    bool serving = false;
    std::string reason;  // why not, when not serving
  };
  Readiness readiness() const;
  // Ends every open Watch call, and from now on each new one after its first message, so that
  // the gRPC server can shut down. Call right before grpc::Server::Shutdown.
  void EndWatches();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  ServingStatus StatusOf(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(Watcher* watcher);

  const std::vector<std::string> services_;  // besides ""

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  std::string not_serving_reason_ ABSL_GUARDED_BY(mu_) = "the server is starting";
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_HEALTH_SERVICE_H_
