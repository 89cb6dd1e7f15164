#include "bench/loadgen/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"

namespace convoy::bench {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(timeout));
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<convoy::v1::ModelInfo> FetchModelInfo(grpc::Channel* channel,
                                                     absl::Duration timeout) {
  auto stub = convoy::v1::Inference::NewStub(
      std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  convoy::v1::ModelInfo info;
  RETURN_IF_ERROR(FromGrpc(stub->GetModelInfo(&context, convoy::v1::GetModelInfoRequest(), &info),
                           "GetModelInfo"));
  return info;
}

absl::StatusOr<convoy::v1::ServerInfo> FetchServerInfo(grpc::Channel* channel,
                                                       absl::Duration timeout) {
  auto stub = convoy::v1::Inference::NewStub(
      std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  convoy::v1::ServerInfo info;
  RETURN_IF_ERROR(FromGrpc(stub->GetServerInfo(&context, convoy::v1::GetServerInfoRequest(), &info),
                           "GetServerInfo"));
  return info;
}

absl::Status WaitUntilServing(grpc::Channel* channel, absl::Duration timeout,
                              const std::function<absl::Status()>& still_alive) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("no answer yet");
  while (absl::Now() < deadline) {
    if (still_alive) RETURN_IF_ERROR(still_alive());
    absl::StatusOr<convoy::v1::ServerInfo> info = FetchServerInfo(channel, absl::Seconds(2));
    if (info.ok() && info->state() == convoy::v1::ServerInfo::SERVING) return absl::OkStatus();
    last = info.ok() ? absl::UnavailableError(absl::StrCat(
                           "state ", convoy::v1::ServerInfo::State_Name(info->state())))
                     : info.status();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("the server was not SERVING after ",
                                                  absl::FormatDuration(timeout), " (",
                                                  last.message(), ")"));
}

// One InferStream call. Owns itself: deleted after it reports in OnDone.
class StreamClient::Call : public grpc::ClientReadReactor<convoy::v1::InferStreamResponse> {
 public:
  Call(StreamClient* client, const PlannedRequest& planned, std::function<void(RequestRecord)> done)
      : client_(client), done_(std::move(done)) {
    request_.mutable_prompt_token_ids()->Assign(planned.prompt_token_ids.begin(),
                                                planned.prompt_token_ids.end());
    request_.set_priority(planned.priority);
    request_.set_client_request_id(absl::StrCat("bench-", planned.index));
    convoy::v1::SamplingParameters* s = request_.mutable_sampling();
    s->set_max_tokens(planned.max_tokens);
    s->set_temperature(planned.temperature);
    s->set_seed(planned.sampling_seed);
    record_.class_index = planned.class_index;
    record_.prompt_tokens = static_cast<int64_t>(planned.prompt_token_ids.size());
    record_.token_gaps_s.reserve(planned.max_tokens);
  }

  void Go(convoy::v1::Inference::Stub* stub) {
    stub->async()->InferStream(&context_, &request_, this);
    record_.send_s = client_->SecondsSinceOrigin();
    StartRead(&response_);
    StartCall();
  }

  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    const double now = client_->SecondsSinceOrigin();
    const int n = response_.token_ids_size();
    if (n > 0) {
      if (record_.first_token_s < 0) {
        record_.first_token_s = now;
        for (int i = 1; i < n; ++i) record_.token_gaps_s.push_back(0);
      } else {
        const double gap = (now - last_message_s_) / n;
        for (int i = 0; i < n; ++i) record_.token_gaps_s.push_back(gap);
      }
      last_message_s_ = now;
      record_.output_tokens += n;
    }
    if (response_.finish_reason() != convoy::v1::FINISH_REASON_UNSPECIFIED) {
      finish_reason_ = response_.finish_reason();
      record_.server_queue_us = response_.timings().queue_microseconds();
      record_.server_ttft_us = response_.timings().time_to_first_token_microseconds();
      record_.server_total_us = response_.timings().total_microseconds();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    record_.end_s = client_->SecondsSinceOrigin();
    if (!status.ok()) {
      record_.error = absl::StrCat("grpc ", status.error_code(), ": ", status.error_message());
    } else if (finish_reason_ == convoy::v1::FINISH_REASON_LENGTH ||
               finish_reason_ == convoy::v1::FINISH_REASON_STOP) {
      record_.completed = true;
    } else {
      record_.error = convoy::v1::FinishReason_Name(finish_reason_);
    }
    // Report first, so that a caller who sees the client idle has every record.
    done_(std::move(record_));
    client_->Finished(this);
    delete this;
  }

 private:
  StreamClient* const client_;
  std::function<void(RequestRecord)> done_;
  grpc::ClientContext context_;
  convoy::v1::InferRequest request_;
  convoy::v1::InferStreamResponse response_;
  RequestRecord record_;
  double last_message_s_ = 0;
  convoy::v1::FinishReason finish_reason_ = convoy::v1::FINISH_REASON_UNSPECIFIED;
};

StreamClient::StreamClient(std::shared_ptr<grpc::Channel> channel, SteadyClock::time_point origin)
    : stub_(convoy::v1::Inference::NewStub(std::move(channel))), origin_(origin) {}

StreamClient::~StreamClient() = default;

double StreamClient::SecondsSinceOrigin() const {
  return std::chrono::duration<double>(SteadyClock::now() - origin_).count();
}

void StreamClient::Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) {
  Call* call = new Call(this, request, std::move(done));
  {
    absl::MutexLock lock(&mu_);
    calls_.insert(call);
  }
  call->Go(stub_.get());
}

void StreamClient::Finished(Call* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

void StreamClient::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (Call* call : calls_) call->Cancel();
}

int64_t StreamClient::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(calls_.size());
}

bool StreamClient::WaitForIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace convoy::bench
