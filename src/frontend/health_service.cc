#include "frontend/health_service.h"

#include <algorithm>
#include <utility>

namespace convoy {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call. Writes the newest status whenever it differs from the last one written; never
// calls into gRPC while holding its own mutex (a reaction may run inline in the calling thread).
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name, ServingStatus status)
      : service_(service), name_(std::move(name)) {
    Update(status, /*end=*/false);
  }

  const std::string& name() const { return name_; }

  // Writes `status` when it is new; with `end`, finishes the call after the write.
  void Update(ServingStatus status, bool end) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      latest_ = status;
      end_ |= end;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) GiveUp();
    }
    Pump();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      GiveUp();
    }
    Pump();
  }

  void OnDone() override {
    service_->Remove(this);
    delete this;
  }

 private:
  // The client is gone: no more writes, finish as cancelled.
  void GiveUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    latest_ = written_;
    end_ = true;
    cancelled_ = true;
  }

  // Starts the next write, or the finish, when no write is in flight.
  void Pump() {
    enum class Action { kNone, kWrite, kFinish } action = Action::kNone;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      if (latest_ != written_) {
        writing_ = true;
        written_ = latest_;
        message_.set_status(latest_);
        action = Action::kWrite;
      } else if (end_) {
        finished_ = true;
        status = cancelled_ ? grpc::Status::CANCELLED : grpc::Status::OK;
        action = Action::kFinish;
      }
    }
    if (action == Action::kWrite) StartWrite(&message_);
    if (action == Action::kFinish) Finish(status);
  }

  HealthService* const service_;
  const std::string name_;
  absl::Mutex mu_;
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  ServingStatus written_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool end_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  HealthCheckResponse message_;  // owned by the write in flight
};

HealthService::HealthService(std::vector<std::string> services) : services_(std::move(services)) {}

HealthService::ServingStatus HealthService::StatusOf(const std::string& service) const {
  if (!service.empty() &&
      std::find(services_.begin(), services_.end(), service) == services_.end()) {
    return HealthCheckResponse::SERVICE_UNKNOWN;
  }
  return serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetServing(bool serving, std::string reason) {
  absl::MutexLock lock(&mu_);
  if (!serving) not_serving_reason_ = reason.empty() ? "not serving" : std::move(reason);
  if (serving_ == serving) return;
  serving_ = serving;
  // Watchers of unknown services stay SERVICE_UNKNOWN: Update writes only what is new.
  for (Watcher* watcher : watchers_) watcher->Update(StatusOf(watcher->name()), ending_);
}

bool HealthService::serving() const {
  absl::MutexLock lock(&mu_);
  return serving_;
}

HealthService::Readiness HealthService::readiness() const {
  absl::MutexLock lock(&mu_);
  return {serving_, serving_ ? "" : not_serving_reason_};
}

void HealthService::EndWatches() {
  absl::MutexLock lock(&mu_);
  ending_ = true;
  for (Watcher* watcher : watchers_) watcher->Update(StatusOf(watcher->name()), true);
}

void HealthService::Remove(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusOf(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const HealthCheckRequest* request) {
  absl::MutexLock lock(&mu_);
  auto* watcher = new Watcher(this, request->service(), StatusOf(request->service()));
  watchers_.insert(watcher);
  if (ending_) watcher->Update(StatusOf(request->service()), /*end=*/true);
  return watcher;
}

}  // namespace convoy
