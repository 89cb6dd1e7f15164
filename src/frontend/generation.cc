#include "frontend/generation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "frontend/status_mapping.h"
#include "metrics/logging.h"
#include "metrics/request_summary.h"
#include "spdlog/spdlog.h"

namespace convoy {
namespace {

uint64_t Micros(absl::Duration d) {
  return d <= absl::ZeroDuration() ? 0 : static_cast<uint64_t>(absl::ToInt64Microseconds(d));
}

}  // namespace

// --- GenerationHub

GenerationHub::GenerationHub() : start_time_(absl::Now()) {
  dispatcher_ = std::thread([this] { Dispatch(); });
}

GenerationHub::~GenerationHub() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  dispatcher_.join();
}

void GenerationHub::Post(std::shared_ptr<GenerationSession> session, const Event& event) {
  absl::MutexLock lock(&queue_mu_);
  queue_.push_back(Queued{std::move(session), event});
}

void GenerationHub::Dispatch() {
  std::vector<Queued> batch;
  absl::Time last_scan = absl::Now();
  while (true) {
    // Read each pass: the interval follows the serving limits, which arrive after the hub starts
    // (Start) and change on reload; a first scan fixed at construction came a second late.
    const absl::Time next_scan = last_scan + ScanInterval();
    {
      absl::MutexLock lock(&queue_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return !queue_.empty() || stopping_;
      };
      queue_mu_.AwaitWithDeadline(absl::Condition(&ready), next_scan);
      if (queue_.empty() && stopping_) return;  // everything has run
      batch.swap(queue_);
    }
    for (Queued& queued : batch) queued.session->OnEngineEvent(queued.event);
    batch.clear();  // the sessions' references go here, off the queue's lock
    // On this thread, as every engine event: a session's tokens and its end never race.
    if (const absl::Time now = absl::Now(); now >= next_scan) {
      EndSlowClients(now);
      last_scan = now;
    }
  }
}

absl::Duration GenerationHub::ScanInterval() const {
  const ServingContext* serving = this->serving();
  if (serving == nullptr || serving->limits.slow_client_timeout == absl::InfiniteDuration()) {
    return absl::Seconds(1);
  }
  return std::clamp(serving->limits.slow_client_timeout / 4, absl::Milliseconds(10),
                    absl::Seconds(1));
}

void GenerationHub::EndSlowClients(absl::Time now) {
  const ServingContext* serving = this->serving();
  if (serving == nullptr || serving->limits.slow_client_timeout == absl::InfiniteDuration()) return;
  std::vector<std::shared_ptr<GenerationSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, weak] : in_engine_) {
      if (std::shared_ptr<GenerationSession> session = weak.lock()) sessions.push_back(session);
    }
  }
  for (const std::shared_ptr<GenerationSession>& session : sessions) {
    if (!session->EndIfSlowClient(now, serving->limits.slow_client_timeout)) continue;
    if (serving->metrics != nullptr) serving->metrics->OnSlowClient();
  }
}

void GenerationHub::Start(ServingContext context) {
  absl::MutexLock lock(&mu_);
  contexts_.push_back(std::make_unique<const ServingContext>(std::move(context)));
  serving_.store(contexts_.back().get(), std::memory_order_release);
}

void GenerationHub::UpdateLimits(const std::function<void(ServingLimits*)>& update) {
  absl::MutexLock lock(&mu_);
  auto next = std::make_unique<ServingContext>(*contexts_.back());
  update(&next->limits);
  contexts_.push_back(std::move(next));
  serving_.store(contexts_.back().get(), std::memory_order_release);
}

void GenerationHub::SetApiKeys(std::shared_ptr<const ApiKeys> keys) {
  absl::MutexLock lock(&mu_);
  api_keys_ = std::move(keys);
}

absl::StatusOr<Caller> GenerationHub::Authenticate(absl::string_view authorization) const {
  std::shared_ptr<const ApiKeys> keys;
  {
    absl::MutexLock lock(&mu_);
    keys = api_keys_;
  }
  if (keys == nullptr) return Caller();
  return keys->Authenticate(authorization);
}

void GenerationHub::SetConfigStatus(ConfigStatus status) {
  absl::MutexLock lock(&mu_);
  config_status_ = std::move(status);
}

ConfigStatus GenerationHub::config_status() const {
  absl::MutexLock lock(&mu_);
  return config_status_;
}

void GenerationHub::StopAccepting() { stopped_.store(true, std::memory_order_release); }

void GenerationHub::AbortAll() {
  std::vector<std::shared_ptr<GenerationSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, weak] : in_engine_) {
      if (std::shared_ptr<GenerationSession> session = weak.lock()) sessions.push_back(session);
    }
  }
  for (const std::shared_ptr<GenerationSession>& session : sessions) session->Abort();
}

bool GenerationHub::WaitForNoSessions(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_sessions_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

int64_t GenerationHub::open_sessions() const {
  absl::MutexLock lock(&mu_);
  return open_sessions_;
}

int64_t GenerationHub::client_in_flight(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_by_client_.find(client);
  return it == in_flight_by_client_.end() ? 0 : it->second;
}

absl::Status GenerationHub::Admission() const {
  if (!accepting()) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (serving() == nullptr) return absl::UnavailableError("the model is loading; retry shortly");
  return absl::OkStatus();
}

std::array<int64_t, kNumRejectReasons> GenerationHub::rejections() const {
  std::array<int64_t, kNumRejectReasons> counts{};
  if (const ServingContext* serving_now = serving(); serving_now != nullptr) {
    counts = serving_now->engine->snapshot().stats.rejections;
  }
  for (int i = 0; i < kNumRejectReasons; ++i) {
    counts[i] += refusals_[i].load(std::memory_order_relaxed);
  }
  return counts;
}

std::array<int64_t, kNumOutcomes> GenerationHub::outcomes() const {
  std::array<int64_t, kNumOutcomes> counts{};
  for (int i = 0; i < kNumOutcomes; ++i) counts[i] = outcomes_[i].load(std::memory_order_acquire);
  return counts;
}

absl::Status GenerationHub::AcquireClientSlot(const std::string& client, int32_t limit) {
  absl::MutexLock lock(&mu_);
  int64_t& count = in_flight_by_client_[client];
  if (limit > 0 && count >= limit) {
    if (count == 0) in_flight_by_client_.erase(client);
    return WithExhaustedCause(
        absl::ResourceExhaustedError(
            absl::StrCat(client, " has ", count,
                         " requests in flight, the most one client may have "
                         "(request_limits.max_in_flight_per_client); retry when one has finished")),
        ExhaustedCause::kClientLimit);
  }
  ++count;
  return absl::OkStatus();
}

void GenerationHub::ReleaseClientSlot(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_by_client_.find(client);
  if (it == in_flight_by_client_.end()) return;
  if (--it->second <= 0) in_flight_by_client_.erase(it);
}

void GenerationHub::SessionOpened() {
  absl::MutexLock lock(&mu_);
  ++open_sessions_;
}

void GenerationHub::SessionClosed() {
  absl::MutexLock lock(&mu_);
  --open_sessions_;
}

void GenerationHub::EngineHolds(RequestId id, std::shared_ptr<GenerationSession> session) {
  absl::MutexLock lock(&mu_);
  in_engine_.emplace(id, std::move(session));
}

void GenerationHub::EngineReleased(RequestId id) {
  absl::MutexLock lock(&mu_);
  in_engine_.erase(id);
}

// --- GenerationSession

std::shared_ptr<GenerationSession> GenerationSession::Create(GenerationHub* hub, WakeFn wake) {
  return std::shared_ptr<GenerationSession>(new GenerationSession(hub, std::move(wake)));
}

GenerationSession::GenerationSession(GenerationHub* hub, WakeFn wake)
    : hub_(hub), wake_(std::move(wake)), arrival_(absl::Now()) {
  hub_->SessionOpened();
}

GenerationSession::~GenerationSession() { hub_->SessionClosed(); }

void GenerationSession::Begin(const v1::InferRequest& request, absl::Time call_deadline,
                              const CallOrigin& origin) {
  absl::Status status = Submit(request, call_deadline, origin);
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kUnavailable) {
    SPDLOG_DEBUG("refused a request: {}", status.ToString());
  }
  CountRefusal(status);
  End(std::move(status), v1::FINISH_REASON_ERROR, /*cancel_in_engine=*/false);
}

absl::Status GenerationSession::Submit(const v1::InferRequest& request, absl::Time call_deadline,
                                       const CallOrigin& origin) {
  // A client gone before its request was looked at costs nothing more (no tokenizing).
  RETURN_IF_ERROR(GoneBeforeSubmit());
  ASSIGN_OR_RETURN(const Caller caller, hub_->Authenticate(origin.authorization));
  RETURN_IF_ERROR(hub_->Admission());
  const ServingContext& serving = *hub_->serving();
  ASSIGN_OR_RETURN(PreparedRequest prepared, PrepareRequest(request, serving.limits));
  Request& engine_request = prepared.engine_request;
  RETURN_IF_ERROR(
      CapPriority(caller, serving.limits.default_priority_level, &engine_request.priority));
  const absl::Time deadline =
      RequestDeadline(call_deadline, request.timeout_microseconds(), arrival_);
  if (deadline <= arrival_) {
    return absl::DeadlineExceededError("the deadline had passed when the request arrived");
  }
  // The deadline bounds the wait in the queue too (the scheduler times it out there).
  if (deadline != absl::InfiniteFuture()) engine_request.timeout = deadline - arrival_;
  return_logprobs_ = request.return_logprobs();
  top_logprobs_ = request.top_logprobs() > 0;
  if (request.return_prompt_logprobs()) scored_prompt_ = engine_request.prompt_tokens;
  priority_ = engine_request.priority;
  client_request_id_ = request.client_request_id();
  stop_strings_ = std::move(prepared.stop_strings);
  {
    absl::MutexLock lock(&mu_);
    // End reads these two under mu_, from any thread, also while this runs (ClientGone).
    prompt_tokens_ = static_cast<int32_t>(engine_request.prompt_tokens.size());
    seed_ = engine_request.sampling.seed;
    if (request.return_prompt_token_ids()) end_.prompt_token_ids = engine_request.prompt_tokens;
    if (serving.limits.tokenizer != nullptr) {
      detokenizer_ = std::make_unique<IncrementalDetokenizer>(*serving.limits.tokenizer,
                                                              /*skip_special=*/true);
    }
  }
  // A client is its key when keys are asked for (one address may carry many clients: a proxy's).
  std::string client = caller.key_name.empty() ? absl::StrCat("address ", origin.address)
                                               : absl::StrCat("API key '", caller.key_name, "'");
  if (absl::Status slot = hub_->AcquireClientSlot(client, serving.limits.max_in_flight_per_client);
      !slot.ok()) {
    refused_as_ = RejectReason::kClientLimit;
    return slot;
  }
  engine_request.client = client;  // the scheduler's fair share is per client too
  RequestId id = 0;
  {
    // From here End releases the slot and cancels the request, whenever the client goes.
    absl::MutexLock lock(&mu_);
    if (!ended_) {
      deadline_ = deadline;
      client_slot_ = client;
      id = id_ = hub_->NextId();
      submitting_ = true;
    }
  }
  if (id == 0) {  // the client went away while the request was prepared
    hub_->ReleaseClientSlot(client);
    return GoneBeforeSubmit();
  }
  engine_request.id = id;

  std::shared_ptr<GenerationSession> self = shared_from_this();
  hub_->EngineHolds(id, self);
  // The engine's thread only queues the events; the hub's dispatcher runs them.
  absl::Status submitted = serving.engine->Submit(
      std::move(engine_request),
      [self = std::move(self)](const Event& event) { self->hub_->Post(self, event); });
  std::optional<std::string> slot;
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    submitting_ = false;
    if (!submitted.ok()) slot.swap(client_slot_);
    cancel = submitted.ok() && cancel_after_submit_;
  }
  if (!submitted.ok()) {
    hub_->EngineReleased(id);
    if (slot) hub_->ReleaseClientSlot(*slot);
  }
  // The session ended while the engine took the request: a cancel sent then could have come
  // before the request and been lost.
  if (cancel) serving.engine->Cancel(id);
  return submitted;
}

absl::Status GenerationSession::GoneBeforeSubmit() {
  absl::MutexLock lock(&mu_);
  if (!ended_) return absl::OkStatus();
  return absl::CancelledError("the client went away before its request was admitted");
}

// On the hub's dispatcher thread.
void GenerationSession::OnEngineEvent(const Event& event) {
  if (event.kind == Event::Kind::kToken) {
    OnToken(event);
    return;
  }
  bool stopped_by_string = false;
  // How the session ended before the engine's final event, if it did (the client went away, the
  // deadline passed, the server gave up at the drain timeout).
  std::optional<absl::Status> ended_as;
  {
    absl::MutexLock lock(&mu_);
    if (event.queue_time) queue_time_ = *event.queue_time;
    cached_prompt_tokens_ = event.cached_prompt_tokens;
    stopped_by_string = !stop_matched_.empty();
    if (ended_) ended_as = end_.status;
  }
  absl::Status status = event.status;
  Outcome outcome = event.outcome;
  switch (event.outcome) {
    case Outcome::kCompleteLength:
    case Outcome::kCompleteStop:
    case Outcome::kCancelled:
      // When the session ended first, the engine's end is a cancel, or, since this thread may run
      // behind the engine, the request's own end that came before the cancel did. Either way the
      // client saw the session's end, and that is what is counted.
      if (stopped_by_string) {
        // At its stop string: a complete answer.
        status = absl::OkStatus();
        outcome = Outcome::kCompleteStop;
      } else if (ended_as && absl::IsDeadlineExceeded(*ended_as)) {
        // When its deadline passed: counted as timed out.
        outcome = Outcome::kTimedOut;
        status = *ended_as;
      } else if (ended_as) {
        // The client went away, or the drain timeout passed.
        outcome = Outcome::kCancelled;
        status = *ended_as;
      } else if (event.outcome == Outcome::kCancelled) {
        // Only the front end cancels (it ends the session first), or a shutdown without drain.
        status = absl::UnavailableError("the server is shutting down");
      } else {
        status = absl::OkStatus();
      }
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
  ReportDone(event, outcome, status);
  End(std::move(status), ToFinishReason(outcome), /*cancel_in_engine=*/false);
  hub_->EngineReleased(id_);
}

void GenerationSession::OnToken(const Event& event) {
  bool past_deadline = false;
  bool stop_found = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || !stop_matched_.empty()) return;
    const absl::Time now = absl::Now();
    if (now >= deadline_) {
      past_deadline = true;
    } else {
      if (!first_token_) first_token_ = now;
      ++num_tokens_;
      if (pending_.token_ids.empty()) pending_.first_token_index = event.token_index;
      if (pending_since_ == absl::InfiniteFuture()) pending_since_ = now;
      pending_.token_ids.push_back(event.token);
      if (return_logprobs_) pending_.logprobs.push_back(event.logprob);
      if (top_logprobs_) pending_.top_logprobs.push_back(event.top_logprobs);
      if (!event.prompt_logprobs.empty()) {
        pending_.prompt_token_ids = scored_prompt_;
        pending_.prompt_logprobs = event.prompt_logprobs;
        if (top_logprobs_) pending_.prompt_top_logprobs = event.prompt_top_logprobs;
      }
      if (detokenizer_ != nullptr) {
        // An id the tokenizer does not know (an embedding row past its vocabulary) adds no text.
        absl::StatusOr<std::string> text = detokenizer_->Next(event.token);
        if (text.ok()) held_text_.append(*text);
        stop_found = ReleaseTextLocked(/*at_end=*/false);
      }
    }
  }
  if (past_deadline) {
    End(absl::DeadlineExceededError(
            absl::StrCat("the deadline passed while generating (request ", id_, ")")),
        v1::FINISH_REASON_TIMEOUT, /*cancel_in_engine=*/true);
    return;
  }
  // The answer ends at the stop string; the session ends when the engine confirms the cancel.
  if (stop_found) hub_->serving()->engine->Cancel(id_);
  Wake();
}

bool GenerationSession::ReleaseTextLocked(bool at_end) {
  if (stop_strings_.empty()) {
    pending_.text.append(held_text_);
    held_text_.clear();
    return false;
  }
  size_t first = std::string::npos;
  const std::string* found = nullptr;
  for (const std::string& stop : stop_strings_) {
    const size_t at = held_text_.find(stop);
    if (at < first) {
      first = at;
      found = &stop;
    }
  }
  if (found != nullptr) {
    pending_.text.append(held_text_, 0, first);
    held_text_.clear();
    stop_matched_ = *found;
    return true;
  }
  // Keep the longest tail that a stop string starts with: the next tokens may complete it.
  size_t keep = 0;
  if (!at_end) {
    for (const std::string& stop : stop_strings_) {
      for (size_t k = std::min(stop.size() - 1, held_text_.size()); k > keep; --k) {
        if (held_text_.compare(held_text_.size() - k, k, stop, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
  }
  pending_.text.append(held_text_, 0, held_text_.size() - keep);
  held_text_.erase(0, held_text_.size() - keep);
  return false;
}

std::optional<SessionEnd> GenerationSession::Take(SessionOutput* out) {
  absl::MutexLock lock(&mu_);
  if (!pending_.token_ids.empty()) {
    if (out->token_ids.empty()) out->first_token_index = pending_.first_token_index;
    out->token_ids.insert(out->token_ids.end(), pending_.token_ids.begin(),
                          pending_.token_ids.end());
    out->logprobs.insert(out->logprobs.end(), pending_.logprobs.begin(), pending_.logprobs.end());
    for (std::vector<TokenLogprob>& top : pending_.top_logprobs) {
      out->top_logprobs.push_back(std::move(top));
    }
  } else if (out->empty()) {
    out->first_token_index = num_tokens_;
  }
  out->text.append(pending_.text);
  if (!pending_.prompt_logprobs.empty()) {
    out->prompt_token_ids = std::move(pending_.prompt_token_ids);
    out->prompt_logprobs = std::move(pending_.prompt_logprobs);
    out->prompt_top_logprobs = std::move(pending_.prompt_top_logprobs);
  }
  pending_ = SessionOutput();
  pending_since_ = absl::InfiniteFuture();
  if (!ended_) return std::nullopt;
  return end_;
}

void GenerationSession::ClientGone() {
  bool deadline = false;
  {
    absl::MutexLock lock(&mu_);
    deadline = absl::Now() >= deadline_;
  }
  End(deadline ? absl::DeadlineExceededError("the deadline passed")
               : absl::CancelledError("the client cancelled the call"),
      deadline ? v1::FINISH_REASON_TIMEOUT : v1::FINISH_REASON_CANCELLED,
      /*cancel_in_engine=*/true, Drop::kClientGone);
}

bool GenerationSession::EndIfSlowClient(absl::Time now, absl::Duration timeout) {
  absl::Duration waited;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || pending_since_ == absl::InfiniteFuture()) return false;
    waited = now - pending_since_;
    if (waited < timeout) return false;
  }
  // The flag is set with the output dropped, under the session's lock: whoever sees it finds
  // nothing left to take.
  if (!End(
          WithExhaustedCause(
              absl::ResourceExhaustedError(absl::StrCat(
                  "the client read none of the output for ", absl::FormatDuration(waited),
                  " (frontend.slow_client_timeout_microseconds); request ", id_, " was cancelled")),
              ExhaustedCause::kSlowClient),
          v1::FINISH_REASON_CANCELLED, /*cancel_in_engine=*/true, Drop::kSlowClient)) {
    return false;  // it ended some other way meanwhile
  }
  spdlog::warn("request {}: its client left the output unread for {}; cancelled", id_,
               absl::FormatDuration(waited));
  return true;
}

void GenerationSession::Abort() {
  End(absl::UnavailableError(
          absl::StrCat("the server shut down before request ", id_, " finished (drain timeout)")),
      v1::FINISH_REASON_CANCELLED, /*cancel_in_engine=*/true);
}

void GenerationSession::Detach() {
  absl::MutexLock lock(&wake_mu_);
  wake_ = nullptr;
}

void GenerationSession::Wake() {
  // A wake-up may end sessions (a call whose choice failed ends its other choices, this one
  // among them), whose wake-ups would then run inside it: on this session, under the wake_mu_ it
  // holds (a lock not reentrant); on another, taking a second wake_mu_ in whatever order the
  // calls come. So wake-ups caused inside one wait on this thread until it has returned.
  thread_local std::vector<std::shared_ptr<GenerationSession>>* pending = nullptr;
  if (pending != nullptr) {
    pending->push_back(shared_from_this());
    return;
  }
  std::vector<std::shared_ptr<GenerationSession>> queue;
  pending = &queue;
  WakeNow();
  for (size_t i = 0; i < queue.size(); ++i) queue[i]->WakeNow();  // which may queue more
  pending = nullptr;
}

void GenerationSession::WakeNow() {
  absl::MutexLock lock(&wake_mu_);
  if (wake_) wake_();
}

bool GenerationSession::End(absl::Status status, v1::FinishReason reason, bool cancel_in_engine,
                            Drop drop) {
  const bool client_gone = drop != Drop::kNone;
  bool first = false;
  std::optional<std::string> slot;
  RequestId cancel_id = 0;
  {
    absl::MutexLock lock(&mu_);
    // A slow-client verdict that came after the session had ended some other way leaves the
    // output to its client.
    if (drop == Drop::kClientGone || (drop == Drop::kSlowClient && !ended_)) {
      pending_ = SessionOutput();
    }
    if (!ended_) {
      first = true;
      ended_ = true;
      if (drop == Drop::kSlowClient) slow_client_.store(true, std::memory_order_release);
      if (status.ok() && !client_gone) {
        if (detokenizer_ != nullptr) held_text_.append(detokenizer_->Flush());
        if (ReleaseTextLocked(/*at_end=*/true)) reason = v1::FINISH_REASON_STOP;
      }
      end_.status = std::move(status);
      end_.finish_reason = reason;
      end_.stop_string = stop_matched_;
      end_.prompt_tokens = prompt_tokens_;
      end_.cached_prompt_tokens = static_cast<int32_t>(cached_prompt_tokens_);
      end_.seed = seed_;
      end_.completion_tokens = num_tokens_;
      const absl::Time now = absl::Now();
      end_.timings.set_queue_microseconds(Micros(queue_time_));
      if (first_token_) {
        end_.timings.set_time_to_first_token_microseconds(Micros(*first_token_ - arrival_));
      }
      end_.timings.set_total_microseconds(Micros(now - arrival_));
      slot.swap(client_slot_);
      if (cancel_in_engine && id_ != 0) {
        // While Submit is in the engine's Submit, it sends the cancel once that has returned.
        if (submitting_) {
          cancel_after_submit_ = true;
        } else {
          cancel_id = id_;
        }
      }
    }
  }
  if (!first) return false;
  if (slot) hub_->ReleaseClientSlot(*slot);
  if (cancel_id != 0) hub_->serving()->engine->Cancel(cancel_id);
  Wake();
  return true;
}

void GenerationSession::CountRefusal(const absl::Status& status) {
  if (refused_as_) {
    hub_->CountRefusal(*refused_as_, absl::Now() - arrival_);
  } else {
    hub_->CountRefusal(status, absl::Now() - arrival_);
  }
}

void GenerationHub::CountRefusal(const absl::Status& status,
                                 std::optional<absl::Duration> time_to_refusal) {
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    CountRefusal(RejectReason::kQueueFull, time_to_refusal);
  } else if (status.code() == absl::StatusCode::kInvalidArgument) {
    CountRefusal(RejectReason::kInvalidArgument, time_to_refusal);
  }
}

void GenerationHub::CountRefusal(RejectReason reason,
                                 std::optional<absl::Duration> time_to_refusal) {
  refusals_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  const ServingContext* context = serving();
  if (context == nullptr || context->metrics == nullptr) return;
  context->metrics->OnRejected(reason);
  if (time_to_refusal) context->metrics->OnRefusalLatency(*time_to_refusal);
}

void GenerationSession::ReportDone(const Event& event, Outcome outcome,
                                   const absl::Status& status) {
  RequestSummary summary;
  summary.id = id_;
  summary.client_request_id = client_request_id_;
  summary.seed = seed_;
  summary.outcome = outcome;
  summary.arrival = arrival_;
  summary.priority = priority_;
  summary.prompt_tokens = prompt_tokens_;
  summary.cached_prompt_tokens = event.cached_prompt_tokens;
  summary.status = status;
  {
    absl::MutexLock lock(&mu_);
    summary.generated_tokens = num_tokens_;
    if (event.queue_time) summary.queue_time = queue_time_;
    if (first_token_) summary.time_to_first_token = *first_token_ - arrival_;
  }
  summary.e2e_latency = absl::Now() - arrival_;
  // /metrics first: whoever sees the request counted in GetServerInfo finds it there too.
  const ServingContext* serving = hub_->serving();
  if (serving->metrics != nullptr) serving->metrics->OnRequestDone(summary);
  if (serving->request_trace != nullptr) serving->request_trace->Record(summary);
  if (outcome != Outcome::kRejected) {
    hub_->outcomes_[static_cast<int>(outcome)].fetch_add(1, std::memory_order_release);
  }
  LogRequestDone(summary);
}

}  // namespace convoy
