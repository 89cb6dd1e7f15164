// Internal to the HTTP server: the TLS context every HTTPS connection shares.
#ifndef CONVOY_HTTP_TLS_CONTEXT_H_
#define CONVOY_HTTP_TLS_CONTEXT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"
#include "http/http_server.h"

namespace convoy::http_internal {

// A server context with TLS 1.2 and later only, the certificate chain and its key (which must
// match), and, with a client CA, a required client certificate. INVALID_ARGUMENT naming the part
// that does not load, and OpenSSL's reason.
absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeTlsContext(
    const HttpTlsOptions& options);

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_TLS_CONTEXT_H_
