#include "bench/loadgen/request_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace convoy::bench {

const char* ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kNative:
      return "native";
    case Protocol::kOpenAi:
      return "openai";
    case Protocol::kKServe:
      return "kserve";
  }
  return "?";
}

absl::StatusOr<Protocol> ParseProtocol(absl::string_view name) {
  for (Protocol p : {Protocol::kNative, Protocol::kOpenAi, Protocol::kKServe}) {
    if (name == ProtocolName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--protocol must be native, openai or kserve, got '", name, "'"));
}

void TokenArrivals::Add(double now_s, int64_t n, RequestRecord* record) {
  if (n <= 0) return;
  if (record->first_token_s < 0) {
    record->first_token_s = now_s;
    for (int64_t i = 1; i < n; ++i) record->token_gaps_s.push_back(0);
  } else {
    const double gap = (now_s - last_message_s_) / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) record->token_gaps_s.push_back(gap);
  }
  last_message_s_ = now_s;
  record->output_tokens += n;
  ++record->output_messages;
}

RequestClient::RequestClient(SteadyClock::time_point origin) : origin_(origin) {}

RequestClient::~RequestClient() = default;

double RequestClient::SecondsSinceOrigin() const {
  return std::chrono::duration<double>(SteadyClock::now() - origin_).count();
}

void RequestClient::Register(Call* call) {
  absl::MutexLock lock(&mu_);
  calls_.insert(call);
}

RequestClient::Call::Call(RequestClient* client, const PlannedRequest& planned,
                          std::function<void(RequestRecord)> done)
    : client_(client), done_(std::move(done)) {
  record_.class_index = planned.class_index;
  record_.prompt_tokens = static_cast<int64_t>(planned.prompt_token_ids.size());
  record_.token_gaps_s.reserve(planned.max_tokens);
}

void RequestClient::Call::Sent() { record_.send_s = client_->SecondsSinceOrigin(); }

void RequestClient::Call::TokensArrived(int64_t n) {
  arrivals_.Add(client_->SecondsSinceOrigin(), n, &record_);
}

void RequestClient::Call::Report(std::string error) {
  record_.end_s = client_->SecondsSinceOrigin();
  record_.completed = error.empty();
  {
    absl::MutexLock lock(&client_->mu_);
    record_.cancelled_by_client = !record_.completed && cancel_asked_;
  }
  record_.error = std::move(error);
  done_(std::move(record_));
  absl::MutexLock lock(&client_->mu_);
  client_->calls_.erase(this);
}

void RequestClient::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (Call* call : calls_) {
    call->cancel_asked_ = true;
    call->Cancel();
  }
}

int64_t RequestClient::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(calls_.size());
}

bool RequestClient::WaitForIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace convoy::bench
