#include "frontend/inference_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convoy/status_macros.h"
#include "frontend/choices.h"
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

// Fills a response, choice or stream message with new output.
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
void AppendTokens(const SessionOutput& out, Message* message) {
  message->mutable_token_ids()->Add(out.token_ids.begin(), out.token_ids.end());
  message->mutable_logprobs()->Add(out.logprobs.begin(), out.logprobs.end());
  AddTopLogprobs(out.top_logprobs, message->mutable_top_logprobs());
  message->mutable_text()->append(out.text);
}

template <typename Message>
void AppendOutput(const SessionOutput& out, Message* message) {
  AppendTokens(out, message);
  message->mutable_prompt_logprobs()->Add(out.prompt_logprobs.begin(), out.prompt_logprobs.end());
  AddTopLogprobs(out.prompt_top_logprobs, message->mutable_prompt_top_logprobs());
}

void FillUsage(const SessionEnd& end, v1::Usage* usage) {
  usage->set_prompt_tokens(end.prompt_tokens);
  usage->set_cached_prompt_tokens(end.cached_prompt_tokens);
  usage->set_completion_tokens(static_cast<int32_t>(end.completion_tokens));
}

// The call's status once every choice has ended: the first failure's, else OK.
grpc::Status CallStatus(const ChoiceGroup& choices) {
  const SessionEnd* failure = choices.failure();
  return failure == nullptr ? grpc::Status::OK : ToGrpcStatus(failure->status);
}

}  // namespace

// Infer: the whole result in one response. The sessions wake Pump with each token; the response
// is filled and the call finished once every choice has ended, or at once when one fails (the
// others are ended then).
class InferenceService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(InferenceService* service, grpc::CallbackServerContext* context,
            const v1::InferRequest& request, int32_t n, grpc::ByteBuffer* response)
      : service_(service),
        out_(response),
        choices_(&service->hub_, n, [this] { Pump(); }),
        outputs_(n) {
    choices_.Begin(request, GrpcCallDeadline(*context), GrpcCallOrigin(*context));
  }

  void OnCancel() override { choices_.ClientGone(); }
  void OnDone() override {
    choices_.Detach();
    delete this;
  }

 private:
  void Pump() {
    grpc::Status status;
    bool end_all = false;  // a choice failed: the others are ended, unlocked
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      for (int32_t i = 0; i < choices_.size(); ++i) choices_.Take(i, &outputs_[i]);
      if (!choices_.all_ended() && choices_.failure() == nullptr) return;
      finished_ = true;
      status = CallStatus(choices_);
      end_all = !choices_.all_ended();
      if (status.ok()) {
        v1::InferResponse response;
        FillResponse(&response);
        SerializeToBytes(response, out_);
      }
    }
    if (end_all) choices_.ClientGone();
    Finish(status);
  }

  void FillResponse(v1::InferResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response->set_request_id(choices_.session(0).id());
    response->set_model(service_->hub_.serving()->limits.model_name);
    const SessionEnd& first = *choices_.end(0);
    response->mutable_prompt_token_ids()->Add(first.prompt_token_ids.begin(),
                                              first.prompt_token_ids.end());
    if (choices_.size() == 1) {
      AppendOutput(outputs_[0], response);
      response->set_finish_reason(first.finish_reason);
      FillUsage(first, response->mutable_usage());
      *response->mutable_timings() = first.timings;
      response->set_seed(first.seed);
      return;
    }
    response->mutable_prompt_logprobs()->Add(outputs_[0].prompt_logprobs.begin(),
                                             outputs_[0].prompt_logprobs.end());
    AddTopLogprobs(outputs_[0].prompt_top_logprobs, response->mutable_prompt_top_logprobs());
    FillUsage(choices_.Totals(), response->mutable_usage());
    for (int32_t i = 0; i < choices_.size(); ++i) {
      const SessionEnd& end = *choices_.end(i);
      v1::Choice* choice = response->add_choices();
      choice->set_index(i);
      choice->set_request_id(choices_.session(i).id());
      AppendTokens(outputs_[i], choice);
      choice->set_finish_reason(end.finish_reason);
      choice->set_seed(end.seed);
      *choice->mutable_timings() = end.timings;
    }
  }

  InferenceService* const service_;
  grpc::ByteBuffer* const out_;  // gRPC's; written once, before Finish
  ChoiceGroup choices_;
  absl::Mutex mu_;
  std::vector<SessionOutput> outputs_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// InferStream: the new output whenever the last write is done (so a slow reader gets several
// tokens per message), each choice's last message, then the status. With several choices, each
// write carries one choice's news, the choices taking turns.
class InferenceService::StreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamCall(InferenceService* service, grpc::CallbackServerContext* context,
             const v1::InferRequest& request, int32_t n)
      : context_(context),
        choices_(&service->hub_, n, [this] { Pump(); }),
        held_(n),
        done_(n, false) {
    choices_.Begin(request, GrpcCallDeadline(*context), GrpcCallOrigin(*context));
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) client_gone_ = true;
    }
    // The stream broke; OnCancel may follow and then does nothing. A session may have ended
    // while this write was stuck (a slow client): Pump finishes the call then.
    if (!ok) choices_.ClientGone();
    Pump();
  }
  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      client_gone_ = true;
    }
    choices_.ClientGone();
  }
  void OnDone() override {
    choices_.Detach();
    delete this;
  }

 private:
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish };

  void Pump() {
    Action action = Action::kNone;
    grpc::Status status;
    bool cancel = false;
    bool end_all = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (writing_) {
        // A write stuck on a client that does not read, and the hub gave up on it: cancel the
        // call, so that the write fails (OnWriteDone) and the call finishes.
        if (!choices_.slow_client() || cancelling_) return;
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
      action = NextLocked(&status);
      if (choices_.size() > 1 && choices_.failure() != nullptr && !ending_all_) {
        ending_all_ = true;
        end_all = true;
      }
    }
    // Before the call can finish (and be deleted): the other choices end, each with its last
    // message still to come.
    if (end_all) choices_.ClientGone();
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

  // Takes every choice's news (so that a failure is seen at once and no output of a choice that
  // ended is dropped when the others are ended) and picks what to do: the next message, from the
  // choices in turn, or the end of the call once every choice has had its last message.
  Action NextLocked(grpc::Status* status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int32_t n = choices_.size();
    for (int32_t i = 0; i < n; ++i) choices_.Take(i, &held_[i]);
    for (int32_t k = 0; k < n; ++k) {
      const int32_t i = (next_ + k) % n;
      if (done_[i]) continue;
      SessionOutput& out = held_[i];
      const std::optional<SessionEnd>& end = choices_.end(i);
      // Text without tokens comes only at the end (what was held back): it goes in the final
      // message.
      if (!client_gone_ && (!out.token_ids.empty() || (!out.text.empty() && !end))) {
        StartMessageLocked(i);
        writing_message_.set_first_token_index(out.first_token_index);
        AppendOutput(out, &writing_message_);
        out = SessionOutput();
        writing_ = true;
        return Action::kWrite;  // the end, if there is one, after this write
      }
      if (!end) continue;
      done_[i] = true;
      if (client_gone_) continue;
      StartMessageLocked(i);
      writing_message_.set_first_token_index(end->completion_tokens);
      writing_message_.set_finish_reason(end->finish_reason);
      writing_message_.set_text(out.text);
      out = SessionOutput();
      FillUsage(*end, writing_message_.mutable_usage());
      *writing_message_.mutable_timings() = end->timings;
      writing_message_.mutable_prompt_token_ids()->Add(end->prompt_token_ids.begin(),
                                                       end->prompt_token_ids.end());
      writing_message_.set_seed(end->seed);
      *status = CallStatus(choices_);
      if (AllDoneLocked() && status->ok()) {
        finished_ = true;
        return Action::kWriteAndFinish;
      }
      // More choices to end, or an error: the status after this write.
      writing_ = true;
      return Action::kWrite;
    }
    if (!AllDoneLocked()) return Action::kNone;
    finished_ = true;
    *status = CallStatus(choices_);
    return Action::kFinish;
  }

  void StartMessageLocked(int32_t choice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    next_ = (choice + 1) % choices_.size();
    writing_message_.Clear();
    writing_message_.set_request_id(choices_.session(choice).id());
    writing_message_.set_choice_index(choice);
  }

  bool AllDoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(done_.begin(), done_.end(), [](bool done) { return done; });
  }

  grpc::CallbackServerContext* const context_;
  ChoiceGroup choices_;
  absl::Mutex mu_;
  // The message of the write in flight and its bytes (touched only by whoever set writing_).
  v1::InferStreamResponse writing_message_;
  grpc::ByteBuffer writing_bytes_;
  // Each choice's output taken and not written yet; whether its last message is built.
  std::vector<SessionOutput> held_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  int32_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the choice whose turn it is
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_all_ ABSL_GUARDED_BY(mu_) = false;  // a choice failed: the others are ended
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

absl::StatusOr<int32_t> InferenceService::ParseInferRequest(const grpc::ByteBuffer& bytes,
                                                            v1::InferRequest* request) {
  const absl::Status parsed = ParseRequestBytes(bytes, request);
  absl::StatusOr<int32_t> n =
      parsed.ok() ? CountChoices(request->n(), hub_) : absl::StatusOr<int32_t>(parsed);
  if (!n.ok()) hub_.CountRefusal(n.status());
  return n;
}

grpc::ServerUnaryReactor* InferenceService::Infer(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  v1::InferRequest parsed;
  absl::StatusOr<int32_t> n = ParseInferRequest(*request, &parsed);
  if (!n.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(n.status()));
    return reactor;
  }
  return new UnaryCall(this, context, parsed, *n, response);
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
  absl::StatusOr<int32_t> n = ParseInferRequest(*request, &parsed);
  if (!n.ok()) return new RefusedStream(ToGrpcStatus(n.status()));
  return new StreamCall(this, context, parsed, *n);
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
