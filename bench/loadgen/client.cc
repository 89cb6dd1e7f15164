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

void AddApiKey(const std::string& api_key, grpc::ClientContext& context) {
  if (!api_key.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", api_key));
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<convoy::v1::ModelInfo> FetchModelInfo(grpc::Channel* channel, absl::Duration timeout,
                                                     const std::string& api_key) {
  auto stub = convoy::v1::Inference::NewStub(
      std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  AddApiKey(api_key, context);
  convoy::v1::ModelInfo info;
  RETURN_IF_ERROR(FromGrpc(stub->GetModelInfo(&context, convoy::v1::GetModelInfoRequest(), &info),
                           "GetModelInfo"));
  return info;
}

absl::StatusOr<convoy::v1::ServerInfo> FetchServerInfo(grpc::Channel* channel,
                                                       absl::Duration timeout,
                                                       const std::string& api_key) {
  auto stub = convoy::v1::Inference::NewStub(
      std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  AddApiKey(api_key, context);
  convoy::v1::ServerInfo info;
  RETURN_IF_ERROR(FromGrpc(stub->GetServerInfo(&context, convoy::v1::GetServerInfoRequest(), &info),
                           "GetServerInfo"));
  return info;
}

absl::Status WaitUntilServing(grpc::Channel* channel, absl::Duration timeout,
                              const std::string& api_key,
                              const std::function<absl::Status()>& still_alive) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("no answer yet");
  while (absl::Now() < deadline) {
    if (still_alive) RETURN_IF_ERROR(still_alive());
    absl::StatusOr<convoy::v1::ServerInfo> info =
        FetchServerInfo(channel, absl::Seconds(2), api_key);
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
class StreamClient::Call final : public RequestClient::Call,
                                 public grpc::ClientReadReactor<convoy::v1::InferStreamResponse> {
 public:
  Call(StreamClient* client, const PlannedRequest& planned, std::function<void(RequestRecord)> done)
      : RequestClient::Call(client, planned, std::move(done)) {
    request_.mutable_prompt_token_ids()->Assign(planned.prompt_token_ids.begin(),
                                                planned.prompt_token_ids.end());
    request_.set_priority(planned.priority);
    request_.set_client_request_id(absl::StrCat("bench-", planned.index));
    convoy::v1::SamplingParameters* s = request_.mutable_sampling();
    s->set_max_tokens(planned.max_tokens);
    s->set_temperature(planned.temperature);
    s->set_seed(planned.sampling_seed);
  }

  void Go(convoy::v1::Inference::Stub* stub, const std::string& api_key) {
    AddApiKey(api_key, context_);
    stub->async()->InferStream(&context_, &request_, this);
    Sent();
    StartRead(&response_);
    StartCall();
  }

  void Cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    TokensArrived(response_.token_ids_size());
    if (response_.finish_reason() != convoy::v1::FINISH_REASON_UNSPECIFIED) {
      finish_reason_ = response_.finish_reason();
      record().server_queue_us = response_.timings().queue_microseconds();
      record().server_ttft_us = response_.timings().time_to_first_token_microseconds();
      record().server_total_us = response_.timings().total_microseconds();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    if (!status.ok()) {
      Report(absl::StrCat("grpc ", status.error_code(), ": ", status.error_message()));
    } else if (finish_reason_ == convoy::v1::FINISH_REASON_LENGTH ||
               finish_reason_ == convoy::v1::FINISH_REASON_STOP) {
      Report("");
    } else {
      Report(convoy::v1::FinishReason_Name(finish_reason_));
    }
    delete this;
  }

 private:
  grpc::ClientContext context_;
  convoy::v1::InferRequest request_;
  convoy::v1::InferStreamResponse response_;
  convoy::v1::FinishReason finish_reason_ = convoy::v1::FINISH_REASON_UNSPECIFIED;
};

StreamClient::StreamClient(std::shared_ptr<grpc::Channel> channel, std::string api_key,
                           SteadyClock::time_point origin)
    : RequestClient(origin),
      stub_(convoy::v1::Inference::NewStub(std::move(channel))),
      api_key_(std::move(api_key)) {}

void StreamClient::Start(const PlannedRequest& request, std::function<void(RequestRecord)> done) {
  Call* call = new Call(this, request, std::move(done));
  Register(call);
  call->Go(stub_.get(), api_key_);
}

}  // namespace convoy::bench
