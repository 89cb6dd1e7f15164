#include "http/connection.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/chunk_encode.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "http/http_exchange.h"

namespace convoy::http_internal {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

// What one read asks for; and how much a client may send ahead (pipelined) while its previous
// request is being answered before the connection stops reading.
constexpr size_t kReadBytes = 4096;
constexpr size_t kMaxReadAhead = 64 * 1024;
// After the last response of a connection: how long, and how much, input is read and dropped
// before the socket is closed.
constexpr absl::Duration kLingerTime = absl::Seconds(2);
constexpr size_t kLingerBytes = 1 << 20;

std::string Text(boost::beast::string_view text) { return std::string(text.data(), text.size()); }

bool IsParseError(const error_code& error) {
  return &error.category() == &http::make_error_code(http::error::bad_method).category() &&
         error != http::error::end_of_stream && error != http::error::partial_message;
}

// Runs a handler's callback; an exception from it must not reach the io thread's run loop.
void CallUser(const std::function<void()>& callback) {
  try {
    callback();
  } catch (...) {
  }
}

}  // namespace

Connection::Connection(std::shared_ptr<ServerCore> core, net::ip::tcp::socket socket)
    : core_(std::move(core)),
      options_(core_->options()),
      strand_(socket.get_executor()),
      transport_(std::move(socket), core_->tls_context()),
      read_timer_(strand_),
      write_timer_(strand_),
      queued_(std::make_shared<std::atomic<size_t>>(0)) {}

Connection::~Connection() { core_->Unregister(this); }

template <typename Task>
void Connection::PostInside(Task&& task) {
  net::post(strand_, std::forward<Task>(task));
}

template <typename Task>
void Connection::PostFromOutside(Task&& task) {
  core_->PostFromOutside(strand_, std::forward<Task>(task));
}

void Connection::Start() {
  error_code ignored;
  transport_.socket().set_option(net::ip::tcp::no_delay(true), ignored);  // chunks go as written
  PostInside([self = shared_from_this()] {
    if (self->closed()) return;
    if (!self->transport_.tls()) {
      self->AwaitRequest(self->options_.request_timeout);
      return;
    }
    // The handshake counts against the first request's time.
    self->ArmReadTimer(self->options_.request_timeout, TimerPurpose::kIdle);
    self->transport_.async_handshake([self](error_code error) { self->OnHandshake(error); });
  });
}

void Connection::OnHandshake(error_code error) {
  if (closed()) return;
  if (error) {
    // Not TLS, a certificate the client CA did not sign, or none when one is required: no HTTP
    // answer can reach such a client.
    CloseNow();
    return;
  }
  AwaitRequest(options_.request_timeout);
}

void Connection::Drain() {
  PostInside([self = shared_from_this()] {
    if (!self->closed() && self->phase_ == Phase::kAwaiting) self->CloseNow();
  });
}

void Connection::Close() {
  PostInside([self = shared_from_this()] { self->CloseNow(); });
}

void Connection::Send(uint64_t id, Outgoing item) {
  PostFromOutside([self = shared_from_this(), id, item = std::move(item)]() mutable {
    if (id != self->exchange_id_ || !self->exchange_open_ || self->closed()) {
      self->queued_->fetch_sub(item.counted);
      return;
    }
    self->Queue(std::move(item));
  });
}

void Connection::Abandon(uint64_t id, Outgoing item) {
  PostFromOutside([self = shared_from_this(), id, item = std::move(item)]() mutable {
    if (id != self->exchange_id_ || !self->exchange_open_ || self->closed()) return;
    self->on_closed_ = nullptr;
    self->on_drained_ = nullptr;
    self->Queue(std::move(item));
  });
}

void Connection::SetOnClosed(uint64_t id, std::function<void()> callback) {
  PostFromOutside([self = shared_from_this(), id, callback = std::move(callback)]() mutable {
    if (id != self->exchange_id_ || !self->exchange_open_) return;
    if (self->closed() || self->client_left()) {
      CallUser(callback);
    } else {
      self->on_closed_ = std::move(callback);
    }
  });
}

void Connection::SetOnDrained(uint64_t id, std::function<void()> callback) {
  PostFromOutside([self = shared_from_this(), id, callback = std::move(callback)]() mutable {
    if (self->closed()) return;
    if (id != self->exchange_id_ || !self->exchange_open_) {
      CallUser(callback);  // that response was written whole
      return;
    }
    self->on_drained_ = std::move(callback);
    self->FireDrainedIfEmpty();
  });
}

// Reading requests.

void Connection::AwaitRequest(absl::Duration idle_limit) {
  phase_ = Phase::kAwaiting;
  if (buffer_.size() > 0) {  // pipelined: the next request is here already
    if (read_pending_) {
      parse_after_read_ = true;
      error_code ignored;
      transport_.socket().cancel(ignored);  // nothing else is in flight between two requests
    } else {
      StartParse();
    }
    return;
  }
  ArmReadTimer(idle_limit, TimerPurpose::kIdle);
  ReadSome();
}

void Connection::ReadSome() {
  if (read_pending_ || closed()) return;
  if (phase_ != Phase::kClosing && buffer_.size() >= kMaxReadAhead) return;
  read_pending_ = true;
  transport_.async_read_some(buffer_.prepare(kReadBytes),
                             [self = shared_from_this()](error_code error, size_t bytes) {
                               self->OnReadSome(error, bytes);
                             });
}

void Connection::OnReadSome(error_code error, size_t bytes) {
  read_pending_ = false;
  if (closed()) return;
  if (!error) buffer_.commit(bytes);
  switch (phase_) {
    case Phase::kAwaiting:
      if (parse_after_read_ || !error) {
        parse_after_read_ = false;
        StartParse();
      } else {
        CloseNow();  // the client closed an idle connection
      }
      return;
    case Phase::kHandling:
      if (Transport::IsEndOfInput(error)) {
        OnClientLeft();
      } else if (error) {
        CloseNow();  // the client went away before its response was written
      } else {
        ReadSome();
      }
      return;
    case Phase::kClosing:
      lingered_bytes_ += buffer_.size();
      buffer_.consume(buffer_.size());
      if (error || lingered_bytes_ > kLingerBytes) {
        CloseNow();
      } else {
        ReadSome();
      }
      return;
    case Phase::kParsing:
      return;  // not reached: no read of ours is pending while Beast reads the request
  }
}

void Connection::StartParse() {
  phase_ = Phase::kParsing;
  request_timed_out_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  parser_->body_limit(options_.max_body_bytes);
  ArmReadTimer(options_.request_timeout, TimerPurpose::kRequest);
  http::async_read_header(
      transport_, buffer_, *parser_,
      [self = shared_from_this()](error_code error, size_t) { self->OnHeader(error); });
}

void Connection::OnHeader(error_code error) {
  if (closed()) return;
  if (error) {
    OnParseError(error);
    return;
  }
  const auto& header = parser_->get();
  if (header.version() >= 11 && !parser_->is_done() &&
      absl::EqualsIgnoreCase(Text(header[http::field::expect]), "100-continue")) {
    Outgoing go_on;
    go_on.bytes = "HTTP/1.1 100 Continue\r\n\r\n";
    Queue(std::move(go_on));
  }
  http::async_read(
      transport_, buffer_, *parser_,
      [self = shared_from_this()](error_code error, size_t) { self->OnRequest(error); });
}

void Connection::OnRequest(error_code error) {
  if (closed()) return;
  StopReadTimer();
  if (error) {
    OnParseError(error);
    return;
  }
  Dispatch();
}

void Connection::OnParseError(error_code error) {
  StopReadTimer();
  phase_ = Phase::kHandling;
  if (request_timed_out_) {
    SendServerError(408,
                    absl::StrCat("the request was not received whole within ",
                                 absl::FormatDuration(options_.request_timeout)),
                    "request_timeout", /*close=*/true);
  } else if (error == http::error::header_limit || error == http::error::buffer_overflow) {
    SendServerError(431,
                    absl::StrCat("the request header exceeds the limit of ",
                                 options_.max_header_bytes, " bytes"),
                    "header_too_large", /*close=*/true);
  } else if (error == http::error::body_limit) {
    SendServerError(
        413,
        absl::StrCat("the request body exceeds the limit of ", options_.max_body_bytes, " bytes"),
        "body_too_large", /*close=*/true);
  } else if (IsParseError(error)) {
    SendServerError(400, absl::StrCat("malformed HTTP request: ", error.message()), "bad_request",
                    /*close=*/true);
  } else {
    CloseNow();  // the client closed or reset the connection mid-request
  }
}

void Connection::Dispatch() {
  phase_ = Phase::kHandling;
  http::request<http::string_body> message = parser_->release();
  parser_.reset();
  keep_alive_ = message.keep_alive() && !core_->stopping();

  HttpRequest request;
  request.method = Text(message.method_string());
  request.target = Text(message.target());
  const size_t question = request.target.find('?');
  request.path = request.target.substr(0, question);
  if (question != std::string::npos) request.query = request.target.substr(question + 1);
  request.version = static_cast<int>(message.version());
  for (const auto& field : message) {
    request.headers.emplace_back(Text(field.name_string()), Text(field.value()));
  }
  request.body = std::move(message.body());
  error_code no_peer;
  const net::ip::tcp::endpoint peer = transport_.socket().remote_endpoint(no_peer);
  if (!no_peer) request.remote_address = peer.address().to_string();

  const HttpRouter::Match match = core_->router().Find(request.method, request.path);
  if (!match.path_known) {
    SendServerError(404, absl::StrCat("no route for ", request.method, " ", request.path),
                    "not_found", !keep_alive_);
    return;
  }
  if (match.handler == nullptr) {
    SendServerError(405,
                    absl::StrCat("method ", request.method, " is not allowed on ", request.path,
                                 "; allowed: ", match.allow),
                    "method_not_allowed", !keep_alive_, {{"Allow", match.allow}});
    return;
  }
  ++exchange_id_;
  exchange_open_ = true;
  std::shared_ptr<HttpExchange> exchange(new HttpExchange(
      shared_from_this(), exchange_id_, std::move(request), match.head_only, keep_alive_));
  queued_ = exchange->queued_;
  const HttpRequest& view = exchange->request();
  try {
    (*match.handler)(view, std::move(exchange));
  } catch (...) {
    // The exchange went with the handler's arguments: when unanswered, it answers 500.
  }
  // Notices a client that goes away while the handler works. Started after the handler, so that
  // an answer it gave at once is queued before an end of input that came with the request.
  ReadSome();
}

void Connection::SendServerError(int status, const std::string& message, const std::string& code,
                                 bool close, const HttpHeaders& headers) {
  if (close) keep_alive_ = false;
  ++exchange_id_;  // no exchange: nothing may be sent for the previous one
  exchange_open_ = true;
  queued_ = std::make_shared<std::atomic<size_t>>(0);
  Outgoing item;
  item.bytes = ErrorResponse(status, message, code, /*version=*/11, keep_alive_,
                             /*head_only=*/false, headers);
  item.ends_response = true;
  item.close_after = !keep_alive_;
  Queue(std::move(item));
}

// Writing responses.

void Connection::Queue(Outgoing item) {
  if (closed()) {
    queued_->fetch_sub(item.counted);
    return;
  }
  queue_.push_back(std::move(item));
  WriteNext();
}

void Connection::WriteNext() {
  if (writing_ || queue_.empty() || closed()) return;
  const Outgoing& item = queue_.front();
  if (item.kind == Outgoing::Kind::kAbort) {
    CloseNow();
    return;
  }
  writing_ = true;
  ArmWriteTimer();
  auto done = [self = shared_from_this()](error_code error, size_t) { self->OnWrite(error); };
  switch (item.kind) {
    case Outgoing::Kind::kBytes:
      net::async_write(transport_, net::buffer(item.bytes), std::move(done));
      break;
    case Outgoing::Kind::kChunk:
      net::async_write(transport_, http::make_chunk(net::buffer(item.bytes)), std::move(done));
      break;
    case Outgoing::Kind::kLastChunk:
      net::async_write(transport_, http::make_chunk_last(), std::move(done));
      break;
    case Outgoing::Kind::kAbort:
      break;
  }
}

void Connection::OnWrite(error_code error) {
  writing_ = false;
  ++write_timer_generation_;
  write_timer_.cancel();
  if (closed()) return;
  if (error) {
    CloseNow();  // the client went away (reset, or a broken pipe)
    return;
  }
  Outgoing item = std::move(queue_.front());
  queue_.pop_front();
  queued_->fetch_sub(item.counted);
  FireDrainedIfEmpty();
  if (closed()) return;  // a callback may not close, but be safe
  if (item.ends_response) {
    OnResponseDone(item.close_after);
  } else if (client_left() && queue_.empty()) {
    CloseNow();  // what the handler sent before the client left is written
  } else {
    WriteNext();
  }
}

void Connection::FireDrainedIfEmpty() {
  if (on_drained_ == nullptr || queued_->load() != 0) return;
  std::function<void()> callback = std::move(on_drained_);
  on_drained_ = nullptr;
  CallUser(callback);
}

void Connection::OnResponseDone(bool close_after) {
  exchange_open_ = false;
  on_closed_ = nullptr;
  on_drained_ = nullptr;
  if (close_after || !keep_alive_ || core_->stopping()) {
    LingeringClose();
  } else {
    AwaitRequest(options_.keep_alive_timeout);
  }
}

// Timers. A generation number tells a timer's expiry from one that was re-armed meanwhile (an
// expiry already queued cannot be cancelled).

void Connection::ArmReadTimer(absl::Duration limit, TimerPurpose purpose) {
  const uint64_t generation = ++read_timer_generation_;
  read_timer_.cancel();
  if (limit == absl::InfiniteDuration()) return;
  read_timer_.expires_after(absl::ToChronoNanoseconds(limit));
  read_timer_.async_wait([self = shared_from_this(), generation, purpose](error_code error) {
    if (!error) self->OnReadTimer(generation, purpose);
  });
}

void Connection::StopReadTimer() {
  ++read_timer_generation_;
  read_timer_.cancel();
}

void Connection::OnReadTimer(uint64_t generation, TimerPurpose purpose) {
  if (generation != read_timer_generation_ || closed()) return;
  if (purpose == TimerPurpose::kRequest) {
    // The read in flight ends with operation_aborted; OnParseError answers 408.
    request_timed_out_ = true;
    error_code ignored;
    transport_.socket().cancel(ignored);
  } else {
    CloseNow();  // idle past the keep-alive timeout, or lingered long enough
  }
}

void Connection::ArmWriteTimer() {
  const uint64_t generation = ++write_timer_generation_;
  if (options_.write_timeout == absl::InfiniteDuration()) return;
  write_timer_.expires_after(absl::ToChronoNanoseconds(options_.write_timeout));
  write_timer_.async_wait([self = shared_from_this(), generation](error_code error) {
    if (!error) self->OnWriteTimer(generation);
  });
}

void Connection::OnWriteTimer(uint64_t generation) {
  if (generation != write_timer_generation_ || closed()) return;
  CloseNow();  // the client has stopped reading
}

// Closing.

void Connection::OnClientLeft() {
  // EOF: the client closed, or only shut its sending side (a half-close); the two look the same
  // here. Either way the handler's work is cancelled (OnClosed) and nothing more is accepted from
  // it, but what it had queued before is still written (an answer given at once reaches a client
  // that half-closed after its request); then the connection closes.
  client_left_.store(true, std::memory_order_release);
  keep_alive_ = false;
  if (exchange_open_ && on_closed_ != nullptr) {
    std::function<void()> callback = std::move(on_closed_);
    on_closed_ = nullptr;
    CallUser(callback);
  }
  if (!writing_ && queue_.empty()) CloseNow();
}

void Connection::LingeringClose() {
  phase_ = Phase::kClosing;
  ArmReadTimer(kLingerTime, TimerPurpose::kLinger);
  if (transport_.tls()) {
    // A read may be pending: Asio's TLS stream lets the two share the connection.
    transport_.async_shutdown([self = shared_from_this()](error_code) { self->CloseNow(); });
    return;
  }
  error_code ignored;
  transport_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  lingered_bytes_ = buffer_.size();
  buffer_.consume(buffer_.size());
  ReadSome();
}

void Connection::CloseNow() {
  if (closed()) return;
  closed_.store(true, std::memory_order_release);
  phase_ = Phase::kClosing;
  error_code ignored;
  transport_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  transport_.socket().close(ignored);
  ++read_timer_generation_;
  ++write_timer_generation_;
  read_timer_.cancel();
  write_timer_.cancel();
  // Nothing more is written. The item being written stays until its write completes (aborted).
  for (Outgoing& item : queue_) {
    queued_->fetch_sub(item.counted);
    item.counted = 0;
  }
  queue_.resize(writing_ ? 1 : 0);
  on_drained_ = nullptr;
  if (exchange_open_ && on_closed_ != nullptr) {
    std::function<void()> callback = std::move(on_closed_);
    on_closed_ = nullptr;
    CallUser(callback);
  }
  core_->Unregister(this);
}

}  // namespace convoy::http_internal
