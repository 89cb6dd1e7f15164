#include "metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

constexpr size_t kMaxRequestBytes = 8192;

absl::Status Unavailable(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& content_type,
                     const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& address, int port, std::string path, std::function<std::string()> body) {
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
  if (absl::StrContains(host, ':')) {
    family = AF_INET6;
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&storage);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("not an IPv6 address: '", address, "'"));
    }
    length = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&storage);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: '", address, "'"));
    }
    length = sizeof(sockaddr_in);
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    absl::Status status = Unavailable(absl::StrCat("cannot bind ", address, ":", port));
    ::close(fd);
    return status;
  }
  if (::listen(fd, 64) != 0) {
    absl::Status status = Unavailable("listen");
    ::close(fd);
    return status;
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  const int bound_port = family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<HttpEndpoint>(
      new HttpEndpoint(fd, bound_port, std::move(path), std::move(body)));
}

HttpEndpoint::HttpEndpoint(int fd, int port, std::string path, std::function<std::string()> body)
    : listen_fd_(fd), port_(port), path_(std::move(path)), body_(std::move(body)) {
  thread_ = std::thread([this] { Serve(); });
}

HttpEndpoint::~HttpEndpoint() {
  stop_.store(true);
  thread_.join();
  ::close(listen_fd_);
}

void HttpEndpoint::Serve() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, /*timeout_ms=*/100) <= 0) continue;
    const int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    Answer(connection);
    ::close(connection);
  }
}

void HttpEndpoint::Answer(int connection) {
  timeval timeout{2, 0};
  ::setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buffer[1024];
  while (!absl::StrContains(request, "\r\n\r\n") && !absl::StrContains(request, "\n\n")) {
    const ssize_t n = ::recv(connection, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
    if (request.size() > kMaxRequestBytes) {
      SendAll(connection,
              Response("431 Request Header Fields Too Large", "text/plain", "request too large\n"));
      return;
    }
  }
  // The request line: METHOD SP TARGET SP VERSION.
  const size_t first_space = request.find(' ');
  const size_t second_space = request.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos) {
    SendAll(connection, Response("400 Bad Request", "text/plain", "bad request line\n"));
    return;
  }
  const std::string method = request.substr(0, first_space);
  std::string target = request.substr(first_space + 1, second_space - first_space - 1);
  target = target.substr(0, target.find('?'));
  if (target != path_) {
    SendAll(connection, Response("404 Not Found", "text/plain",
                                 absl::StrCat("not found; the metrics are at ", path_, "\n")));
  } else if (method != "GET" && method != "HEAD") {
    SendAll(connection, Response("405 Method Not Allowed", "text/plain", "use GET\n"));
  } else {
    std::string response = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body_());
    if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
    SendAll(connection, response);
  }
}

}  // namespace convoy
