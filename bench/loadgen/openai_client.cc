#include "bench/loadgen/openai_client.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/loadgen/openai_encoding.h"
#include "bench/loadgen/sse_parser.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/strand.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "nlohmann/json.hpp"

namespace convoy::bench {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

// Bytes of an error response's body kept for the message.
constexpr size_t kMaxErrorBody = 4096;

// The message of an OpenAI-shaped error body, or the body itself.
std::string ErrorMessage(const std::string& body) {
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    auto error = json.find("error");
    if (error != json.end() && error->is_object()) {
      auto message = error->find("message");
      if (message != error->end() && message->is_string()) return message->get<std::string>();
    }
  }
  return body;
}

class OpenAiClient final : public RequestClient {
 public:
  OpenAiClient(const OpenAiClientOptions& options, tcp::resolver::results_type endpoints,
               SteadyClock::time_point origin)
      : RequestClient(origin),
        options_(options),
        endpoints_(std::move(endpoints)),
        guard_(asio::make_work_guard(io_)) {
    for (int i = 0; i < std::max(options.io_threads, 1); ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
  }

  // With no request in flight the io threads run out of work once the guard is gone.
  ~OpenAiClient() override {
    guard_.reset();
    for (std::thread& t : threads_) t.join();
  }

  void Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) override;

 private:
  class Call;

  const OpenAiClientOptions options_;
  const tcp::resolver::results_type endpoints_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

// One request on its own connection. Held by the handlers of its pending operation (and by a
// posted cancellation); every step runs on the connection's strand.
class OpenAiClient::Call final : public RequestClient::Call,
                                 public std::enable_shared_from_this<OpenAiClient::Call> {
 public:
  Call(OpenAiClient* client, const PlannedRequest& planned, std::function<void(RequestRecord)> done)
      : RequestClient::Call(client, planned, std::move(done)),
        client_(client),
        socket_(asio::make_strand(client->io_)) {
    request_.method(http::verb::post);
    request_.target(client->options_.path);
    request_.version(11);
    request_.set(http::field::host, client->options_.address);
    request_.set(http::field::content_type, "application/json");
    request_.set(http::field::accept, "text/event-stream");
    request_.set(http::field::connection, "close");
    if (!client->options_.api_key.empty()) {
      request_.set(http::field::authorization, absl::StrCat("Bearer ", client->options_.api_key));
    }
    request_.body() = BuildOpenAiCompletionBody(planned, client->options_.model);
    request_.prepare_payload();
    // A stream is as long as its output. (Boost 1.74 compares a Content-Length with an unset
    // limit as if it were smaller, so the limit is set, not unset.)
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  void Go() {
    Sent();
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Connect(); });
  }

  void Cancel() override {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->cancelled_ = true;
      ErrorCode ignored;
      self->socket_.close(ignored);  // the pending operation fails, and the call reports
    });
  }

 private:
  void Connect() {
    if (cancelled_) return End("cancelled");
    asio::async_connect(socket_, client_->endpoints_,
                        [self = shared_from_this()](const ErrorCode& ec, const tcp::endpoint&) {
                          self->OnConnect(ec);
                        });
  }

  void OnConnect(const ErrorCode& ec) {
    if (ec) return Fail("connect", ec);
    ErrorCode ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    http::async_write(socket_, request_, [self = shared_from_this()](const ErrorCode& ec, size_t) {
      if (ec) return self->Fail("send", ec);
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    http::async_read_header(socket_, buffer_, parser_,
                            [self = shared_from_this()](const ErrorCode& ec, size_t) {
                              if (ec) return self->Fail("read", ec);
                              self->status_ = self->parser_.get().result_int();
                              self->ReadBody();
                            });
  }

  void ReadBody() {
    if (parser_.is_done()) return Complete();
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    http::async_read_some(socket_, buffer_, parser_,
                          [self = shared_from_this()](ErrorCode ec, size_t) {
                            if (ec == http::error::need_buffer) ec = {};
                            self->Consume(sizeof(self->chunk_) - self->parser_.get().body().size);
                            if (ec) return self->Fail("read", ec);
                            self->ReadBody();
                          });
  }

  // `n` bytes of the body arrived in chunk_.
  void Consume(size_t n) {
    if (n == 0) return;
    if (status_ != 200) {
      error_body_.append(chunk_,
                         std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body_.size())));
      return;
    }
    events_.clear();
    sse_.Feed(absl::string_view(chunk_, n), &events_);
    for (const SseEvent& event : events_) {
      const OpenAiStreamEvent e = ParseOpenAiStreamEvent(event.data);
      switch (e.kind) {
        case OpenAiStreamEvent::Kind::kChunk:
          if (e.output) TokensArrived(1);
          if (!e.finish_reason.empty()) finish_reason_ = e.finish_reason;
          if (e.completion_tokens >= 0) usage_tokens_ = e.completion_tokens;
          break;
        case OpenAiStreamEvent::Kind::kDone:
          done_seen_ = true;
          break;
        case OpenAiStreamEvent::Kind::kError:
        case OpenAiStreamEvent::Kind::kMalformed:
          if (error_.empty()) error_ = e.error;
          break;
      }
    }
  }

  // The response is complete.
  void Complete() {
    if (status_ != 200) {
      return End(absl::StrCat("http ", status_, ": ", ErrorMessage(error_body_)));
    }
    if (!error_.empty()) return End(error_);
    if (!done_seen_) return End("the stream ended before [DONE]");
    if (finish_reason_ != "length" && finish_reason_ != "stop") {
      return End(absl::StrCat("finish_reason '", finish_reason_, "'"));
    }
    if (usage_tokens_ >= 0) record().output_tokens = usage_tokens_;
    End("");
  }

  void Fail(const char* what, const ErrorCode& ec) {
    End(cancelled_ ? "cancelled" : absl::StrCat(what, ": ", ec.message()));
  }

  // Closes the connection and reports. Once; no operation is pending.
  void End(std::string error) {
    if (ended_) return;
    ended_ = true;
    ErrorCode ignored;
    socket_.close(ignored);
    Report(std::move(error));
  }

  OpenAiClient* const client_;
  tcp::socket socket_;
  http::request<http::string_body> request_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  char chunk_[16 * 1024];
  SseParser sse_;
  std::vector<SseEvent> events_;
  unsigned status_ = 0;
  std::string error_body_;  // the start of a non-200 response's body
  std::string error_;       // an error event's message
  std::string finish_reason_;
  int64_t usage_tokens_ = -1;
  bool done_seen_ = false;
  bool cancelled_ = false;
  bool ended_ = false;
};

void OpenAiClient::Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) {
  auto call = std::make_shared<Call>(this, request, std::move(done));
  Register(call.get());
  call->Go();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RequestClient>> MakeOpenAiClient(const OpenAiClientOptions& options,
                                                                SteadyClock::time_point origin) {
  const size_t colon = options.address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("the HTTP address must be HOST:PORT, got '", options.address, "'"));
  }
  std::string host = options.address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]
  }
  asio::io_context resolve_context;
  tcp::resolver resolver(resolve_context);
  ErrorCode ec;
  tcp::resolver::results_type endpoints =
      resolver.resolve(host, options.address.substr(colon + 1), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", options.address, ": ", ec.message()));
  }
  return std::unique_ptr<RequestClient>(
      std::make_unique<OpenAiClient>(options, std::move(endpoints), origin));
}

}  // namespace convoy::bench
