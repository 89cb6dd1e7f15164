// The request path every protocol shares: convoy's gRPC API, the OpenAI HTTP API and KServe v2 turn
// their messages into a v1::InferRequest, start a GenerationSession with it and turn what the
// session hands out (tokens, their text, the end) into their own messages. Validation, admission,
// deadlines, detokenization, stop strings, cancellation, metrics and the request's log line live
// here, once.
//
// GenerationHub is the front end's state: whether requests are taken (loading, serving, draining),
// the serving context, the sessions open and the requests the engine holds. It also owns the
// thread that runs the sessions: the engine loop's thread only queues each event for it, so that
// nothing a protocol does with its output (text, stop strings, JSON or protobuf messages, writes,
// metrics, the log line) can hold up a step.
//
// A session's life: Create, Begin (validates and submits; a refusal ends the session at once), then
// the engine's events fill its output, and the protocol adapter, woken through the callback it
// gave, Takes what is new until Take returns the end. Exactly one end per session: the engine's
// final event, a stop string, the deadline, the client going away (ClientGone), or the server
// giving up on it after the drain timeout.
#ifndef CONVOY_FRONTEND_GENERATION_H_
#define CONVOY_FRONTEND_GENERATION_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "convoy/v1/inference.pb.h"
#include "engine/engine_loop.h"
#include "frontend/api_keys.h"
#include "frontend/request_validation.h"
#include "metrics/metrics.h"
#include "metrics/request_trace.h"
#include "text/detokenizer.h"

namespace convoy {

// What the front end serves, known once the model is loaded.
struct ServingContext {
  // Must outlive every session: destroy it only after every server has shut down.
  RequestEngine* engine = nullptr;
  ServingLimits limits;
  v1::ModelInfo model_info;
  std::string executor_name;  // "cpu" or "cuda"
  // Counts refusals and finished requests; null for none. Must outlive every session.
  Metrics* metrics = nullptr;
  // Gets a line per finished request (--request-trace); null for none. Must outlive every
  // session.
  RequestTrace* request_trace = nullptr;
  int32_t kv_block_size = 0;
  std::string kv_dtype;  // "f32", "bf16", "int8", ...
};

class GenerationSession;

// Who sent a call, as its protocol tells: the API key it presents and the peer's IP address.
struct CallOrigin {
  std::string authorization;  // the Authorization value ("Bearer KEY"); empty for none
  std::string address;        // the peer's IP address, without the port
};

// The config in force and its reloads, as convoy info shows them.
struct ConfigStatus {
  std::string text;  // protobuf text, API keys redacted
  std::string hash;
  int64_t reloads_applied = 0;
  int64_t reloads_refused = 0;
  std::string last_reload;  // "applied", "refused: WHY"; empty before the first
};

// Thread-safe.
class GenerationHub {
 public:
  // Starts the dispatcher thread.
  GenerationHub();
  // Runs the events still queued, then ends the dispatcher thread. REQUIRES: the engine loop has
  // shut down (no more events come).
  ~GenerationHub();
  GenerationHub(const GenerationHub&) = delete;
  GenerationHub& operator=(const GenerationHub&) = delete;

  // Starts serving. Called once.
  void Start(ServingContext context);
  // Replaces the serving context's limits with `update`'s changes (a live reload). Sessions that
  // began before keep the limits they were checked against. REQUIRES: Start was called.
  void UpdateLimits(const std::function<void(ServingLimits*)>& update);

  // The API keys every protocol checks (none until set: every caller is let in).
  void SetApiKeys(std::shared_ptr<const ApiKeys> keys);
  // The caller presenting `authorization` ("Bearer KEY"; empty for none), or UNAUTHENTICATED.
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization) const;

  void SetConfigStatus(ConfigStatus status);
  ConfigStatus config_status() const;
  // New sessions are refused (UNAVAILABLE) from now on; admitted ones go on. Idempotent.
  void StopAccepting();
  // Ends every session whose request the engine still holds, with UNAVAILABLE.
  void AbortAll();
  // Waits until no session is open, at most `timeout`; true when none is.
  bool WaitForNoSessions(absl::Duration timeout);
  int64_t open_sessions() const;
  // The requests `client` ("address IP" or "API key 'NAME'") has in flight, as
  // request_limits.max_in_flight_per_client counts them.
  int64_t client_in_flight(const std::string& client) const;

  // Null until Start.
  const ServingContext* serving() const { return serving_.load(std::memory_order_acquire); }
  bool accepting() const { return !stopped_.load(std::memory_order_acquire); }
  absl::Time start_time() const { return start_time_; }
  // OK when requests are taken now; UNAVAILABLE (loading, shutting down) otherwise.
  absl::Status Admission() const;
  // Requests refused at admission, by reason: the front end's refusals (bad requests, before the
  // engine saw them) and the scheduler's (a full queue, ...) together, as
  // convoy_requests_rejected_total counts them. GetServerInfo reports these.
  std::array<int64_t, kNumRejectReasons> rejections() const;
  // Accepted requests by how they ended, as their clients saw it (a request ended at a stop
  // string is complete, one ended at its deadline timed out), as convoy_requests_total counts
  // them; kRejected stays 0 (rejections() counts those). GetServerInfo reports these.
  std::array<int64_t, kNumOutcomes> outcomes() const;
  // Counts a refused request in rejections() and convoy_requests_rejected_total: one refused before
  // it became a session (a message that does not parse), or at a session's door; with the time it
  // took from arrival when known (convoy_request_refusal_seconds).
  void CountRefusal(RejectReason reason,
                    std::optional<absl::Duration> time_to_refusal = std::nullopt);
  // The same for a refusal known by its status: RESOURCE_EXHAUSTED counts as kQueueFull,
  // INVALID_ARGUMENT as kInvalidArgument; any other (loading, draining, no key) is not a refusal
  // of the request itself and counts nothing.
  void CountRefusal(const absl::Status& status,
                    std::optional<absl::Duration> time_to_refusal = std::nullopt);

 private:
  friend class GenerationSession;
  void SessionOpened();
  void SessionClosed();
  RequestId NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  void EngineHolds(RequestId id, std::shared_ptr<GenerationSession> session);
  // Counts one more request in flight for `client`; RESOURCE_EXHAUSTED, naming the config field,
  // when it has `limit` already (0: no limit). Release once for each success.
  absl::Status AcquireClientSlot(const std::string& client, int32_t limit);
  void ReleaseClientSlot(const std::string& client);
  void EngineReleased(RequestId id);
  // On the dispatcher thread, every ScanInterval: ends the sessions whose output has waited
  // untaken for longer than the serving limits' slow_client_timeout (their clients stopped
  // reading), cancelling their requests in the engine.
  void EndSlowClients(absl::Time now);
  absl::Duration ScanInterval() const;
  // On the engine loop's thread: queues `event` for `session`, in order.
  void Post(std::shared_ptr<GenerationSession> session, const Event& event);
  // The dispatcher thread: runs the queued events in the order they came.
  void Dispatch();

  struct Queued {
    std::shared_ptr<GenerationSession> session;
    Event event;
  };
  absl::Mutex queue_mu_;
  std::vector<Queued> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread dispatcher_;

  const absl::Time start_time_;
  std::atomic<const ServingContext*> serving_{nullptr};
  std::atomic<bool> stopped_{false};
  std::atomic<RequestId> next_id_{1};
  // The front end's own refusals, by RejectReason (the scheduler counts its own).
  std::array<std::atomic<int64_t>, kNumRejectReasons> refusals_{};
  std::array<std::atomic<int64_t>, kNumOutcomes> outcomes_{};

  mutable absl::Mutex mu_;
  int64_t open_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  // Sessions whose requests the engine holds (it has not sent their final event yet).
  absl::flat_hash_map<RequestId, std::weak_ptr<GenerationSession>> in_engine_ ABSL_GUARDED_BY(mu_);
  // Every context Start and UpdateLimits made, the last one in force: a session may still read
  // an earlier one, so none goes before the hub (reloads are few).
  std::vector<std::unique_ptr<const ServingContext>> contexts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> in_flight_by_client_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const ApiKeys> api_keys_ ABSL_GUARDED_BY(mu_);
  ConfigStatus config_status_ ABSL_GUARDED_BY(mu_);
};

// New output of a session since the last Take.
struct SessionOutput {
  // Index of token_ids[0] in the whole output.
  int64_t first_token_index = 0;
  std::vector<int32_t> token_ids;
  // One per token when the request asked for logprobs; one list per token when it asked for
  // top_logprobs.
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  // The text these tokens complete (never half a character; held back near a possible stop
  // string). Text may come without tokens: what was held back, at the end.
  std::string text;
  // With the first tokens of a request that asked for its prompt's logprobs
  // (return_prompt_logprobs): the prompt's ids, each one's logprob (entry 0: NaN, nothing comes
  // before it) and alternatives when top_logprobs was asked for.
  std::vector<int32_t> prompt_token_ids;
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs;

  bool empty() const { return token_ids.empty() && text.empty() && prompt_logprobs.empty(); }
};

// How a session ended.
struct SessionEnd {
  // OK when generation finished (length or stop); otherwise why it did not, in the shared codes.
  absl::Status status;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  // The stop string that ended it, when one did.
  std::string stop_string;
  int32_t prompt_tokens = 0;
  // Of prompt_tokens, those whose KV came from the prefix cache (not computed for this request).
  int32_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
  v1::Timings timings;
  // The prompt's ids, when the request asked for them (return_prompt_token_ids).
  std::vector<int32_t> prompt_token_ids;
  // The seed of the request's random draws (its own, or the one drawn for it); 0 when it was
  // refused before one was set.
  uint64_t seed = 0;
};

class GenerationSession : public std::enable_shared_from_this<GenerationSession> {
 public:
  // Called whenever there is something new to Take (output or the end), from any thread (the
  // hub's dispatcher, or inline in Begin or ClientGone), never with the session's lock held. Must
  // not block. It may end sessions (ClientGone), its own included: the wake-ups that causes run
  // on the same thread once it has returned, never inside it.
  using WakeFn = std::function<void()>;

  static std::shared_ptr<GenerationSession> Create(GenerationHub* hub, WakeFn wake);
  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

  // Checks the caller's API key (`authorization`: "Bearer KEY", empty for none; UNAUTHENTICATED
  // when the server asks for keys and this is none of them) and the priority it may claim,
  // validates `request` and submits it to the engine. `call_deadline`: the protocol's own
  // deadline (InfiniteFuture() for none); the earlier of it and the request's
  // timeout_microseconds applies. A refusal ends the session at once (Take returns the end; wake
  // is called). Called once. After ClientGone (before or during Begin) the request never runs.
  void Begin(const v1::InferRequest& request, absl::Time call_deadline, const CallOrigin& origin);

  // Moves the output not taken yet into `*out` (appending to what it holds). Returns the end once
  // every output before it has been taken; nullopt while generation goes on. A front end that
  // cannot pass output on (its client does not read) stops taking: after the serving limits'
  // slow_client_timeout with output waiting, the hub ends the session (RESOURCE_EXHAUSTED,
  // slow_client() true), cancels its request and drops the output; the front end then ends the
  // call without waiting for its stuck write.
  std::optional<SessionEnd> Take(SessionOutput* out);
  // Whether the session was ended because its output waited untaken too long.
  bool slow_client() const { return slow_client_.load(std::memory_order_acquire); }

  // The client cancelled or went away (or its protocol's deadline passed): ends the session,
  // cancels the request in the engine (freeing its KV blocks) and drops output not taken yet.
  // Any time from Create on, from any thread, also while Begin runs.
  void ClientGone();

  // After Detach returns, wake is never called again and no call of it is in progress. The adapter
  // calls it before it goes away; never while holding a lock its wake takes.
  void Detach();

  // The server's id of the request; 0 until Begin has submitted it.
  RequestId id() const { return id_; }

 private:
  GenerationSession(GenerationHub* hub, WakeFn wake);

  absl::Status Submit(const v1::InferRequest& request, absl::Time call_deadline,
                      const CallOrigin& origin);
  // CANCELLED once the session has ended (the client went away) before its request was submitted.
  absl::Status GoneBeforeSubmit();
  void OnEngineEvent(const Event& event);
  void OnToken(const Event& event);
  // Ends the session when output has waited untaken since before now - timeout. True if it did.
  bool EndIfSlowClient(absl::Time now, absl::Duration timeout);
  // How End treats the output not taken yet.
  enum class Drop {
    kNone,        // kept for the front end to take
    kClientGone,  // dropped: nobody will read it
    kSlowClient,  // dropped, and slow_client() becomes true (before anyone is woken)
  };
  // The first call ends the session and returns true; later calls return false, and drop the
  // output only with kClientGone.
  bool End(absl::Status status, v1::FinishReason reason, bool cancel_in_engine,
           Drop drop = Drop::kNone);
  // Abort from the hub (drain timeout).
  void Abort();
  friend class GenerationHub;
  // Moves the held text that no stop string can claim into the output (all of it `at_end`). On a
  // match, moves the text before it, drops the rest, sets stop_matched_ and returns true.
  bool ReleaseTextLocked(bool at_end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountRefusal(const absl::Status& status);
  void ReportDone(const Event& event, Outcome outcome, const absl::Status& status);

  // Calls wake_ (under wake_mu_, so that Detach waits for a call in progress). Called inside a
  // wake-up on this thread, it queues the call for when the outermost one has returned.
  void Wake();
  void WakeNow();

  GenerationHub* const hub_;
  absl::Mutex wake_mu_;
  WakeFn wake_ ABSL_GUARDED_BY(wake_mu_);
  const absl::Time arrival_;
  // Set by Begin (under mu_) before the engine sees the request; constant after.
  RequestId id_ = 0;
  // Set by Begin before the engine sees the request; constant after.
  bool return_logprobs_ = false;
  bool top_logprobs_ = false;
  // return_prompt_logprobs: the prompt's ids, handed out with its scores.
  std::vector<int32_t> scored_prompt_;
  int32_t priority_ = 0;
  // Written under mu_, because End reads them under mu_ from any thread, also while Begin runs;
  // read without it where Begin has returned or the engine has the request.
  int32_t prompt_tokens_ = 0;
  uint64_t seed_ = 0;
  std::string client_request_id_;
  std::vector<std::string> stop_strings_;
  std::atomic<bool> slow_client_{false};
  // Set when Submit refuses for a reason its status code does not tell (the client's limit).
  std::optional<RejectReason> refused_as_;

  absl::Mutex mu_;
  // Once ended_, Submit hands nothing to the engine; the first End releases the client's slot and
  // cancels the request in the engine (after the engine's Submit has returned, when it ends
  // during that call). So a client gone at any moment leaves neither a request nor a slot behind.
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The client whose in-flight count this request holds (released once, when the session ends).
  std::optional<std::string> client_slot_ ABSL_GUARDED_BY(mu_);
  // While Submit is in the engine's Submit; cancel_after_submit_ when the session ended meanwhile.
  bool submitting_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_after_submit_ ABSL_GUARDED_BY(mu_) = false;
  // Set with ended_, handed out by Take once the output before it is taken.
  SessionEnd end_ ABSL_GUARDED_BY(mu_);
  SessionOutput pending_ ABSL_GUARDED_BY(mu_);
  // When output first waited in pending_ since the last Take; InfiniteFuture() while none waits.
  absl::Time pending_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t num_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> first_token_ ABSL_GUARDED_BY(mu_);
  absl::Duration queue_time_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int64_t cached_prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  // Text decoded but held back: it may be the start of a stop string.
  std::string held_text_ ABSL_GUARDED_BY(mu_);
  // The stop string found in the text; later tokens are dropped, and the session ends (STOP) at
  // the engine's final event for the request it cancelled.
  std::string stop_matched_ ABSL_GUARDED_BY(mu_);
  // Turns the generated tokens into text, when the model has a tokenizer.
  std::unique_ptr<IncrementalDetokenizer> detokenizer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#endif  // CONVOY_FRONTEND_GENERATION_H_
