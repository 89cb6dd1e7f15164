// Internal to the HTTP server: a connection's byte stream, plain TCP or TLS over it. Either way it
// is an Asio AsyncReadStream and AsyncWriteStream, so that Beast's parser and Asio's writes run
// over it unchanged; which one is decided once, when the connection is accepted.
#ifndef CONVOY_HTTP_TRANSPORT_H_
#define CONVOY_HTTP_TRANSPORT_H_

#include <optional>
#include <utility>

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/ssl/error.hpp"
#include "boost/asio/ssl/stream.hpp"

namespace convoy::http_internal {

class Transport {
 public:
  using executor_type = boost::asio::any_io_executor;

  // `tls` (not owned; outlives the transport) null: plain TCP.
  Transport(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls) {
    if (tls == nullptr) {
      plain_.emplace(std::move(socket));
    } else {
      tls_.emplace(std::move(socket), *tls);
    }
  }

  bool tls() const { return tls_.has_value(); }
  executor_type get_executor() { return socket().get_executor(); }
  // The TCP socket under it (options, shutdown, close).
  boost::asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

  // TLS only: the server's side of the handshake; and close_notify (waiting for the client's).
  template <typename Handler>
  void async_handshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(handler));
  }
  template <typename Handler>
  void async_shutdown(Handler&& handler) {
    tls_->async_shutdown(std::forward<Handler>(handler));
  }

  // The end of the client's data: EOF, or (TLS) the connection ended without close_notify.
  static bool IsEndOfInput(const boost::system::error_code& error) {
    return error == boost::asio::error::eof || error == boost::asio::ssl::error::stream_truncated;
  }

 private:
  std::optional<boost::asio::ip::tcp::socket> plain_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_;
};

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_TRANSPORT_H_
