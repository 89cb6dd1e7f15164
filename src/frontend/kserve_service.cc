#include "frontend/kserve_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "frontend/choices.h"
#include "frontend/grpc_auth.h"
#include "frontend/grpc_bytes.h"
#include "frontend/kserve_request.h"
#include "frontend/kserve_tensors.h"
#include "frontend/status_mapping.h"

namespace convoy {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

constexpr char kFinalFlag[] = "triton_final_response";

void SetParameter(ModelInferResponse* response, const std::string& key, bool value) {
  (*response->mutable_parameters())[key].set_bool_param(value);
}

void StartResponse(const KServeRequest& request, const ServingContext* serving,
                   ModelInferResponse* response) {
  if (serving != nullptr) response->set_model_name(serving->limits.model_name);
  response->set_model_version(kKServeModelVersion);
  response->set_id(request.answer.id);
}

// The parameters of the response that ends a request: with n choices, finish_reason lists each
// choice's, comma-separated, and the usage counts the prompt once and every choice's tokens.
void SetEndParameters(const ChoiceGroup& choices, ModelInferResponse* response) {
  std::vector<absl::string_view> reasons;
  for (int32_t i = 0; i < choices.size(); ++i) {
    reasons.push_back(FinishReasonText(choices.end(i)->finish_reason));
  }
  const SessionEnd totals = choices.Totals();
  auto& parameters = *response->mutable_parameters();
  parameters["finish_reason"].set_string_param(absl::StrJoin(reasons, ","));
  parameters["prompt_tokens"].set_int64_param(totals.prompt_tokens);
  parameters["cached_prompt_tokens"].set_int64_param(totals.cached_prompt_tokens);
  parameters["completion_tokens"].set_int64_param(totals.completion_tokens);
}

// Each choice's new output, as AddKServeOutputs takes it.
void AddOutputs(const KServeRequest& request, const std::vector<SessionOutput>& outputs,
                ModelInferResponse* response) {
  std::vector<KServeChoiceOutput> choices;
  for (const SessionOutput& output : outputs) choices.push_back({output.token_ids, output.text});
  AddKServeOutputs(request.answer.outputs, choices, response);
}

// The whole answer: each choice's generated output, after the prompt when the request asked for
// it. REQUIRES: every choice has ended.
void FillWhole(const KServeRequest& request, const ServingContext* serving,
               const std::vector<SessionOutput>& outputs, const ChoiceGroup& choices,
               ModelInferResponse* response) {
  StartResponse(request, serving, response);
  const KServeAnswerSpec& answer = request.answer;
  if (answer.exclude_input) {
    AddOutputs(request, outputs, response);
  } else {
    const std::vector<int32_t>& prompt_ids = choices.end(0)->prompt_token_ids;
    std::string prompt_text = answer.prompt_text;
    const Tokenizer* tokenizer = serving == nullptr ? nullptr : serving->limits.tokenizer;
    if (prompt_text.empty() && tokenizer != nullptr) {
      // A prompt of ids: its text as the tokenizer reads it (ids it has no token for read as none).
      prompt_text = tokenizer->Decode(prompt_ids, /*skip_special=*/true).value_or("");
    }
    std::vector<SessionOutput> whole(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      whole[i].token_ids = prompt_ids;
      whole[i].token_ids.insert(whole[i].token_ids.end(), outputs[i].token_ids.begin(),
                                outputs[i].token_ids.end());
      whole[i].text = absl::StrCat(prompt_text, outputs[i].text);
    }
    AddOutputs(request, whole, response);
  }
  SetEndParameters(choices, response);
}

// Reads `request` into `*out` and returns its number of choices (CountChoices). A refusal is
// counted, with the field at fault named as the client named it.
absl::StatusOr<int32_t> ReadRequest(GenerationHub& hub, const ModelInferRequest& request,
                                    bool streaming, KServeRequest* out) {
  absl::StatusOr<KServeRequest> parsed = ParseKServeRequest(request, streaming);
  absl::StatusOr<int32_t> n = parsed.ok() ? CountChoices(parsed->request.n(), hub)
                                          : absl::StatusOr<int32_t>(parsed.status());
  if (!n.ok()) {
    hub.CountRefusal(n.status());
    return parsed.ok() ? KServeFieldNames(n.status(), *parsed) : n.status();
  }
  *out = *std::move(parsed);
  return n;
}

// The reactor of a call answered at once.
grpc::ServerUnaryReactor* Answered(grpc::CallbackServerContext* context,
                                   const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A stream message saying why a request failed; it ends the request.
ModelStreamInferResponse ErrorMessage(const std::string& id, const ServingContext* serving,
                                      const absl::Status& status) {
  ModelStreamInferResponse message;
  message.set_error_message(
      absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
  ModelInferResponse* response = message.mutable_infer_response();
  if (serving != nullptr) response->set_model_name(serving->limits.model_name);
  response->set_model_version(kKServeModelVersion);
  response->set_id(id);
  SetParameter(response, kFinalFlag, true);
  return message;
}

}  // namespace

// ModelInfer: the whole result in one response, once every choice has ended (or one failed).
class KServeService::UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(KServeService* service, grpc::CallbackServerContext* context,
            const ModelInferRequest& request, grpc::ByteBuffer* response)
      : hub_(service->hub_), out_(response) {
    const absl::StatusOr<int32_t> n = ReadRequest(*hub_, request, /*streaming=*/false, &request_);
    if (!n.ok()) {
      Finish(ToGrpcStatus(n.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      outputs_.resize(*n);
    }
    choices_ = std::make_unique<ChoiceGroup>(hub_, *n, [this] { Pump(); });
    choices_->Begin(request_.request, GrpcCallDeadline(*context), GrpcCallOrigin(*context));
  }

  void OnCancel() override {
    if (choices_ != nullptr) choices_->ClientGone();
  }
  void OnDone() override {
    if (choices_ != nullptr) choices_->Detach();
    delete this;
  }

 private:
  void Pump() {
    grpc::Status status;
    bool end_all = false;  // a choice failed: the others are ended, unlocked
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      for (int32_t i = 0; i < choices_->size(); ++i) choices_->Take(i, &outputs_[i]);
      const SessionEnd* failure = choices_->failure();
      if (!choices_->all_ended() && failure == nullptr) return;
      finished_ = true;
      end_all = !choices_->all_ended();
      if (failure != nullptr) {
        status = ToGrpcStatus(KServeFieldNames(failure->status, request_));
      } else {
        ModelInferResponse response;
        FillWhole(request_, hub_->serving(), outputs_, *choices_, &response);
        SerializeToBytes(response, out_);
      }
    }
    if (end_all) choices_->ClientGone();
    Finish(status);
  }

  GenerationHub* const hub_;
  grpc::ByteBuffer* const out_;           // gRPC's; written once, before Finish
  KServeRequest request_;                 // set before the sessions start; constant after
  std::unique_ptr<ChoiceGroup> choices_;  // likewise; null for a request refused at once
  absl::Mutex mu_;
  std::vector<SessionOutput> outputs_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// One request of a ModelStreamInfer call.
class KServeService::Generation {
 public:
  explicit Generation(KServeRequest parsed) : request(std::move(parsed)) {}

  const KServeRequest request;
  // Set before Begin; constant after.
  std::unique_ptr<ChoiceGroup> choices;
  // The rest belongs to the call's mutex.
  // In the call's ready_ list (woken, not looked at since).
  bool queued = false;
  // Its last message is built: wakes are ignored.
  bool finished = false;
  // Each choice's output so far, for an answer in one response (stream: false).
  std::vector<SessionOutput> whole;
};

// ModelStreamInfer: reads requests until the client half-closes; each becomes a Generation whose
// session's wake-ups queue it as ready. One write at a time: the next message is built when the
// last write is done, from the first ready generation, with everything it has new by then.
class KServeService::StreamCall final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(KServeService* service, grpc::CallbackServerContext* context)
      : hub_(service->hub_),
        context_(context),
        deadline_(GrpcCallDeadline(*context)),
        origin_(GrpcCallOrigin(*context)) {
    if (absl::Status caller = hub_->Authenticate(origin_.authorization).status(); !caller.ok()) {
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(ToGrpcStatus(caller));
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
      }
      Pump(/*may_detach=*/true);
      return;
    }
    ModelInferRequest request;
    if (absl::Status status = ParseRequestBytes(incoming_, &request); !status.ok()) {
      hub_->CountRefusal(RejectReason::kInvalidArgument);
      Refuse(/*id=*/"", status);  // bytes that are no request have no id to echo
    } else {
      Accept(request);
    }
    StartRead(&incoming_);
  }
  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    if (!ok) ClientGone();  // the stream broke
    Pump(/*may_detach=*/true);
  }
  void OnCancel() override { ClientGone(); }
  void OnDone() override {
    std::vector<std::shared_ptr<Generation>> left;
    {
      absl::MutexLock lock(&mu_);
      left.swap(active_);
      left.insert(left.end(), ended_.begin(), ended_.end());
      ended_.clear();
    }
    for (const std::shared_ptr<Generation>& generation : left) generation->choices->Detach();
    delete this;
  }

 private:
  void Accept(const ModelInferRequest& request) {
    KServeRequest parsed;
    const absl::StatusOr<int32_t> n = ReadRequest(*hub_, request, /*streaming=*/true, &parsed);
    if (!n.ok()) {
      Refuse(request.id(), n.status());
      return;
    }
    auto generation = std::make_shared<Generation>(std::move(parsed));
    Generation* g = generation.get();
    generation->whole.resize(*n);
    generation->choices = std::make_unique<ChoiceGroup>(hub_, *n, [this, g] { Wake(g); });
    {
      absl::MutexLock lock(&mu_);
      if (client_gone_) return;  // the call is ending: the request is dropped
      active_.push_back(generation);
    }
    // Begin may wake it at once (a refusal).
    generation->choices->Begin(generation->request.request, deadline_, origin_);
  }

  // Answers a request refused before it had a session with its error message.
  void Refuse(const std::string& id, const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      // The call is ending: nothing more is written (and the outbox must stay empty to finish).
      if (client_gone_) return;
      outbox_.push_back(ErrorMessage(id, hub_->serving(), status));
    }
    Pump(/*may_detach=*/true);
  }

  void Wake(Generation* generation) {
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      if (generation->finished || generation->queued) return;
      generation->queued = true;
      ready_.push_back(generation);
      // A write stuck on a client that does not read, and the hub gave up on this request: the
      // call is cancelled (its write fails, every request of it ends, the call finishes).
      if (writing_ && generation->choices->slow_client() && !cancelling_) {
        cancelling_ = true;
        cancel = true;
      }
    }
    if (cancel) {
      context_->TryCancel();
      return;
    }
    // Inside the session's wake: its generation cannot be detached here.
    Pump(/*may_detach=*/false);
  }

  // Ends every request of the call (the client cancelled or the stream broke).
  void ClientGone() {
    std::vector<std::shared_ptr<Generation>> generations;
    {
      absl::MutexLock lock(&mu_);
      client_gone_ = true;
      outbox_.clear();
      generations = active_;
    }
    for (const std::shared_ptr<Generation>& generation : generations) {
      generation->choices->ClientGone();
    }
  }

  // Writes the next message or finishes the call when it is time. `may_detach`: not called from a
  // session's wake (Detach waits for the wake in progress), so the ended generations' sessions
  // can be detached and freed.
  void Pump(bool may_detach) {
    enum class Action { kNone, kWrite, kFinish } action = Action::kNone;
    grpc::Status status;
    std::vector<std::shared_ptr<Generation>> ended;
    // Generations one of whose choices failed: their other choices are ended, unlocked.
    std::vector<std::shared_ptr<Generation>> failed;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      while (!ready_.empty() && (client_gone_ || (!writing_ && action == Action::kNone))) {
        Generation* generation = ready_.front();
        if (NextMessageLocked(generation, &writing_message_)) action = Action::kWrite;
        if (generation->finished) {
          ended_.push_back(RemoveLocked(generation));
          if (!generation->choices->all_ended()) failed.push_back(ended_.back());
        }
      }
      if (action == Action::kNone && !writing_ && !client_gone_ && !outbox_.empty()) {
        writing_message_ = std::move(outbox_.front());
        outbox_.pop_front();
        action = Action::kWrite;
      }
      if (action == Action::kWrite) {
        writing_ = true;
      } else if (!writing_ && reads_done_ && active_.empty() && outbox_.empty()) {
        finished_ = true;
        action = Action::kFinish;
        if (client_gone_) status = grpc::Status::CANCELLED;
      }
      if (may_detach) ended.swap(ended_);
    }
    // Outside the lock: a wake in progress holds its session's wake lock and waits for this one.
    for (const std::shared_ptr<Generation>& generation : failed) generation->choices->ClientGone();
    for (const std::shared_ptr<Generation>& generation : ended) generation->choices->Detach();
    if (action == Action::kWrite) {
      SerializeToBytes(writing_message_, &writing_bytes_);
      StartWrite(&writing_bytes_);
    } else if (action == Action::kFinish) {
      Finish(status);
    }
  }

  // Takes `generation`'s news. Returns true with the message to write in `*message`; leaves the
  // generation in ready_ only when it has more to say at once (an error after a last chunk).
  bool NextMessageLocked(Generation* generation, ModelStreamInferResponse* message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const KServeRequest& request = generation->request;
    const ServingContext* serving = hub_->serving();
    ChoiceGroup& choices = *generation->choices;
    std::vector<SessionOutput> outs(choices.size());
    bool any_output = false;
    bool any_tokens = false;
    for (int32_t i = 0; i < choices.size(); ++i) {
      choices.Take(i, request.answer.stream ? &outs[i] : &generation->whole[i]);
      any_output = any_output || !outs[i].empty();
      any_tokens = any_tokens || !outs[i].token_ids.empty();
    }
    const SessionEnd* failure = choices.failure();
    // The request ends when every choice has, or at the first failure.
    const bool end = choices.all_ended() || failure != nullptr;
    if (client_gone_ || (!end && !any_output)) {
      if (end) generation->finished = true;
      PopReadyLocked();
      return false;
    }
    message->Clear();
    ModelInferResponse* response = message->mutable_infer_response();
    if (failure != nullptr && any_tokens) {
      // The tokens before the error first; the error at the next write.
      StartResponse(request, serving, response);
      AddOutputs(request, outs, response);
      SetParameter(response, kFinalFlag, false);
      return true;
    }
    PopReadyLocked();
    if (failure != nullptr) {
      generation->finished = true;
      *message =
          ErrorMessage(request.answer.id, serving, KServeFieldNames(failure->status, request));
      return true;
    }
    if (!request.answer.stream) {
      generation->finished = true;
      FillWhole(request, serving, generation->whole, choices, response);
      SetParameter(response, kFinalFlag, true);
      return true;
    }
    StartResponse(request, serving, response);
    AddOutputs(request, outs, response);
    if (end) {
      generation->finished = true;
      SetEndParameters(choices, response);
    }
    SetParameter(response, kFinalFlag, end);
    return true;
  }

  void PopReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ready_.front()->queued = false;
    ready_.pop_front();
  }

  std::shared_ptr<Generation> RemoveLocked(Generation* generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = active_.begin(); it != active_.end(); ++it) {
      if (it->get() == generation) {
        std::shared_ptr<Generation> removed = std::move(*it);
        active_.erase(it);
        return removed;
      }
    }
    return nullptr;
  }

  GenerationHub* const hub_;
  grpc::CallbackServerContext* const context_;
  const absl::Time deadline_;
  const CallOrigin origin_;    // the call's API key and peer, for each of its requests
  grpc::ByteBuffer incoming_;  // the read in flight (touched only by OnReadDone)
  // The message of the write in flight and its bytes (touched only by whoever set writing_).
  ModelStreamInferResponse writing_message_;
  grpc::ByteBuffer writing_bytes_;

  absl::Mutex mu_;
  std::vector<std::shared_ptr<Generation>> active_ ABSL_GUARDED_BY(mu_);
  // Generations whose last message is built, until their sessions are detached.
  std::vector<std::shared_ptr<Generation>> ended_ ABSL_GUARDED_BY(mu_);
  // Generations woken and not looked at since, first woken first.
  std::deque<Generation*> ready_ ABSL_GUARDED_BY(mu_);
  // Messages of requests refused before they had a session.
  std::deque<ModelStreamInferResponse> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelling_ ABSL_GUARDED_BY(mu_) = false;  // TryCancel called for a slow client
};

KServeService::KServeService(GenerationHub* hub, std::string version)
    : hub_(hub), version_(std::move(version)) {}

absl::Status KServeService::CheckCaller(const grpc::CallbackServerContext& context) const {
  return hub_->Authenticate(GrpcAuthorization(context)).status();
}

absl::StatusOr<const ServingContext*> KServeService::FindModel(const std::string& name,
                                                               const std::string& version) const {
  const ServingContext* serving = hub_->serving();
  if (serving == nullptr) return absl::UnavailableError("the model is loading; retry shortly");
  if (!name.empty() && name != serving->limits.model_name) {
    return absl::InvalidArgumentError(absl::StrCat("name: unknown model '", name.substr(0, 64),
                                                   "'; this server serves '",
                                                   serving->limits.model_name, "'"));
  }
  if (!version.empty() && version != kKServeModelVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("version: unknown version '", version.substr(0, 32),
                     "'; the model has version ", kKServeModelVersion));
  }
  return serving;
}

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest* /*request*/,
                                                    inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Answered(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerReady(
    grpc::CallbackServerContext* context, const inference::ServerReadyRequest* /*request*/,
    inference::ServerReadyResponse* response) {
  response->set_ready(hub_->Admission().ok());
  return Answered(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  response->set_ready(hub_->Admission().ok() &&
                      FindModel(request->name(), request->version()).ok());
  return Answered(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest* /*request*/,
    inference::ServerMetadataResponse* response) {
  if (absl::Status caller = CheckCaller(*context); !caller.ok()) return Answered(context, caller);
  response->set_name("convoy");
  response->set_version(version_);
  response->add_extensions("model_configuration");
  response->add_extensions("parameters");
  return Answered(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  if (absl::Status caller = CheckCaller(*context); !caller.ok()) return Answered(context, caller);
  absl::StatusOr<const ServingContext*> serving = FindModel(request->name(), request->version());
  if (serving.ok()) {
    response->set_name((*serving)->limits.model_name);
    response->add_versions(std::string(kKServeModelVersion));
    response->set_platform("convoy");
    AddKServeTensorMetadata(response);
  }
  return Answered(context, serving.status());
}

grpc::ServerUnaryReactor* KServeService::ModelConfig(grpc::CallbackServerContext* context,
                                                     const inference::ModelConfigRequest* request,
                                                     inference::ModelConfigResponse* response) {
  if (absl::Status caller = CheckCaller(*context); !caller.ok()) return Answered(context, caller);
  absl::StatusOr<const ServingContext*> serving = FindModel(request->name(), request->version());
  if (serving.ok()) {
    inference::ModelConfig* config = response->mutable_config();
    config->set_name((*serving)->limits.model_name);
    config->set_platform("convoy");
    config->set_backend("convoy");
    // convoy batches requests itself; each request holds one prompt.
    config->set_max_batch_size(0);
    AddKServeTensorConfig(config);
    config->mutable_model_transaction_policy()->set_decoupled(true);
  }
  return Answered(context, serving.status());
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  if (absl::Status caller = CheckCaller(*context); !caller.ok()) return Answered(context, caller);
  ModelInferRequest parsed;
  if (absl::Status status = ParseRequestBytes(*request, &parsed); !status.ok()) {
    hub_->CountRefusal(RejectReason::kInvalidArgument);
    return Answered(context, status);
  }
  return new UnaryCall(this, context, parsed, response);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KServeService::ModelStreamInfer(
    grpc::CallbackServerContext* context) {
  return new StreamCall(this, context);
}

}  // namespace convoy
