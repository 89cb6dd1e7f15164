// The API key a gRPC call presents: its `authorization` metadata (api_keys.h).
#ifndef CONVOY_FRONTEND_GRPC_AUTH_H_
#define CONVOY_FRONTEND_GRPC_AUTH_H_

#include <string>

#include "grpcpp/server_context.h"

namespace convoy {

// The value of the call's first `authorization` metadata entry; empty when it has none.
inline std::string GrpcAuthorization(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::string();
  return std::string(it->second.data(), it->second.size());
}

}  // namespace convoy

#endif  // CONVOY_FRONTEND_GRPC_AUTH_H_
