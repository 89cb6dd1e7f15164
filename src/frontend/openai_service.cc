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
#include "frontend/choices.h"
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
// held by itself (self_) until then; the sessions and the exchange only hold weak references.
// A request with n choices runs n sessions (frontend/choices.h) and answers once with all of
// them.
class OpenAiCall : public std::enable_shared_from_this<OpenAiCall> {
 public:
  // Checks the key and parses the body, on the HTTP server's thread: a refusal is answered at once
  // (so that it reaches even a client that half-closed after its request) and null returned.
  static std::shared_ptr<OpenAiCall> Accept(GenerationHub* hub, OpenAiEndpoint endpoint,
                                            std::shared_ptr<HttpExchange> exchange) {
    if (!Authenticated(*hub, *exchange, endpoint)) return nullptr;
    ParsedOpenAiRequest parsed = ParseOpenAiRequest(endpoint, exchange->request().body);
    if (parsed.request) {
      if (absl::Status n = CountChoices(parsed.request->n, *hub).status(); !n.ok()) {
        parsed.error = OpenAiErrorFromStatus(n, endpoint);
        parsed.request.reset();
      }
    }
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
  // answers as the sessions go.
  void Start() {
    self_ = shared_from_this();
    std::weak_ptr<OpenAiCall> weak = self_;
    // Every session exists before the client can go (OnClosed) or any can wake the call.
    choices_ = std::make_unique<ChoiceGroup>(hub_, request_.n, [weak] {
      if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->Pump();
    });
    {
      absl::MutexLock lock(&mu_);
      outputs_.resize(request_.n);
    }
    exchange_->OnClosed([weak] {
      if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->choices_->ClientGone();
    });
    const HttpRequest& http = exchange_->request();
    choices_->Begin(request_.request, absl::InfiniteFuture(),
                    CallOrigin{std::string(Authorization(http)), http.remote_address});
  }

 private:
  OpenAiCall(GenerationHub* hub, OpenAiRequest request, std::shared_ptr<HttpExchange> exchange)
      : hub_(hub), request_(std::move(request)), exchange_(std::move(exchange)) {}

  // Choice i's responder, made once its session has an id (after Begin); every choice has the
  // first one's response id.
  OpenAiResponder& Responder(int32_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (responders_.empty()) {
      const ServingContext* serving = hub_->serving();
      const char* prefix = request_.endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-"
                           : request_.endpoint == OpenAiEndpoint::kResponses     ? "resp_"
                                                                                 : "cmpl-";
      const std::string id = absl::StrCat(prefix, choices_->session(0).id());
      for (int32_t c = 0; c < request_.n; ++c) {
        responders_.emplace_back(std::make_unique<OpenAiResponder>(
            request_, id, absl::ToUnixSeconds(absl::Now()),
            serving != nullptr ? serving->limits.model_name : "",
            serving != nullptr ? serving->limits.tokenizer : nullptr, c));
      }
    }
    return *responders_[i];
  }

  // Sends what is new; at the end, the end, and lets the call go.
  void Pump() {
    std::shared_ptr<OpenAiCall> done;  // set at the end: the call goes when Pump returns
    bool end_all = false;              // a choice failed: the others are ended, unlocked
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (request_.stream) {
        end_all = PumpStream(&done);
      } else {
        end_all = PumpWhole(&done);
      }
    }
    if (end_all) choices_->ClientGone();
  }

  bool PumpWhole(std::shared_ptr<OpenAiCall>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int32_t i = 0; i < choices_->size(); ++i) choices_->Take(i, &outputs_[i]);
    const SessionEnd* failed = choices_->failure();
    if (!choices_->all_ended() && failed == nullptr) return false;
    finished_ = true;
    *done = std::move(self_);
    if (failed != nullptr) {
      RespondOpenAiError(*exchange_, OpenAiErrorFromStatus(failed->status, request_.endpoint));
      return true;
    }
    std::vector<nlohmann::json> choices;
    for (int32_t i = 0; i < request_.n; ++i) {
      choices.push_back(Responder(i).Choice(outputs_[i], *choices_->end(i)));
    }
    exchange_
        ->Respond(200, kJsonContentType, Responder(0).Whole(std::move(choices), choices_->Totals()))
        .IgnoreError();
    return false;
  }

  bool PumpStream(std::shared_ptr<OpenAiCall>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (exchange_->queued_bytes() > kMaxQueuedBytes) {
      // The client reads slower than tokens come: wait for it (the sessions keep the output).
      std::weak_ptr<OpenAiCall> weak = self_;
      exchange_->OnDrained([weak] {
        if (std::shared_ptr<OpenAiCall> call = weak.lock()) call->Pump();
      });
      return false;
    }
    const int32_t n = choices_->size();
    std::vector<SessionOutput> outputs(n);
    std::vector<bool> ended_now(n, false);
    bool any_output = false;
    for (int32_t i = 0; i < n; ++i) {
      const bool ended_before = choices_->end(i).has_value();
      ended_now[i] = !ended_before && choices_->Take(i, &outputs[i]).has_value();
      any_output = any_output || !outputs[i].empty();
    }
    const bool all_ended = choices_->all_ended();
    const SessionEnd* failed = choices_->failure();
    if (!started_) {
      if (failed != nullptr && !any_output) {
        // Refused before anything was sent: a plain HTTP error.
        finished_ = true;
        *done = std::move(self_);
        RespondOpenAiError(*exchange_, OpenAiErrorFromStatus(failed->status, request_.endpoint));
        return true;
      }
      if (!any_output && !all_ended) return false;
      started_ = true;
      if (!exchange_->StartStream(200, kEventStream, {{"Cache-Control", "no-cache"}}).ok()) {
        // The client is gone: OnClosed ends the sessions (never from here, inside a wake).
        return false;
      }
      std::string first;
      for (int32_t i = 0; i < request_.n; ++i) absl::StrAppend(&first, Responder(i).FirstEvent());
      exchange_->Write(std::move(first)).IgnoreError();
    }
    std::string events;
    for (int32_t i = 0; i < n; ++i) {
      if (!outputs[i].empty()) absl::StrAppend(&events, Responder(i).OutputEvent(outputs[i]));
      if (ended_now[i] && choices_->end(i)->status.ok()) {
        absl::StrAppend(&events, Responder(i).ChoiceEndEvents(*choices_->end(i)));
      }
    }
    if (failed != nullptr) {
      // An error after the stream began: the error event and [DONE]; the other choices end.
      absl::StrAppend(&events, Responder(0).ChoiceEndEvents(*failed));
    } else if (all_ended) {
      absl::StrAppend(&events, Responder(0).CloseEvents(choices_->Totals()));
    }
    const bool finished = failed != nullptr || all_ended;
    if (finished) {
      finished_ = true;
      *done = std::move(self_);
    }
    // A failed write means the client is gone: OnClosed ends the sessions.
    if (!events.empty()) exchange_->Write(std::move(events)).IgnoreError();
    if (finished) exchange_->Finish().IgnoreError();
    return failed != nullptr;
  }

  GenerationHub* const hub_;
  const OpenAiRequest request_;
  const std::shared_ptr<HttpExchange> exchange_;
  // Set once in Start, before any session can wake the call.
  std::unique_ptr<ChoiceGroup> choices_;
  std::shared_ptr<OpenAiCall> self_;

  absl::Mutex mu_;
  // Not streamed: each choice's whole output.
  std::vector<SessionOutput> outputs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<OpenAiResponder>> responders_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // streamed: the head is sent
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

nlohmann::json ModelObject(const GenerationHub& hub, const ServingContext& serving) {
  return {{"id", serving.limits.model_name},
          {"object", "model"},
          {"created", absl::ToUnixSeconds(hub.start_time())},
          {"owned_by", "convoy"},
          {"max_model_len", serving.limits.max_context_length}};
}

void ListModels(GenerationHub* hub, HttpExchange& exchange) {
  if (!Authenticated(*hub, exchange, OpenAiEndpoint::kCompletions)) return;
  const ServingContext* serving = hub->serving();
  nlohmann::json models = nlohmann::json::array();
  if (serving != nullptr) models.push_back(ModelObject(*hub, *serving));
  const nlohmann::json body = {{"object", "list"}, {"data", std::move(models)}};
  exchange.Respond(200, kJsonContentType, body.dump()).IgnoreError();
}

// GET /v1/models/{id}: the model, when `id` is the one served (the SDKs' models.retrieve).
void RetrieveModel(GenerationHub* hub, HttpExchange& exchange) {
  if (!Authenticated(*hub, exchange, OpenAiEndpoint::kCompletions)) return;
  const std::string id = exchange.request().path.substr(std::string_view("/v1/models/").size());
  const ServingContext* serving = hub->serving();
  if (serving == nullptr || id != serving->limits.model_name) {
    OpenAiError error;
    error.http_status = 404;
    error.param = "model";
    error.code = "model_not_found";
    error.message = absl::StrCat("the model '", id, "' does not exist; this server serves '",
                                 serving != nullptr ? serving->limits.model_name : "", "'");
    RespondOpenAiError(exchange, error);
    return;
  }
  exchange.Respond(200, kJsonContentType, ModelObject(*hub, *serving).dump()).IgnoreError();
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
        std::pair{"/v1/completions", OpenAiEndpoint::kCompletions},
        std::pair{"/v1/responses", OpenAiEndpoint::kResponses}}) {
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
  RETURN_IF_ERROR(
      router->Add("GET", "/v1/models",
                  [hub = hub_](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
                    ListModels(hub, *exchange);
                  }));
  return router->Add("GET", "/v1/models/*",
                     [hub = hub_](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
                       RetrieveModel(hub, *exchange);
                     });
}

}  // namespace convoy
