// The gRPC server of convoyd: convoy.v1.Inference, KServe v2's inference.GRPCInferenceService,
// grpc.health.v1.Health and (when asked for) server reflection on one port, in plain text or TLS
// (mutual TLS with a client CA), with the message size limit raised for long prompts. The services
// belong to the caller and must outlive the server.
#ifndef CONVOY_FRONTEND_GRPC_SERVER_H_
#define CONVOY_FRONTEND_GRPC_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "frontend/health_service.h"
#include "frontend/inference_service.h"
#include "frontend/kserve_service.h"
#include "grpcpp/server.h"

namespace convoy {

// PEM text (not file names) of the server's TLS identity.
struct GrpcTlsOptions {
  std::string cert_chain;
  std::string private_key;
  // Not empty: mutual TLS; a client must present a certificate signed by one of these CAs.
  std::string client_ca;
};

struct GrpcServerOptions {
  std::string listen_address = "127.0.0.1";
  int port = 50051;  // 0: any free port
  int max_message_bytes = 64 << 20;
  // HTTP/2 streams (calls) one connection may have open at once, as the server announces it.
  int max_concurrent_streams = 128;
  // grpc.reflection.v1alpha.ServerReflection.
  bool reflection = false;
  // Unset: plain text.
  std::optional<GrpcTlsOptions> tls;
};

class GrpcServer {
 public:
  // Listens and serves; UNAVAILABLE when the address cannot be bound. `kserve`: null for none.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                           InferenceService* inference,
                                                           HealthService* health,
                                                           KServeService* kserve = nullptr);
  // Shutdown(absl::ZeroDuration()) unless already shut down.
  ~GrpcServer();

  // The port bound (the one picked when options.port was 0).
  int port() const { return port_; }
  // Stops taking calls, waits up to `grace` for open ones to finish, then cancels the rest and
  // waits for them. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServer(std::unique_ptr<grpc::Server> server, int port)
      : server_(std::move(server)), port_(port) {}

  std::unique_ptr<grpc::Server> server_;
  const int port_;
  bool shut_down_ = false;
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_GRPC_SERVER_H_
