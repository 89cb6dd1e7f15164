#include "http/http_server.h"

#include <pthread.h>

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "http/connection.h"
#include "http/listener.h"
#include "http/server_core.h"
#include "http/tls_context.h"

namespace convoy {
namespace {

absl::Status ValidateOptions(const HttpServerOptions& options) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (options.port < 0 || options.port > 65535) {
    return bad("HTTP port ", options.port, " is outside 0..65535 (0: any free port)");
  }
  if (options.io_threads < 1 || options.io_threads > 64) {
    return bad("HTTP io_threads ", options.io_threads, " is outside 1..64");
  }
  if (options.max_header_bytes < 256 || options.max_header_bytes > (1u << 30)) {
    return bad("HTTP max_header_bytes ", options.max_header_bytes, " is outside 256..2^30");
  }
  if (options.max_connections < 1) {
    return bad("HTTP max_connections ", options.max_connections, " is below 1");
  }
  for (const auto& [name, value] : {std::pair{"request_timeout", options.request_timeout},
                                    std::pair{"keep_alive_timeout", options.keep_alive_timeout},
                                    std::pair{"write_timeout", options.write_timeout}}) {
    if (value <= absl::ZeroDuration()) {
      return bad("HTTP ", name, " ", absl::FormatDuration(value), " is not positive");
    }
  }
  return absl::OkStatus();
}

void RunIoThread(http_internal::ServerCore* core) {
  while (true) {
    try {
      core->io().run();
      return;
    } catch (...) {
      // Handlers and callbacks are run under a catch; whatever else throws (an allocation) costs
      // the operation it happened in, not the thread.
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpRouter router) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (options.tls.has_value()) {
    absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> made =
        http_internal::MakeTlsContext(*options.tls);
    if (!made.ok()) return made.status();
    tls = *std::move(made);
  }
  auto core =
      std::make_shared<http_internal::ServerCore>(options, std::move(router), std::move(tls));
  absl::StatusOr<std::unique_ptr<http_internal::Listener>> listener =
      http_internal::Listener::Bind(core, options.listen_address, options.port);
  if (!listener.ok()) return listener.status();
  const int port = (*listener)->port();
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(core), *std::move(listener), port));
  server->listener_->Start();
  const std::string name = options.thread_name.substr(0, 8);
  for (int i = 0; i < options.io_threads; ++i) {
    server->threads_.emplace_back(RunIoThread, server->core_.get());
    // Linux keeps 15 characters of a thread's name.
    pthread_setname_np(server->threads_.back().native_handle(),
                       absl::StrCat(name, "-io", i).substr(0, 15).c_str());
  }
  return server;
}

HttpServer::HttpServer(std::shared_ptr<http_internal::ServerCore> core,
                       std::unique_ptr<http_internal::Listener> listener, int port)
    : core_(std::move(core)), listener_(std::move(listener)), port_(port) {}

HttpServer::~HttpServer() { Stop(absl::ZeroDuration()); }

int HttpServer::open_connections() const { return core_->open_connections(); }

void HttpServer::Stop(absl::Duration grace) {
  {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  std::vector<std::shared_ptr<http_internal::Connection>> open = core_->BeginStop();
  listener_->Close();
  for (const auto& connection : open) connection->Drain();
  open.clear();
  if (!core_->AwaitNoConnections(grace)) {
    for (const auto& connection : core_->Connections()) connection->Close();
  }
  // Whatever was posted before this runs before the threads end; nothing is posted after.
  core_->CloseGate();
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace convoy
