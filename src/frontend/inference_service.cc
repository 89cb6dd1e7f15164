#include "frontend/inference_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "convoy/status_macros.h"
#include "frontend/grpc_auth.h"
#include "frontend/grpc_bytes.h"
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

// Fills a response or stream message with new output.
void AddTopLogprobs(const std::vector<std::vector<TokenLogprob>>& steps,
                    google::protobuf::RepeatedPtrField<v1::TopLogprobs>* out) {
  for (const std::vector<TokenLogprob>& step : steps) {
    v1::TopLogprobs* top = out->Add();
    for (const TokenLogprob& t : step) {
      top->add_token_ids(t.token);
      top->add_logprobs(t.logprob);
    }
  }
}

template <typename Message>
void AppendOutput(const SessionOutput& out, Message* message) {
  message->mutable_token_ids()->Add(out.token_ids.begin(), out.token_ids.end());
  message->mutable_logprobs()->Add(out.logprobs.begin(), out.logprobs.end());
  AddTopLogprobs(out.top_logprobs, message->mutable_top_logprobs());
  message->mutable_text()->append(out.text);
  message->mutable_prompt_logprobs()->Add(out.prompt_logprobs.begin(), out.prompt_logprobs.end());
  AddTopLogprobs(out.prompt_top_logprobs, message->mutable_prompt_top_logprobs());
}

void FillUsage(const SessionEnd& end, v1::Usage* usage) {
  usage->set_prompt_tokens(end.prompt_tokens);
  usage->set_completion_tokens(static_cast<int32_t>(end.completion_tokens));
}

}  // namespace

// Infer: the whole result in one response. The session wakes Pump with each token; the response
// is filled and the call finished once the session has ended.
class InferenceService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(InferenceService* service, grpc::CallbackServerContext* context,
            const v1::InferRequest& request, grpc::ByteBuffer* response)
      : service_(service), out_(response) {
    session_ = GenerationSession::Create(&service->hub_, [this] { Pump(); });
    session_->Begin(request, GrpcCallDeadline(*context), GrpcCallOrigin(*context));
  }

  void OnCancel() override { session_->ClientGone(); }
  void OnDone() override {
    session_->Detach();
    delete this;
  }

 private:
  void Pump() {
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      std::optional<SessionEnd> end = session_->Take(&output_);
      if (!end) return;
      finished_ = true;
      status = ToGrpcStatus(end->status);
      if (status.ok()) {
        v1::InferResponse response;
        response.set_request_id(session_->id());
        response.set_model(service_->hub_.serving()->limits.model_name);
        AppendOutput(output_, &response);
        response.set_finish_reason(end->finish_reason);
        FillUsage(*end, response.mutable_usage());
        *response.mutable_timings() = end->timings;
        response.mutable_prompt_token_ids()->Add(end->prompt_token_ids.begin(),
                                                 end->prompt_token_ids.end());
        response.set_seed(end->seed);
        SerializeToBytes(response, out_);
      }
    }
    Finish(status);
  }

  InferenceService* const service_;
  grpc::ByteBuffer* const out_;  // gRPC's; written once, before Finish
  std::shared_ptr<GenerationSession> session_;
  absl::Mutex mu_;
  SessionOutput output_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// InferStream: the new output whenever the last write is done (so a slow reader gets several
// tokens per message), then a final message, then the status.
class InferenceService::StreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamCall(InferenceService* service, grpc::CallbackServerContext* context,
             const v1::InferRequest& request)
      : context_(context) {
    session_ = GenerationSession::Create(&service->hub_, [this] { Pump(); });
    session_->Begin(request, GrpcCallDeadline(*context), GrpcCallOrigin(*context));
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) client_gone_ = true;
    }
    // The stream broke; OnCancel may follow and then does nothing. The session may have ended
    // while this write was stuck (a slow client): Pump finishes the call then.
    if (!ok) session_->ClientGone();
    Pump();
  }
  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      client_gone_ = true;
    }
    session_->ClientGone();
  }
  void OnDone() override {
    session_->Detach();
    delete this;
  }

 private:
  void Pump() {
    enum class Action { kNone, kWrite, kWriteAndFinish, kFinish } action = Action::kNone;
    grpc::Status status;
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (writing_) {
        // A write stuck on a client that does not read, and the hub gave up on it: cancel the
        // call, so that the write fails (OnWriteDone) and the call finishes.
        if (!session_->slow_client() || cancelling_) return;
        cancelling_ = true;
        cancel = true;
      }
    }
    if (cancel) {
      context_->TryCancel();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      SessionOutput out;
      std::optional<SessionEnd> end = session_->Take(&out);
      // Text without tokens comes only at the end (what was held back): it goes in the final
      // message.
      if (!client_gone_ && (!out.token_ids.empty() || (!out.text.empty() && !end))) {
        writing_message_.Clear();
        writing_message_.set_request_id(session_->id());
        writing_message_.set_first_token_index(out.first_token_index);
        AppendOutput(out, &writing_message_);
        writing_ = true;
        action = Action::kWrite;  // the end, if there is one, after this write
      } else if (end) {
        status = ToGrpcStatus(end->status);
        if (client_gone_ || final_written_) {
          finished_ = true;
          action = Action::kFinish;
        } else {
          writing_message_.Clear();
          writing_message_.set_request_id(session_->id());
          writing_message_.set_first_token_index(end->completion_tokens);
          writing_message_.set_finish_reason(end->finish_reason);
          writing_message_.set_text(out.text);
          FillUsage(*end, writing_message_.mutable_usage());
          *writing_message_.mutable_timings() = end->timings;
          writing_message_.mutable_prompt_token_ids()->Add(end->prompt_token_ids.begin(),
                                                           end->prompt_token_ids.end());
          writing_message_.set_seed(end->seed);
          if (status.ok()) {
            finished_ = true;
            action = Action::kWriteAndFinish;
          } else {
            // An error: the final message (with its finish reason), then the status.
            final_written_ = true;
            writing_ = true;
            action = Action::kWrite;
          }
        }
      }
    }
    switch (action) {
      case Action::kNone:
        break;
      case Action::kWrite:
        SerializeToBytes(writing_message_, &writing_bytes_);
        StartWrite(&writing_bytes_);
        break;
      case Action::kWriteAndFinish:
        SerializeToBytes(writing_message_, &writing_bytes_);
        StartWriteAndFinish(&writing_bytes_, grpc::WriteOptions(), status);
        break;
      case Action::kFinish:
        Finish(status);
        break;
    }
  }

  grpc::CallbackServerContext* const context_;
  std::shared_ptr<GenerationSession> session_;
  absl::Mutex mu_;
  // The message of the write in flight and its bytes (touched only by whoever set writing_).
  v1::InferStreamResponse writing_message_;
  grpc::ByteBuffer writing_bytes_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool final_written_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelling_ ABSL_GUARDED_BY(mu_) = false;  // TryCancel called for a slow client
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

InferenceService::InferenceService(std::string version) : version_(std::move(version)) {}

InferenceService::~InferenceService() = default;

void InferenceService::Start(ServingContext context) { hub_.Start(std::move(context)); }

void InferenceService::StopAccepting() { hub_.StopAccepting(); }

void InferenceService::AbortAll() { hub_.AbortAll(); }

bool InferenceService::WaitForNoCalls(absl::Duration timeout) {
  return hub_.WaitForNoSessions(timeout);
}

int64_t InferenceService::open_calls() const { return hub_.open_sessions(); }

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  v1::InferRequest parsed;
  if (absl::Status status = ParseRequestBytes(*request, &parsed); !status.ok()) {
    hub_.CountRefusal(RejectReason::kInvalidArgument);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  return new UnaryCall(this, context, parsed, response);
}

namespace {
// A stream that ends with `status` before writing anything.
class RefusedStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};
}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::InferStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  v1::InferRequest parsed;
  if (absl::Status status = ParseRequestBytes(*request, &parsed); !status.ok()) {
    hub_.CountRefusal(RejectReason::kInvalidArgument);
    return new RefusedStream(ToGrpcStatus(status));
  }
  return new StreamCall(this, context, parsed);
}

namespace {

// A unary call answered at once: `status`, with `response` serialized into `*out` when it is OK.
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status,
                                 const google::protobuf::Message& response, grpc::ByteBuffer* out) {
  if (status.ok()) SerializeToBytes(response, out);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  v1::ModelInfo info;
  const absl::Status status = FillModelInfo(*context, *request, &info);
  return Answer(context, status, info, response);
}

grpc::ServerUnaryReactor* InferenceService::GetServerInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  v1::ServerInfo info;
  const absl::Status status = FillServerInfo(*context, *request, &info);
  return Answer(context, status, info, response);
}

absl::Status InferenceService::FillModelInfo(const grpc::CallbackServerContext& context,
                                             const grpc::ByteBuffer& request,
                                             v1::ModelInfo* info) const {
  v1::GetModelInfoRequest parsed;
  RETURN_IF_ERROR(ParseRequestBytes(request, &parsed));
  RETURN_IF_ERROR(hub_.Authenticate(GrpcAuthorization(context)).status());
  const ServingContext* serving = hub_.serving();
  if (serving == nullptr) return absl::UnavailableError("the model is loading; retry shortly");
  *info = serving->model_info;
  return absl::OkStatus();
}

absl::Status InferenceService::FillServerInfo(const grpc::CallbackServerContext& context,
                                              const grpc::ByteBuffer& request,
                                              v1::ServerInfo* response) const {
  v1::GetServerInfoRequest parsed;
  RETURN_IF_ERROR(ParseRequestBytes(request, &parsed));
  RETURN_IF_ERROR(hub_.Authenticate(GrpcAuthorization(context)).status());
  const ServingContext* serving = hub_.serving();
  response->set_version(version_);
  const ConfigStatus config = hub_.config_status();
  response->set_effective_config(config.text);
  response->set_config_hash(config.hash);
  response->set_config_reloads_applied(config.reloads_applied);
  response->set_config_reloads_refused(config.reloads_refused);
  response->set_last_config_reload(config.last_reload);
  response->set_uptime_microseconds(Micros(absl::Now() - hub_.start_time()));
  response->set_active_calls(open_calls());
  if (serving == nullptr) {
    response->set_state(v1::ServerInfo::LOADING);
    return absl::OkStatus();
  }
  response->set_state(hub_.accepting() ? v1::ServerInfo::SERVING : v1::ServerInfo::DRAINING);
  response->set_executor(serving->executor_name);
  response->set_model(serving->limits.model_name);
  response->set_priority_levels(serving->limits.priority_levels);
  const EngineLoopSnapshot snapshot = serving->engine->snapshot();
  const SchedulerStats& stats = snapshot.stats;
  response->set_kv_block_size(serving->kv_block_size);
  response->set_kv_blocks_total(snapshot.kv_blocks_total);
  response->set_kv_blocks_free(snapshot.kv_blocks_free);
  response->set_kv_dtype(serving->kv_dtype);
  response->set_kv_tokens_total(int64_t{snapshot.kv_blocks_total} * serving->kv_block_size);
  response->set_num_running(snapshot.num_running);
  response->set_num_waiting(snapshot.num_waiting);
  response->set_steps(stats.steps);
  const std::array<int64_t, kNumOutcomes> outcomes = hub_.outcomes();
  const auto outcome = [&outcomes](Outcome o) { return outcomes[static_cast<int>(o)]; };
  response->set_requests_completed(outcome(Outcome::kCompleteLength) +
                                   outcome(Outcome::kCompleteStop));
  response->set_requests_cancelled(outcome(Outcome::kCancelled));
  response->set_requests_timed_out(outcome(Outcome::kTimedOut));
  response->set_requests_failed(outcome(Outcome::kFailed));
  int64_t rejected = 0;
  for (int64_t n : hub_.rejections()) rejected += n;
  response->set_requests_rejected(rejected);
  response->set_preemptions(stats.preemptions);
  response->set_largest_step_rows_since_reload(stats.largest_step_rows_since_reconfigure);
  const StepPhaseTotals& totals = snapshot.step_phases;
  if (totals.steps > 0) {
    v1::StepPhaseMeans* means = response->mutable_step_phase_means();
    const auto mean_us = [&totals](absl::Duration sum) {
      return absl::ToDoubleMicroseconds(sum) / static_cast<double>(totals.steps);
    };
    means->set_steps(totals.steps);
    means->set_plan_us(mean_us(totals.sum.plan));
    means->set_launch_us(mean_us(totals.sum.launch));
    means->set_emit_us(mean_us(totals.sum.emit));
    means->set_plan_ahead_us(mean_us(totals.sum.plan_ahead));
    means->set_wait_us(mean_us(totals.sum.wait));
    means->set_apply_us(mean_us(totals.sum.apply));
    means->set_engine_thread_us(mean_us(totals.sum.engine_thread));
    means->set_executor_prepare_us(mean_us(totals.sum.executor.prepare));
    means->set_executor_forward_us(mean_us(totals.sum.executor.forward));
    means->set_executor_sample_us(mean_us(totals.sum.executor.sample));
  }
  return absl::OkStatus();
}

}  // namespace convoy
