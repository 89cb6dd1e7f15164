// A minimal HTTP/1.x endpoint that answers GET on one path with a text body produced on demand:
// the Prometheus exposition of /metrics. One thread, one connection at a time, each closed after
// its response; every read bounded by a timeout, so a stuck client cannot hold it for long.
//
// Why not civetweb (prometheus-cpp's Exposer): Debian builds it with 100 KiB thread stacks, and
// once cuBLAS is linked its static TLS alone is about that size, so civetweb cannot start threads
// in a CUDA-enabled convoyd.
#ifndef CONVOY_METRICS_HTTP_ENDPOINT_H_
#define CONVOY_METRICS_HTTP_ENDPOINT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace convoy {

class HttpEndpoint {
 public:
  // Listens on `address` (IPv4 or IPv6, brackets optional) and `port` (0: any free port).
  // UNAVAILABLE when the address cannot be bound. `body` runs on the endpoint's thread.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& address, int port,
                                                             std::string path,
                                                             std::function<std::string()> body);
  // Stops accepting and joins the thread (within about 100 ms).
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }

 private:
  HttpEndpoint(int fd, int port, std::string path, std::function<std::string()> body);
  void Serve();
  void Answer(int connection);

  const int listen_fd_;
  const int port_;
  const std::string path_;
  const std::function<std::string()> body_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace convoy

#endif  // CONVOY_METRICS_HTTP_ENDPOINT_H_
