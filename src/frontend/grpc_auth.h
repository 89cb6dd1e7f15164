// Who a gRPC call comes from: the API key it presents (its `authorization` metadata, api_keys.h)
// and its peer's address; and when it must end by.
#ifndef CONVOY_FRONTEND_GRPC_AUTH_H_
#define CONVOY_FRONTEND_GRPC_AUTH_H_

#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "frontend/generation.h"
#include "grpcpp/server_context.h"

namespace convoy {

// The value of the call's first `authorization` metadata entry; empty when it has none.
inline std::string GrpcAuthorization(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::string();
  return std::string(it->second.data(), it->second.size());
}

// The IP address in a gRPC peer string ("ipv4:10.0.0.7:51234", "ipv6:[::1]:51234"); other forms
// (a Unix socket's) whole.
inline std::string GrpcPeerAddress(const std::string& peer) {
  if (absl::StartsWith(peer, "ipv6:[")) {
    const size_t close = peer.find(']');
    if (close != std::string::npos) return peer.substr(6, close - 6);
  }
  if (absl::StartsWith(peer, "ipv4:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 5) return peer.substr(5, colon - 5);
  }
  return peer;
}

inline CallOrigin GrpcCallOrigin(const grpc::ServerContextBase& context) {
  return CallOrigin{GrpcAuthorization(context), GrpcPeerAddress(context.peer())};
}

// The call's gRPC deadline; InfiniteFuture() for none.
inline absl::Time GrpcCallDeadline(const grpc::ServerContextBase& context) {
  const auto deadline = context.deadline();
  return deadline == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture()
                                                                  : absl::FromChrono(deadline);
}

}  // namespace convoy

#endif  // CONVOY_FRONTEND_GRPC_AUTH_H_
