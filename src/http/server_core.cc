#include "http/server_core.h"

namespace convoy::http_internal {

ServerCore::ServerCore(const HttpServerOptions& options, HttpRouter router,
                       std::unique_ptr<boost::asio::ssl::context> tls)
    : options_(options),
      router_(std::move(router)),
      tls_(std::move(tls)),
      io_(options.io_threads),
      work_(std::make_unique<
            boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          io_.get_executor())) {}

bool ServerCore::Register(const std::shared_ptr<Connection>& connection) {
  absl::MutexLock lock(&connections_mu_);
  if (stopping() || static_cast<int>(connections_.size()) >= options_.max_connections) {
    return false;
  }
  connections_.emplace(connection.get(), connection);
  return true;
}

void ServerCore::Unregister(const Connection* connection) {
  absl::MutexLock lock(&connections_mu_);
  connections_.erase(connection);
}

int ServerCore::open_connections() const {
  absl::MutexLock lock(&connections_mu_);
  return static_cast<int>(connections_.size());
}

std::vector<std::shared_ptr<Connection>> ServerCore::BeginStop() {
  {
    absl::MutexLock lock(&connections_mu_);
    stopping_.store(true, std::memory_order_release);
  }
  return Connections();
}

std::vector<std::shared_ptr<Connection>> ServerCore::Connections() const {
  absl::MutexLock lock(&connections_mu_);
  std::vector<std::shared_ptr<Connection>> open;
  for (const auto& [key, weak] : connections_) {
    if (std::shared_ptr<Connection> connection = weak.lock()) open.push_back(std::move(connection));
  }
  return open;
}

bool ServerCore::AwaitNoConnections(absl::Duration timeout) {
  absl::MutexLock lock(&connections_mu_);
  auto none = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(connections_mu_) { return connections_.empty(); };
  return connections_mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

void ServerCore::CloseGate() {
  absl::MutexLock lock(&gate_mu_);
  gate_closed_ = true;
  work_.reset();
}

}  // namespace convoy::http_internal
