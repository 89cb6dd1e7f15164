// Internal to the HTTP server: what its io threads, its listener and every connection share.
// Each connection (and so each exchange a handler holds) keeps the core, and with it the
// io_context its socket and timers belong to, alive; the server's Stop makes sure no handler is
// left queued in the io_context when its threads end, so the core is destroyed with nothing
// pending whichever thread drops it last.
#ifndef CONVOY_HTTP_SERVER_CORE_H_
#define CONVOY_HTTP_SERVER_CORE_H_

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/context.hpp"
#include "http/http_router.h"
#include "http/http_server.h"

namespace convoy::http_internal {

class Connection;

class ServerCore {
 public:
  // `tls` null: plain HTTP.
  ServerCore(const HttpServerOptions& options, HttpRouter router,
             std::unique_ptr<boost::asio::ssl::context> tls);

  boost::asio::io_context& io() { return io_; }
  const HttpServerOptions& options() const { return options_; }
  const HttpRouter& router() const { return router_; }
  // Null for plain HTTP.
  boost::asio::ssl::context* tls_context() const { return tls_.get(); }
  // Set once Stop begins: no new connection, no keep-alive after the current response.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // Posts `task` to `executor` unless the server has stopped, when it is dropped: what exchanges
  // post from other threads may come after the io threads have ended. Thread-safe.
  template <typename Executor, typename Task>
  void PostFromOutside(const Executor& executor, Task&& task) {
    absl::ReaderMutexLock lock(&gate_mu_);
    if (gate_closed_) return;
    boost::asio::post(executor, std::forward<Task>(task));
  }

  // Counts the connection as open. False (the caller drops it, which closes its socket) once
  // stopping, or when max_connections are open.
  bool Register(const std::shared_ptr<Connection>& connection);
  void Unregister(const Connection* connection);
  int open_connections() const;

  // Marks the core stopping; the connections open now.
  std::vector<std::shared_ptr<Connection>> BeginStop();
  std::vector<std::shared_ptr<Connection>> Connections() const;
  // Whether every connection closed within `timeout`.
  bool AwaitNoConnections(absl::Duration timeout);
  // From now on PostFromOutside drops its task; the io threads may run out of work and end.
  void CloseGate();

 private:
  const HttpServerOptions options_;
  const HttpRouter router_;
  const std::unique_ptr<boost::asio::ssl::context> tls_;
  boost::asio::io_context io_;
  std::atomic<bool> stopping_{false};

  absl::Mutex gate_mu_;
  bool gate_closed_ ABSL_GUARDED_BY(gate_mu_) = false;
  // Keeps run() going while connections come and go; released by CloseGate.
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_
      ABSL_GUARDED_BY(gate_mu_);

  mutable absl::Mutex connections_mu_;
  absl::flat_hash_map<const Connection*, std::weak_ptr<Connection>> connections_
      ABSL_GUARDED_BY(connections_mu_);
};

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_SERVER_CORE_H_
