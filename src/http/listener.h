// Internal to the HTTP server: the listening socket. Accepts each connection onto a strand of its
// own and hands it to the core, or closes it at once when the core refuses it (stopping, or at
// max_connections).
#ifndef CONVOY_HTTP_LISTENER_H_
#define CONVOY_HTTP_LISTENER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "http/server_core.h"

namespace convoy::http_internal {

class Listener {
 public:
  // Binds and listens (accepting starts with Start). INVALID_ARGUMENT when `address` is not an
  // IP address; UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<Listener>> Bind(std::shared_ptr<ServerCore> core,
                                                        const std::string& address, int port);

  int port() const { return port_; }
  void Start();
  // Stops accepting and closes the socket; returns at once (the close runs on the io threads).
  void Close();

 private:
  Listener(std::shared_ptr<ServerCore> core, boost::asio::ip::tcp::acceptor acceptor, int port);
  void Accept();
  void OnAccept(boost::system::error_code error, boost::asio::ip::tcp::socket socket);

  const std::shared_ptr<ServerCore> core_;
  const int port_;
  // On the listener's strand.
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;  // after a failed accept (e.g. out of descriptors)
};

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_LISTENER_H_
