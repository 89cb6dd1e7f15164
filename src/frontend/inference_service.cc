#include "frontend/inference_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "frontend/status_mapping.h"
#include "metrics/logging.h"
#include "metrics/request_summary.h"
#include "spdlog/spdlog.h"
#include "text/detokenizer.h"

namespace convoy {
namespace {

uint64_t Micros(absl::Duration d) {
  return d <= absl::ZeroDuration() ? 0 : static_cast<uint64_t>(absl::ToInt64Microseconds(d));
}

// The earlier of the gRPC deadline and the request's own timeout; InfiniteFuture() for none.
absl::Time DeadlineOf(const grpc::CallbackServerContext& context, uint64_t timeout_microseconds,
                      absl::Time arrival) {
  const auto grpc_deadline = context.deadline();
  return RequestDeadline(grpc_deadline == std::chrono::system_clock::time_point::max()
                             ? absl::InfiniteFuture()
                             : absl::FromChrono(grpc_deadline),
                         timeout_microseconds, arrival);
}

}  // namespace

// The engine side of a call, shared by the unary and the streaming reactor. Holds two references:
// the reactor's (dropped in OnDone) and, while the engine holds the request, the engine's
// (dropped after its final event); the last one deletes the call.
//
// Every way of ending goes through End, which only the first caller passes; the reactor then
// finishes the gRPC call from Pump. No gRPC operation is started while mu_ is held (a reaction
// may run inline in the thread that starts one).
class InferenceService::Call {
 public:
  virtual ~Call() { service_->CallClosed(); }

  // The server gives up on the request (drain timeout). REQUIRES: the engine holds it.
  void Abort() {
    End(absl::UnavailableError(
            absl::StrCat("the server shut down before request ", id_, " finished (drain timeout)")),
        v1::FINISH_REASON_CANCELLED, /*cancel_in_engine=*/true);
  }

 protected:
  Call(InferenceService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), arrival_(absl::Now()) {
    service_->CallOpened();
  }

  // Validates and submits the request; a non-OK status ends the call at once.
  void Begin(const v1::InferRequest& request) {
    absl::Status status = Submit(request);
    if (!status.ok()) {
      if (status.code() != absl::StatusCode::kUnavailable) {
        SPDLOG_DEBUG("refused a request: {}", status.ToString());
      }
      CountRefusal(status);
      End(status, v1::FINISH_REASON_ERROR, /*cancel_in_engine=*/false);
    }
  }

  // The reactor's OnCancel: the client cancelled, went away, or the gRPC deadline passed.
  void ClientGone() {
    const bool deadline = absl::Now() >= deadline_;
    End(deadline ? absl::DeadlineExceededError("the deadline passed")
                 : absl::CancelledError("the client cancelled the call"),
        deadline ? v1::FINISH_REASON_TIMEOUT : v1::FINISH_REASON_CANCELLED,
        /*cancel_in_engine=*/true, /*client_gone=*/true);
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Adds a token to what goes to the client.
  virtual void AddTokenLocked(const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Prepares the end (end_status_ and finish_reason_ are set). With `client_gone`, drops what the
  // client can no longer receive; called again that way when the client goes after the end.
  virtual void SetEndLocked(bool client_gone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Starts the next gRPC operation the state calls for, if any. Called without mu_, never after
  // the operation that finishes the call (the call may be gone by then).
  virtual void Pump() = 0;

  void FillTimings(v1::Timings* timings) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    timings->set_queue_microseconds(Micros(queue_time_));
    if (first_token_)
      timings->set_time_to_first_token_microseconds(Micros(*first_token_ - arrival_));
    timings->set_total_microseconds(Micros(end_time_ - arrival_));
  }
  void FillUsage(v1::Usage* usage) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    usage->set_prompt_tokens(prompt_tokens_);
    usage->set_completion_tokens(static_cast<int32_t>(num_tokens_));
  }

  InferenceService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::Time arrival_;
  // Set by Begin, before the engine sees the request; constant after.
  RequestId id_ = 0;
  absl::Time deadline_ = absl::InfiniteFuture();
  bool return_logprobs_ = false;
  int32_t prompt_tokens_ = 0;

  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  v1::FinishReason finish_reason_ ABSL_GUARDED_BY(mu_) = v1::FINISH_REASON_UNSPECIFIED;
  absl::Time end_time_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> first_token_ ABSL_GUARDED_BY(mu_);
  absl::Duration queue_time_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int64_t num_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  // Turns the generated tokens into text, when the model has a tokenizer.
  std::unique_ptr<IncrementalDetokenizer> detokenizer_ ABSL_GUARDED_BY(mu_);

  // The text `token` completes ("" while an incomplete character is held back, or without a
  // tokenizer). An id the tokenizer does not know (an embedding row past its vocabulary) adds none.
  std::string TextOfLocked(int32_t token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (detokenizer_ == nullptr) return "";
    absl::StatusOr<std::string> text = detokenizer_->Next(token);
    return text.ok() ? *std::move(text) : "";
  }
  // What is held back, at the end of the output.
  std::string FlushTextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return detokenizer_ == nullptr ? "" : detokenizer_->Flush();
  }

 private:
  absl::Status Submit(const v1::InferRequest& request) {
    RETURN_IF_ERROR(service_->Admission());
    const ServingContext& serving = *service_->serving_.load(std::memory_order_acquire);
    ASSIGN_OR_RETURN(Request engine_request, ToEngineRequest(request, serving.limits));
    deadline_ = DeadlineOf(*context_, request.timeout_microseconds(), arrival_);
    if (deadline_ <= arrival_) {
      return absl::DeadlineExceededError("the deadline had passed when the request arrived");
    }
    // The deadline bounds the wait in the queue too (the scheduler times it out there).
    if (deadline_ != absl::InfiniteFuture()) engine_request.timeout = deadline_ - arrival_;
    return_logprobs_ = request.return_logprobs();
    prompt_tokens_ = static_cast<int32_t>(engine_request.prompt_tokens.size());
    if (serving.limits.tokenizer != nullptr) {
      absl::MutexLock lock(&mu_);
      detokenizer_ = std::make_unique<IncrementalDetokenizer>(*serving.limits.tokenizer,
                                                              /*skip_special=*/true);
    }
    id_ = service_->next_id_.fetch_add(1, std::memory_order_relaxed);
    engine_request.id = id_;

    refs_.fetch_add(1, std::memory_order_relaxed);
    service_->EngineHolds(id_, this);
    absl::Status submitted = serving.engine->Submit(
        std::move(engine_request), [this](const Event& event) { OnEngineEvent(event); });
    if (!submitted.ok()) {
      service_->EngineReleased(id_);
      refs_.fetch_sub(1, std::memory_order_relaxed);  // the reactor's reference remains
    }
    return submitted;
  }

  // On the engine loop's thread.
  void OnEngineEvent(const Event& event) {
    if (event.kind == Event::Kind::kToken) {
      bool past_deadline = false;
      {
        absl::MutexLock lock(&mu_);
        if (ended_) return;
        const absl::Time now = absl::Now();
        if (now >= deadline_) {
          past_deadline = true;
        } else {
          if (!first_token_) first_token_ = now;
          ++num_tokens_;
          AddTokenLocked(event);
        }
      }
      if (past_deadline) {
        End(absl::DeadlineExceededError(
                absl::StrCat("the deadline passed while generating (request ", id_, ")")),
            v1::FINISH_REASON_TIMEOUT, /*cancel_in_engine=*/true);
      } else {
        Pump();
      }
      return;
    }

    if (event.queue_time) {
      absl::MutexLock lock(&mu_);
      queue_time_ = *event.queue_time;
    }
    absl::Status status = event.status;
    switch (event.outcome) {
      case Outcome::kCompleteLength:
      case Outcome::kCompleteStop:
        status = absl::OkStatus();
        break;
      case Outcome::kCancelled:
        // Only the front end cancels (it ends the call first), or a shutdown without drain.
        status = absl::UnavailableError("the server is shutting down");
        break;
      case Outcome::kTimedOut:
        status = absl::DeadlineExceededError(absl::StrCat(
            "the deadline passed while the request waited in the queue: ", event.status.message()));
        break;
      case Outcome::kRejected:
        if (status.code() != absl::StatusCode::kInvalidArgument &&
            status.code() != absl::StatusCode::kResourceExhausted) {
          spdlog::error("request {}: the engine rejected it: {}", id_, status.ToString());
          status = absl::InternalError(absl::StrCat("request ", id_, " was refused by the engine"));
        }
        break;
      case Outcome::kFailed:
        spdlog::error("request {}: the engine failed: {}", id_, event.status.ToString());
        status = absl::InternalError(
            absl::StrCat("the engine failed while running request ", id_, "; see the server log"));
        break;
    }
    // Metrics and the log line first: a client that has its answer must find it counted.
    ReportDone(event);
    End(status, ToFinishReason(event.outcome), /*cancel_in_engine=*/false);
    service_->EngineReleased(id_);
    Unref();
  }

  // The first caller ends the call (and, with `cancel_in_engine`, cancels the request there);
  // later ones only record that the client is gone.
  void End(absl::Status status, v1::FinishReason reason, bool cancel_in_engine,
           bool client_gone = false) {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      if (ended_) {
        if (client_gone) SetEndLocked(/*client_gone=*/true);
      } else {
        first = true;
        ended_ = true;
        end_status_ = std::move(status);
        finish_reason_ = reason;
        end_time_ = absl::Now();
        SetEndLocked(client_gone);
      }
    }
    if (first && cancel_in_engine && id_ != 0) {
      service_->serving_.load(std::memory_order_acquire)->engine->Cancel(id_);
    }
    Pump();
  }

  // Refusals before the engine held the request (the scheduler counts its own).
  void CountRefusal(const absl::Status& status) {
    const ServingContext* serving = service_->serving_.load(std::memory_order_acquire);
    if (serving == nullptr || serving->metrics == nullptr) return;
    if (status.code() == absl::StatusCode::kResourceExhausted) {
      serving->metrics->OnRejected(RejectReason::kQueueFull);
    } else if (status.code() == absl::StatusCode::kInvalidArgument) {
      serving->metrics->OnRejected(RejectReason::kInvalidArgument);
    }
  }

  // The request's metrics and its log line, once, at the engine's final event.
  void ReportDone(const Event& event) {
    RequestSummary summary;
    summary.id = id_;
    summary.outcome = event.outcome;
    summary.prompt_tokens = prompt_tokens_;
    summary.status = event.status;
    {
      absl::MutexLock lock(&mu_);
      summary.generated_tokens = num_tokens_;
      if (event.queue_time) summary.queue_time = queue_time_;
      if (first_token_) summary.time_to_first_token = *first_token_ - arrival_;
    }
    summary.e2e_latency = absl::Now() - arrival_;
    const ServingContext* serving = service_->serving_.load(std::memory_order_acquire);
    if (serving->metrics != nullptr) serving->metrics->OnRequestDone(summary);
    LogRequestDone(summary);
  }

  std::atomic<int> refs_{1};
};

// Infer: the whole result in one response.
class InferenceService::UnaryCall final : public InferenceService::Call,
                                          public grpc::ServerUnaryReactor {
 public:
  UnaryCall(InferenceService* service, grpc::CallbackServerContext* context,
            const v1::InferRequest& request, v1::InferResponse* response)
      : Call(service, context), response_(response) {
    top_logprobs_ = request.top_logprobs() > 0;
    Begin(request);
  }

  void OnCancel() override { ClientGone(); }
  void OnDone() override { Unref(); }

 private:
  void AddTokenLocked(const Event& event) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response_->add_token_ids(event.token);
    response_->mutable_text()->append(TextOfLocked(event.token));
    if (return_logprobs_) response_->add_logprobs(event.logprob);
    if (top_logprobs_) {
      v1::TopLogprobs* top = response_->add_top_logprobs();
      for (const TokenLogprob& t : event.top_logprobs) {
        top->add_token_ids(t.token);
        top->add_logprobs(t.logprob);
      }
    }
  }

  void SetEndLocked(bool client_gone) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!end_status_.ok() || client_gone) return;
    response_->set_request_id(id_);
    response_->set_model(service_->serving_.load()->limits.model_name);
    response_->set_finish_reason(finish_reason_);
    response_->mutable_text()->append(FlushTextLocked());
    FillUsage(response_->mutable_usage());
    FillTimings(response_->mutable_timings());
  }

  void Pump() override {
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (!ended_ || finished_) return;
      finished_ = true;
      status = ToGrpcStatus(end_status_);
    }
    Finish(status);
  }

  v1::InferResponse* const response_;  // gRPC's; written under mu_ until finished_
  bool top_logprobs_ = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// InferStream: tokens as they come, then a final message, then the status.
class InferenceService::StreamCall final
    : public InferenceService::Call,
      public grpc::ServerWriteReactor<v1::InferStreamResponse> {
 public:
  StreamCall(InferenceService* service, grpc::CallbackServerContext* context,
             const v1::InferRequest& request)
      : Call(service, context) {
    top_logprobs_ = request.top_logprobs() > 0;
    Begin(request);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    if (!ok) {
      ClientGone();  // the stream broke; OnCancel may follow and then does nothing
      return;
    }
    Pump();
  }
  void OnCancel() override { ClientGone(); }
  void OnDone() override { Unref(); }

 private:
  void AddTokenLocked(const Event& event) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pending_tokens_ == 0) {
      pending_.Clear();
      pending_.set_request_id(id_);
      pending_.set_first_token_index(event.token_index);
    }
    ++pending_tokens_;
    pending_.add_token_ids(event.token);
    pending_.mutable_text()->append(TextOfLocked(event.token));
    if (return_logprobs_) pending_.add_logprobs(event.logprob);
    if (top_logprobs_) {
      v1::TopLogprobs* top = pending_.add_top_logprobs();
      for (const TokenLogprob& t : event.top_logprobs) {
        top->add_token_ids(t.token);
        top->add_logprobs(t.logprob);
      }
    }
  }

  void SetEndLocked(bool client_gone) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (client_gone) {
      client_gone_ = true;
      pending_tokens_ = 0;
      has_final_ = false;
      return;
    }
    has_final_ = true;
    final_.set_request_id(id_);
    final_.set_first_token_index(num_tokens_);
    final_.set_finish_reason(finish_reason_);
    final_.set_text(FlushTextLocked());
    FillUsage(final_.mutable_usage());
    FillTimings(final_.mutable_timings());
  }

  void Pump() override {
    enum class Action { kNone, kWrite, kWriteAndFinish, kFinish } action = Action::kNone;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      if (pending_tokens_ > 0) {
        writing_message_.Swap(&pending_);
        pending_tokens_ = 0;
        writing_ = true;
        action = Action::kWrite;
      } else if (ended_) {
        status = ToGrpcStatus(end_status_);
        if (has_final_ && status.ok()) {
          has_final_ = false;
          finished_ = true;
          action = Action::kWriteAndFinish;
        } else if (has_final_) {
          // An error after tokens: the final message (with its finish reason), then the status.
          has_final_ = false;
          writing_message_.Swap(&final_);
          writing_ = true;
          action = Action::kWrite;
        } else {
          finished_ = true;
          action = Action::kFinish;
        }
      }
    }
    switch (action) {
      case Action::kNone:
        break;
      case Action::kWrite:
        StartWrite(&writing_message_);
        break;
      case Action::kWriteAndFinish:
        StartWriteAndFinish(&final_, grpc::WriteOptions(), status);
        break;
      case Action::kFinish:
        Finish(status);
        break;
    }
  }

  bool top_logprobs_ = false;
  // Tokens not handed to gRPC yet (pending_tokens_ of them), the final message, and the message
  // of the write in flight (touched only by whoever set writing_).
  v1::InferStreamResponse pending_ ABSL_GUARDED_BY(mu_);
  int64_t pending_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  v1::InferStreamResponse final_ ABSL_GUARDED_BY(mu_);
  bool has_final_ ABSL_GUARDED_BY(mu_) = false;
  v1::InferStreamResponse writing_message_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

InferenceService::InferenceService(std::string version)
    : version_(std::move(version)), start_time_(absl::Now()) {}

InferenceService::~InferenceService() = default;

void InferenceService::Start(ServingContext context) {
  context_ = std::make_unique<const ServingContext>(std::move(context));
  serving_.store(context_.get(), std::memory_order_release);
}

void InferenceService::StopAccepting() { stopped_.store(true, std::memory_order_release); }

void InferenceService::AbortAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, call] : in_engine_) call->Abort();
}

bool InferenceService::WaitForNoCalls(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_calls_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

int64_t InferenceService::open_calls() const {
  absl::MutexLock lock(&mu_);
  return open_calls_;
}

absl::Status InferenceService::Admission() const {
  if (stopped_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (serving_.load(std::memory_order_acquire) == nullptr) {
    return absl::UnavailableError("the model is loading; retry shortly");
  }
  return absl::OkStatus();
}

void InferenceService::CallOpened() {
  absl::MutexLock lock(&mu_);
  ++open_calls_;
}

void InferenceService::CallClosed() {
  absl::MutexLock lock(&mu_);
  --open_calls_;
}

void InferenceService::EngineHolds(RequestId id, Call* call) {
  absl::MutexLock lock(&mu_);
  in_engine_.emplace(id, call);
}

void InferenceService::EngineReleased(RequestId id) {
  absl::MutexLock lock(&mu_);
  in_engine_.erase(id);
}

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const v1::InferRequest* request,
                                                  v1::InferResponse* response) {
  return new UnaryCall(this, context, *request, response);
}

grpc::ServerWriteReactor<v1::InferStreamResponse>* InferenceService::InferStream(
    grpc::CallbackServerContext* context, const v1::InferRequest* request) {
  return new StreamCall(this, context, *request);
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest* /*request*/,
                                                         v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const ServingContext* serving = serving_.load(std::memory_order_acquire);
  if (serving == nullptr) {
    reactor->Finish(ToGrpcStatus(absl::UnavailableError("the model is loading; retry shortly")));
  } else {
    *response = serving->model_info;
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetServerInfo(
    grpc::CallbackServerContext* context, const v1::GetServerInfoRequest* /*request*/,
    v1::ServerInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const ServingContext* serving = serving_.load(std::memory_order_acquire);
  response->set_version(version_);
  response->set_uptime_microseconds(Micros(absl::Now() - start_time_));
  response->set_active_calls(open_calls());
  if (serving == nullptr) {
    response->set_state(v1::ServerInfo::LOADING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  response->set_state(stopped_.load(std::memory_order_acquire) ? v1::ServerInfo::DRAINING
                                                               : v1::ServerInfo::SERVING);
  response->set_executor(serving->executor_name);
  response->set_model(serving->limits.model_name);
  response->set_priority_levels(serving->limits.priority_levels);
  const EngineLoopSnapshot snapshot = serving->engine->snapshot();
  const SchedulerStats& stats = snapshot.stats;
  response->set_kv_block_size(serving->kv_block_size);
  response->set_kv_blocks_total(snapshot.kv_blocks_total);
  response->set_kv_blocks_free(snapshot.kv_blocks_free);
  response->set_num_running(snapshot.num_running);
  response->set_num_waiting(snapshot.num_waiting);
  response->set_steps(stats.steps);
  const auto outcome = [&stats](Outcome o) { return stats.outcomes[static_cast<int>(o)]; };
  response->set_requests_completed(outcome(Outcome::kCompleteLength) +
                                   outcome(Outcome::kCompleteStop));
  response->set_requests_cancelled(outcome(Outcome::kCancelled));
  response->set_requests_timed_out(outcome(Outcome::kTimedOut));
  response->set_requests_failed(outcome(Outcome::kFailed));
  int64_t rejected = 0;
  for (int64_t n : stats.rejections) rejected += n;
  response->set_requests_rejected(rejected);
  response->set_preemptions(stats.preemptions);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace convoy
