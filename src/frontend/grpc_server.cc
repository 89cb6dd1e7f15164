#include "frontend/grpc_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace convoy {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                              InferenceService* inference,
                                                              HealthService* health,
                                                              KServeService* kserve) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = absl::StrCat(options.listen_address, ":", options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(inference);
  builder.RegisterService(health);
  if (kserve != nullptr) builder.RegisterService(kserve);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), port));
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace convoy
