// A minimal HTTP/1.0 client over a TCP socket to 127.0.0.1, for scraping /metrics and calling
// the HTTP API in tests.
#ifndef CONVOY_TESTS_METRICS_HTTP_GET_H_
#define CONVOY_TESTS_METRICS_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy::testing {

struct HttpResponse {
  int status_code = 0;
  std::string body;
};

// Sends `method path` with `headers` (each "Name: value") and `body` to 127.0.0.1:port and reads
// the response until the server closes.
inline absl::StatusOr<HttpResponse> HttpCall(int port, const std::string& method,
                                             const std::string& path,
                                             const std::vector<std::string>& headers = {},
                                             const std::string& body = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  // A guard against a hung server, not a timing check.
  timeval timeout{};
  timeout.tv_sec = 30;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to port ", port, ": ", std::strerror(errno)));
  }
  std::string request = absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n");
  for (const std::string& header : headers) absl::StrAppend(&request, header, "\r\n");
  if (!body.empty()) {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::InternalError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) return absl::InternalError(absl::StrCat("recv: ", std::strerror(errno)));
    raw.append(buffer, static_cast<size_t>(n));
  }

  // "HTTP/1.x CODE reason\r\n headers \r\n\r\n body"
  const size_t header_end = raw.find("\r\n\r\n");
  const size_t first_space = raw.find(' ');
  if (header_end == std::string::npos || first_space == std::string::npos) {
    return absl::InternalError(absl::StrCat("malformed HTTP response: ", raw.substr(0, 200)));
  }
  HttpResponse response;
  if (!absl::SimpleAtoi(absl::string_view(raw).substr(first_space + 1, 3), &response.status_code)) {
    return absl::InternalError(absl::StrCat("no status code in: ", raw.substr(0, 200)));
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

// Sends `GET path` to 127.0.0.1:port.
inline absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  return HttpCall(port, "GET", path);
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_METRICS_HTTP_GET_H_
