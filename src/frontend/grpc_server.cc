#include "frontend/grpc_server.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace convoy {
namespace {

// The reflection plugin registers itself with every ServerBuilder once its library is loaded:
// this option takes it out again.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

std::shared_ptr<grpc::ServerCredentials> Credentials(const std::optional<GrpcTlsOptions>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls->client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                             : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls->client_ca;
  ssl.pem_key_cert_pairs.push_back({tls->private_key, tls->cert_chain});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                              InferenceService* inference,
                                                              HealthService* health,
                                                              KServeService* kserve) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!options.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  int port = 0;
  const std::string address = absl::StrCat(options.listen_address, ":", options.port);
  builder.AddListeningPort(address, Credentials(options.tls), &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.RegisterService(inference);
  builder.RegisterService(health);
  if (kserve != nullptr) builder.RegisterService(kserve);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        options.tls ? " with TLS (are frontend.tls's certificate and key PEM, and a pair?)" : ""));
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
