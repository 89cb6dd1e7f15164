// An asynchronous HTTP/1.1 server (Boost.Beast over Boost.Asio): a fixed pool of io threads
// serves every connection (no thread per connection), routes each request by method and exact
// path to a handler (http_router.h), and bounds what a client may cost: header and body sizes,
// the time to send a request, idle keep-alive time, open connections.
//
// What the server answers itself, each with the JSON error body of http_error.h: 404 for a path
// with no route; 405 (with Allow) for a method the path has no route for; 400 for a request that
// is not HTTP; 431 and 413 for a header or body over its limit; 408 for a request not received
// whole in time (a connection that sent nothing is just closed); 500 for a request whose handler
// dropped its exchange unanswered. After 400, 408, 413 and 431 the connection closes; the server
// serves on.
//
//   HttpRouter router;
//   router.Add("GET", "/health", [](const HttpRequest&, std::shared_ptr<HttpExchange> x) {
//     x->Respond(200, "text/plain", "ok\n");
//   });
//   ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::Start(options, router));
#ifndef CONVOY_HTTP_HTTP_SERVER_H_
#define CONVOY_HTTP_HTTP_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "http/http_exchange.h"
#include "http/http_request.h"
#include "http/http_router.h"

namespace convoy {
namespace http_internal {
class Listener;
class ServerCore;
}  // namespace http_internal

// TLS for every connection, from PEM text (read by the caller).
struct HttpTlsOptions {
  std::string cert_chain;
  std::string private_key;
  // Not empty: mutual TLS. A client must present a certificate signed by one of these CAs, or
  // its handshake fails (and with it the connection: no HTTP answer can reach it).
  std::string client_ca;
};

struct HttpServerOptions {
  // An IPv4 or IPv6 address (brackets optional); 0.0.0.0 or :: for every interface.
  std::string listen_address = "0.0.0.0";
  // 0..65535; 0 picks a free port (read it back with port()).
  int port = 0;
  // Threads that run every connection's reads, writes and handlers. 1..64.
  int io_threads = 2;
  // The request line and header fields together; over it: 431.
  size_t max_header_bytes = 16 * 1024;
  // The request body; over it: 413 (at once when Content-Length says so).
  size_t max_body_bytes = 4 * 1024 * 1024;
  // From a request's first byte (a new connection's accept) to its last: past it, 408 and the
  // connection closes (a connection that sent nothing just closes).
  absl::Duration request_timeout = absl::Seconds(30);
  // How long a connection may wait idle for its next request.
  absl::Duration keep_alive_timeout = absl::Seconds(60);
  // How long one queued item (a response, a head, a chunk) may take to be written; past it the
  // client is taken to have stopped reading: the connection closes and OnClosed runs.
  // absl::InfiniteDuration(): no limit.
  absl::Duration write_timeout = absl::Seconds(60);
  // Open connections; one more is accepted and closed at once.
  int max_connections = 10000;
  // Names the io threads ("<name>-io<N>", for top and debuggers); at most 8 characters are kept.
  std::string thread_name = "http";
  // Unset: plain HTTP. Set: HTTPS only (TLS 1.2 or later); a plain request is not answered.
  std::optional<HttpTlsOptions> tls;
};

class HttpServer {
 public:
  // Binds and serves. INVALID_ARGUMENT for bad options, an address that is not an IP address, or
  // TLS material that does not load (naming which); UNAVAILABLE when the address cannot be bound
  // (e.g. the port is taken).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpRouter router);
  // Stop(absl::ZeroDuration()) unless stopped already.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port.
  int port() const { return port_; }
  int open_connections() const;
  int io_threads() const { return static_cast<int>(threads_.size()); }

  // Stops accepting, closes idle connections at once and every other one after its current
  // response; waits up to `grace` for those, then closes the rest (their exchanges' OnClosed
  // callbacks run, their sends fail with CANCELLED) and ends the io threads. Exchanges that
  // handlers still hold stay safe to use: whatever they send is dropped. Idempotent.
  // REQUIRES: not called from a handler or callback (an io thread).
  void Stop(absl::Duration grace);

 private:
  HttpServer(std::shared_ptr<http_internal::ServerCore> core,
             std::unique_ptr<http_internal::Listener> listener, int port);

  const std::shared_ptr<http_internal::ServerCore> core_;
  const std::unique_ptr<http_internal::Listener> listener_;
  const int port_;
  std::vector<std::thread> threads_;

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace convoy

#endif  // CONVOY_HTTP_HTTP_SERVER_H_
