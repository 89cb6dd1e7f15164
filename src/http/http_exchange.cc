#include "http/http_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "http/connection.h"
#include "http/http_error.h"
#include "http/wire.h"

namespace convoy {

using http_internal::Outgoing;

HttpExchange::HttpExchange(std::shared_ptr<http_internal::Connection> connection, uint64_t id,
                           HttpRequest request, bool head_only, bool keep_alive)
    : connection_(std::move(connection)),
      id_(id),
      request_(std::move(request)),
      head_only_(head_only),
      keep_alive_(keep_alive),
      queued_(std::make_shared<std::atomic<size_t>>(0)) {}

HttpExchange::~HttpExchange() {
  Outgoing last;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kFinished) return;
    if (phase_ == Phase::kUnanswered) {
      const bool keep_alive = KeepAlive();
      last.bytes =
          http_internal::ErrorResponse(500,
                                       absl::StrCat("the handler of ", request_.method, " ",
                                                    request_.path, " ended without answering"),
                                       "internal_error", request_.version, keep_alive, head_only_);
      last.ends_response = true;
      last.close_after = !keep_alive;
    } else {
      last.kind = Outgoing::Kind::kAbort;
    }
  }
  connection_->Abandon(id_, std::move(last));
}

bool HttpExchange::KeepAlive() const { return keep_alive_ && !connection_->stopping(); }

absl::Status HttpExchange::CheckPhase(Phase expected) const {
  if (phase_ != expected) {
    switch (phase_) {
      case Phase::kUnanswered:
        return absl::FailedPreconditionError("the stream has not been started (StartStream)");
      case Phase::kStreaming:
        return absl::FailedPreconditionError(
            "a streamed response is under way; only Write and Finish may follow");
      case Phase::kFinished:
        return absl::FailedPreconditionError("the response to this request was already sent");
    }
  }
  if (client_gone()) return absl::CancelledError("the client has closed the connection");
  return absl::OkStatus();
}

void HttpExchange::Send(Outgoing item) {
  item.counted = item.bytes.size();
  queued_->fetch_add(item.counted);
  connection_->Send(id_, std::move(item));
}

absl::Status HttpExchange::Begin(int status, absl::string_view content_type,
                                 const HttpHeaders& headers, std::optional<std::string> body) {
  if (absl::Status valid = http_internal::CheckResponse(status, content_type, headers);
      !valid.ok()) {
    return valid;
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status phase = CheckPhase(Phase::kUnanswered); !phase.ok()) return phase;
  http_internal::ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.headers = &headers;
  head.version = request_.version;
  head.keep_alive = KeepAlive();
  Outgoing item;
  if (body.has_value()) {
    head.content_length = body->size();
    item.bytes = http_internal::SerializeHead(head);
    if (!head_only_) item.bytes += *body;
    item.ends_response = true;
    item.close_after = !head.keep_alive;
    phase_ = Phase::kFinished;
  } else {
    chunked_ = request_.version >= 11;
    // An HTTP/1.0 body without a length ends with the connection.
    head.keep_alive = head.keep_alive && chunked_;
    item.bytes = http_internal::SerializeHead(head);
    phase_ = Phase::kStreaming;
  }
  Send(std::move(item));
  return absl::OkStatus();
}

absl::Status HttpExchange::Respond(int status, absl::string_view content_type, std::string body,
                                   const HttpHeaders& headers) {
  return Begin(status, content_type, headers, std::move(body));
}

absl::Status HttpExchange::RespondError(int status, absl::string_view message,
                                        absl::string_view code, const HttpHeaders& headers) {
  return Respond(status, kJsonContentType, HttpErrorBody(message, HttpErrorType(status), code),
                 headers);
}

absl::Status HttpExchange::StartStream(int status, absl::string_view content_type,
                                       const HttpHeaders& headers) {
  return Begin(status, content_type, headers, std::nullopt);
}

absl::Status HttpExchange::Write(std::string chunk) {
  absl::MutexLock lock(&mu_);
  if (absl::Status phase = CheckPhase(Phase::kStreaming); !phase.ok()) return phase;
  if (chunk.empty() || head_only_) return absl::OkStatus();
  Outgoing item;
  item.kind = chunked_ ? Outgoing::Kind::kChunk : Outgoing::Kind::kBytes;
  item.bytes = std::move(chunk);
  Send(std::move(item));
  return absl::OkStatus();
}

absl::Status HttpExchange::Finish() {
  absl::MutexLock lock(&mu_);
  if (absl::Status phase = CheckPhase(Phase::kStreaming); !phase.ok()) return phase;
  Outgoing item;
  item.kind = chunked_ && !head_only_ ? Outgoing::Kind::kLastChunk : Outgoing::Kind::kBytes;
  item.ends_response = true;
  item.close_after = !chunked_ || !KeepAlive();
  phase_ = Phase::kFinished;
  Send(std::move(item));
  return absl::OkStatus();
}

// Once the connection has closed nothing more is written and what was queued is dropped: 0, even
// while a Write's bytes are still on their way to the io thread (which discards them).
size_t HttpExchange::queued_bytes() const { return connection_->closed() ? 0 : queued_->load(); }

void HttpExchange::OnDrained(std::function<void()> callback) {
  connection_->SetOnDrained(id_, std::move(callback));
}

void HttpExchange::OnClosed(std::function<void()> callback) {
  connection_->SetOnClosed(id_, std::move(callback));
}

bool HttpExchange::client_gone() const {
  return connection_->closed() || connection_->client_left();
}

}  // namespace convoy
