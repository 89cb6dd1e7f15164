// One request's answer, which a handler gives at once or later, from any thread: either a whole
// response (Respond) or a streamed one (StartStream, then Write ... Finish: chunked transfer
// encoding, each Write sent as one chunk as soon as the connection can take it, e.g. server-sent
// events as "text/event-stream").
//
// Exactly one response per request: the first of Respond / StartStream wins, and anything after
// it that does not fit (a second Respond, a Write before StartStream or after Finish) fails with
// FAILED_PRECONDITION. An exchange dropped before it answered answers 500 (the client is never
// left waiting); one dropped in the middle of a stream closes the connection after the chunks
// written so far, so that the client sees the body cut short rather than complete.
//
// Writes are queued and written in order on the connection's strand; nothing blocks. A producer
// keeps memory bounded with queued_bytes() and OnDrained (backpressure), and stops when the
// client has gone (OnClosed, or a send that returns CANCELLED).
//
// Thread-safe. Callbacks run on one of the server's io threads and must not block; they may call
// back into the exchange.
#ifndef CONVOY_HTTP_HTTP_EXCHANGE_H_
#define CONVOY_HTTP_HTTP_EXCHANGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "http/http_request.h"

namespace convoy {
namespace http_internal {
class Connection;
struct Outgoing;
}  // namespace http_internal

class HttpExchange {
 public:
  ~HttpExchange();
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  const HttpRequest& request() const { return request_; }

  // Each returns INVALID_ARGUMENT for a status outside 200..599, a header field name that is not
  // a token, a value with CR or LF, or a field the server sets itself (Content-Length,
  // Transfer-Encoding, Connection); FAILED_PRECONDITION when the call does not fit what was sent
  // before; CANCELLED once the client has gone. Content-Type is left out when `content_type` is
  // empty.

  // The whole response, with a Content-Length.
  absl::Status Respond(int status, absl::string_view content_type, std::string body,
                       const HttpHeaders& headers = {});
  // A whole response with the JSON error body of http_error.h (its type from the status).
  absl::Status RespondError(int status, absl::string_view message, absl::string_view code = "",
                            const HttpHeaders& headers = {});

  // Sends the head of a streamed response. To an HTTP/1.0 client the body is not chunked and
  // the connection closes after it.
  absl::Status StartStream(int status, absl::string_view content_type,
                           const HttpHeaders& headers = {});
  // Queues one chunk (an empty one sends nothing).
  absl::Status Write(std::string chunk);
  // Ends the stream.
  absl::Status Finish();

  // Bytes of this response queued and not yet taken by the connection (the socket's buffer); 0
  // once the connection has closed (what was queued is dropped).
  size_t queued_bytes() const;
  // `callback` runs once, when queued_bytes() is 0: at once (on an io thread) when nothing is
  // queued, otherwise after the last queued byte was written. Never once the client has gone
  // (OnClosed's callback runs instead). A new callback replaces one not run yet.
  void OnDrained(std::function<void()> callback);
  // `callback` runs once, if the client goes away (closes, resets, stops reading past the write
  // timeout) or the server stops, before the whole response was written; at once (on an io
  // thread) when that has already happened. Never after the response was written whole, nor
  // after the exchange was dropped. A new callback replaces one not run yet.
  void OnClosed(std::function<void()> callback);
  // Whether the connection has closed (the client went away, or the response is over and the
  // connection was not kept alive).
  bool client_gone() const;

 private:
  friend class http_internal::Connection;
  enum class Phase { kUnanswered, kStreaming, kFinished };

  HttpExchange(std::shared_ptr<http_internal::Connection> connection, uint64_t id,
               HttpRequest request, bool head_only, bool keep_alive);

  // Sends the head, and `body` with it when there is one (otherwise a stream begins).
  absl::Status Begin(int status, absl::string_view content_type, const HttpHeaders& headers,
                     std::optional<std::string> body);
  // OK when the response may go on from `expected`; otherwise why not.
  absl::Status CheckPhase(Phase expected) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(http_internal::Outgoing item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool KeepAlive() const;

  // Constant after construction.
  const std::shared_ptr<http_internal::Connection> connection_;
  const uint64_t id_;  // the request's number on its connection
  const HttpRequest request_;
  const bool head_only_;   // a HEAD request: heads are sent, bodies are not
  const bool keep_alive_;  // the client keeps the connection open after the response
  // Decremented by the connection as it writes.
  const std::shared_ptr<std::atomic<size_t>> queued_;

  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kUnanswered;
  bool chunked_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy

#endif  // CONVOY_HTTP_HTTP_EXCHANGE_H_
