#include "frontend/openai_service.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "convoy/status_macros.h"
#include "frontend/openai_api.h"
#include "http/http_error.h"
#include "http/http_exchange.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

constexpr char kEventStream[] = "text/event-stream";
// Bytes queued on a connection past which a stream waits for the client to read.
constexpr size_t kMaxQueuedBytes = 64 * 1024;

void RespondOpenAiError(HttpExchange& exchange, const OpenAiError& error) {
  exchange.Respond(error.http_status, kJsonContentType, error.ToJson()).IgnoreError();
}

absl::string_view Authorization(const HttpRequest& request) {
  const std::string* header = request.FindHeader("authorization");
  return header == nullptr ? absl::string_view() : absl::string_view(*header);
}

// False, with the 401 sent, when the request's API key is missing or wrong.
bool Authenticated(const GenerationHub& hub, HttpExchange& exchange, OpenAiEndpoint endpoint) {
  const absl::Status caller = hub.Authenticate(Authorization(exchange.request())).status();
  if (caller.ok()) return true;
  RespondOpenAiError(exchange, OpenAiErrorFromStatus(caller, endpoint));
  return false;
}

// One request: lives from the handler until its answer is written (or the client is gone),
// held by itself (self_) until then; the session and the exchange only hold weak references.
class OpenAiCall : public std::enable_shared_from_this<OpenAiCall> {
 public:
  // Checks the key and parses the body, on the HTTP server's thread: a refusal is answered at once
  // (so that it reaches even a client that half-closed after its request) and null returned.
  static std::shared_ptr<OpenAiCall> Accept(GenerationHub* hub, OpenAiEndpoint endpoint,
                                            std::shared_ptr<HttpExchange> exchange) {
    if (!Authenticated(*hub, *exchange, endpoint)) return nullptr;
    ParsedOpenAiRequest parsed = ParseOpenAiRequest(endpoint, exchange->request().body);
    if (!parsed.request) {
      // As gRPC counts a message that does not parse (a refusal before any session).
      hub->CountRefusal(RejectReason::kInvalidArgument);
      RespondOpenAiError(*exchange, parsed.error);
      return nullptr;
    }
    return std::shared_ptr<OpenAiCall>(
        new OpenAiCall(hub, *std::move(parsed.request), std::move(exchange)));
  }

  // Tokenizes or renders the prompt and submits it (the work kept off the HTTP threads), then
  // answers as the session goes.
  void Start() {
    self_ = shared_from_this();
    std::weak_ptr<OpenAiCall> weak = self_;
    session_ = GenerationSession::Create(hub_, [weak] {
      if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->Pump();
    });
    exchange_->OnClosed([weak] {
      if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->session_->ClientGone();
    });
    const HttpRequest& http = exchange_->request();
    session_->Begin(request_.request, absl::InfiniteFuture(),
                    CallOrigin{std::string(Authorization(http)), http.remote_address});
  }

 private:
  OpenAiCall(GenerationHub* hub, OpenAiRequest request, std::shared_ptr<HttpExchange> exchange)
      : hub_(hub), request_(std::move(request)), exchange_(std::move(exchange)) {}

  // The responder, made once the session has its id (after Begin).
  OpenAiResponder& Responder() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!responder_) {
      const ServingContext* serving = hub_->serving();
      const bool chat = request_.endpoint == OpenAiEndpoint::kChatCompletions;
      responder_.emplace(request_, absl::StrCat(chat ? "chatcmpl-" : "cmpl-", session_->id()),
                         absl::ToUnixSeconds(absl::Now()),
                         serving != nullptr ? serving->limits.model_name : "",
                         serving != nullptr ? serving->limits.tokenizer : nullptr);
    }
    return *responder_;
  }

  // Sends what is new; at the end, the end, and lets the call go.
  void Pump() {
    std::shared_ptr<OpenAiCall> done;  // set at the end: the call goes when Pump returns
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (!request_.stream) {
      std::optional<SessionEnd> end = session_->Take(&output_);
      if (!end) return;
      finished_ = true;
      done = std::move(self_);
      if (end->status.ok()) {
        exchange_->Respond(200, kJsonContentType, Responder().Whole(output_, *end)).IgnoreError();
      } else {
        RespondOpenAiError(*exchange_, OpenAiErrorFromStatus(end->status, request_.endpoint));
      }
      return;
    }
    if (exchange_->queued_bytes() > kMaxQueuedBytes) {
      // The client reads slower than tokens come: wait for it (the session keeps the output).
      std::weak_ptr<OpenAiCall> weak = self_;
      exchange_->OnDrained([weak] {
        if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->Pump();
      });
      return;
    }
    SessionOutput output;
    std::optional<SessionEnd> end = session_->Take(&output);
    if (!started_) {
      if (end && !end->status.ok() && output.empty()) {
        // Refused before anything was sent: a plain HTTP error.
        finished_ = true;
        done = std::move(self_);
        RespondOpenAiError(*exchange_, OpenAiErrorFromStatus(end->status, request_.endpoint));
        return;
      }
      if (!end && output.empty()) return;
      started_ = true;
      if (!exchange_->StartStream(200, kEventStream, {{"Cache-Control", "no-cache"}}).ok()) {
        // The client is gone: OnClosed ends the session (never from here, inside its wake).
        return;
      }
      exchange_->Write(Responder().FirstEvent()).IgnoreError();
    }
    std::string events;
    if (!output.empty()) events = Responder().OutputEvent(output);
    if (end) {
      absl::StrAppend(&events, Responder().EndEvents(*end));
      finished_ = true;
      done = std::move(self_);
    }
    // A failed write means the client is gone: OnClosed ends the session.
    if (!events.empty()) exchange_->Write(std::move(events)).IgnoreError();
    if (end) exchange_->Finish().IgnoreError();
  }

  GenerationHub* const hub_;
  const OpenAiRequest request_;
  const std::shared_ptr<HttpExchange> exchange_;
  std::shared_ptr<GenerationSession> session_;  // set once in Start
  std::shared_ptr<OpenAiCall> self_;

  absl::Mutex mu_;
  std::optional<OpenAiResponder> responder_ ABSL_GUARDED_BY(mu_);
  SessionOutput output_ ABSL_GUARDED_BY(mu_);  // not streamed: all of it
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // streamed: the head is sent
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

void ListModels(GenerationHub* hub, HttpExchange& exchange) {
  if (!Authenticated(*hub, exchange, OpenAiEndpoint::kCompletions)) return;
  const ServingContext* serving = hub->serving();
  nlohmann::json models = nlohmann::json::array();
  if (serving != nullptr) {
    models.push_back({{"id", serving->limits.model_name},
                      {"object", "model"},
                      {"created", absl::ToUnixSeconds(hub->start_time())},
                      {"owned_by", "convoy"},
                      {"max_model_len", serving->limits.max_context_length}});
  }
  const nlohmann::json body = {{"object", "list"}, {"data", std::move(models)}};
  exchange.Respond(200, kJsonContentType, body.dump()).IgnoreError();
}

}  // namespace

OpenAiService::OpenAiService(GenerationHub* hub, OpenAiOptions options)
    : hub_(hub),
      before_prepare_(std::move(options.before_prepare)),
      pool_(options.prepare_threads) {}

OpenAiService::~OpenAiService() = default;

absl::Status OpenAiService::AddRoutes(HttpRouter* router) {
  for (const auto& [path, endpoint] :
       {std::pair{"/v1/chat/completions", OpenAiEndpoint::kChatCompletions},
        std::pair{"/v1/completions", OpenAiEndpoint::kCompletions}}) {
    RETURN_IF_ERROR(router->Add(
        "POST", path,
        [this, endpoint = endpoint](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
          std::shared_ptr<OpenAiCall> call =
              OpenAiCall::Accept(hub_, endpoint, std::move(exchange));
          if (call == nullptr) return;
          pool_.Run([this, call = std::move(call)] {
            if (before_prepare_) before_prepare_();
            call->Start();
          });
        }));
  }
  return router->Add("GET", "/v1/models",
                     [hub = hub_](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
                       ListModels(hub, *exchange);
                     });
}

}  // namespace convoy
