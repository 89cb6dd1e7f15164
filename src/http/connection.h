// Internal to the HTTP server: one client connection. It reads a request (bounded in size and
// time), hands it to its route's handler through an HttpExchange, writes what the exchange
// queues in order, and then reads the next request (keep-alive) or closes. While a handler
// works, a read stays pending so that a client that goes away is noticed (OnClosed); a client
// that only half-closes still gets what its handler had answered by then.
//
// Apart from its constants and closed_, its state is touched only on the connection's strand; the
// public methods below post there and may be called from any thread.
#ifndef CONVOY_HTTP_CONNECTION_H_
#define CONVOY_HTTP_CONNECTION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "http/server_core.h"
#include "http/transport.h"
#include "http/wire.h"

namespace convoy::http_internal {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `socket` is bound to a strand of the core's io_context. With the core's TLS context, the
  // connection begins with the TLS handshake.
  Connection(std::shared_ptr<ServerCore> core, boost::asio::ip::tcp::socket socket);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts reading the first request. Call once, after the core registered the connection.
  void Start();
  // The server stops: close now when no request is under way, otherwise after its response.
  void Drain();
  // Closes now (a handler's OnClosed runs if its response was not written whole).
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // The client closed its side (EOF) while a response was under way: nothing more is taken from
  // the handler, what it queued before is written, then the connection closes.
  bool client_left() const { return client_left_.load(std::memory_order_acquire); }
  bool stopping() const { return core_->stopping(); }

  // From the exchange numbered `id` (dropped when that is not the current one, or once closed).
  // Thread-safe.
  void Send(uint64_t id, Outgoing item);
  // The exchange was dropped: its callbacks go, then `item` (a 500, or an abort) is queued.
  void Abandon(uint64_t id, Outgoing item);
  void SetOnClosed(uint64_t id, std::function<void()> callback);
  void SetOnDrained(uint64_t id, std::function<void()> callback);

 private:
  enum class Phase {
    kAwaiting,  // waiting for the first byte of a request (idle)
    kParsing,   // reading a request
    kHandling,  // a response is under way
    kClosing,   // the last response was sent; discarding input until the client closes
  };

  template <typename Task>
  void PostInside(Task&& task);
  template <typename Task>
  void PostFromOutside(Task&& task);

  void OnHandshake(boost::system::error_code error);
  void AwaitRequest(absl::Duration idle_limit);
  void ReadSome();
  void OnReadSome(boost::system::error_code error, size_t bytes);
  void StartParse();
  void OnHeader(boost::system::error_code error);
  void OnRequest(boost::system::error_code error);
  void OnParseError(boost::system::error_code error);
  void Dispatch();
  // A response of the server's own (an error); closes the connection after it when `close`.
  void SendServerError(int status, const std::string& message, const std::string& code, bool close,
                       const HttpHeaders& headers = {});
  void Queue(Outgoing item);
  void WriteNext();
  void OnWrite(boost::system::error_code error);
  void OnResponseDone(bool close_after);
  void FireDrainedIfEmpty();

  enum class TimerPurpose { kIdle, kRequest, kLinger };
  void ArmReadTimer(absl::Duration limit, TimerPurpose purpose);
  void OnReadTimer(uint64_t generation, TimerPurpose purpose);
  void StopReadTimer();
  void ArmWriteTimer();
  void OnWriteTimer(uint64_t generation);

  // Half-closes (the client reads the last response to its end) and reads until the client
  // closes, or the linger bound passes, before closing: closing with unread input would reset
  // the connection and could destroy the response before the client read it. Over TLS: sends
  // close_notify and waits (as long) for the client's.
  void LingeringClose();
  void CloseNow();
  // The client shut its side (EOF) while a handler works.
  void OnClientLeft();

  // Constant after construction.
  const std::shared_ptr<ServerCore> core_;
  const HttpServerOptions& options_;
  // The connection's strand (the socket's executor), kept apart so that other threads can post to
  // it without touching the socket.
  const boost::asio::any_io_executor strand_;

  std::atomic<bool> closed_{false};
  std::atomic<bool> client_left_{false};

  // Strand only.
  Transport transport_;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  uint64_t read_timer_generation_ = 0;
  uint64_t write_timer_generation_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  Phase phase_ = Phase::kAwaiting;
  bool read_pending_ = false;
  bool parse_after_read_ = false;   // the pending read was cancelled to parse what is buffered
  bool request_timed_out_ = false;  // the parse was cancelled by the request timeout
  size_t lingered_bytes_ = 0;

  uint64_t exchange_id_ = 0;                     // the current exchange's number
  bool exchange_open_ = false;                   // its response is not written whole yet
  bool keep_alive_ = false;                      // read another request after the current response
  std::shared_ptr<std::atomic<size_t>> queued_;  // the current exchange's queued bytes
  std::function<void()> on_closed_;
  std::function<void()> on_drained_;

  std::deque<Outgoing> queue_;
  bool writing_ = false;  // the front of queue_ is being written
};

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_CONNECTION_H_
