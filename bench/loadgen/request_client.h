// What the runner drives: a client that starts requests over one protocol, each measured into a
// RequestRecord, and keeps the set of those in flight so that they can be waited for or cancelled.
// One implementation per protocol: convoy's InferStream (client.h), KServe's ModelStreamInfer
// (kserve_client.h) and OpenAI's streamed /v1/completions (openai_client.h).
#ifndef CONVOY_BENCH_LOADGEN_REQUEST_CLIENT_H_
#define CONVOY_BENCH_LOADGEN_REQUEST_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/loadgen/request_source.h"
#include "bench/loadgen/stats.h"

namespace convoy::bench {

using SteadyClock = std::chrono::steady_clock;

enum class Protocol { kNative, kOpenAi, kKServe };

// "native", "openai", "kserve".
const char* ProtocolName(Protocol protocol);
// INVALID_ARGUMENT naming the choices for another name.
absl::StatusOr<Protocol> ParseProtocol(absl::string_view name);

// Turns message arrivals into a record's first token time and token gaps: a message carrying k
// tokens spreads its gap from the previous message evenly over the k (the first message's extra
// tokens get gaps of 0).
class TokenArrivals {
 public:
  // `n` tokens arrived at `now_s` (seconds since the client's origin); nothing for n <= 0.
  void Add(double now_s, int64_t n, RequestRecord* record);

 private:
  double last_message_s_ = 0;
};

// Thread-safe. Completion callbacks run on the client's own threads and must not block.
class RequestClient {
 public:
  // REQUIRES: no request in flight (WaitForIdle first).
  virtual ~RequestClient();
  RequestClient(const RequestClient&) = delete;
  RequestClient& operator=(const RequestClient&) = delete;

  // Starts one request without blocking; `done` receives its record once it ends, exactly once
  // (failures, cancellations and refusals included).
  virtual void Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) = 0;

  // Cancels every request in flight (each still reports through its `done`).
  void CancelAll();
  int64_t in_flight() const;
  // Blocks until no request is in flight or `deadline` passes; true when idle.
  bool WaitForIdle(absl::Time deadline);

  // Times in the records are seconds since the origin given at construction.
  double SecondsSinceOrigin() const;

 protected:
  // One request in flight: what every protocol's call shares (its record, the registry).
  class Call {
   public:
    virtual ~Call() = default;
    // Makes the call end soon; any thread, never blocks. The call still reports.
    virtual void Cancel() = 0;

   protected:
    Call(RequestClient* client, const PlannedRequest& planned,
         std::function<void(RequestRecord)> done);

    RequestRecord& record() { return record_; }
    // The request goes out now.
    void Sent();
    // `n` tokens arrived now, in one message (TokenArrivals).
    void TokensArrived(int64_t n);
    // Ends the record now, complete when `error` is empty, and hands it to `done`; then
    // unregisters the call, so that a caller who sees the client idle has every record. Once;
    // the call must not use its client afterwards.
    void Report(std::string error);

   private:
    friend class RequestClient;
    RequestClient* const client_;
    // Set by CancelAll: a call that then ends incomplete was cancelled by this client.
    bool cancel_asked_ = false;  // guarded by client_->mu_
    std::function<void(RequestRecord)> done_;
    RequestRecord record_;
    TokenArrivals arrivals_;
  };

  explicit RequestClient(SteadyClock::time_point origin);

  // A call is registered once built, before it starts; it unregisters itself when it reports
  // (Call::Report). CancelAll reaches only registered calls.
  void Register(Call* call);

 private:
  const SteadyClock::time_point origin_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<Call*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_REQUEST_CLIENT_H_
