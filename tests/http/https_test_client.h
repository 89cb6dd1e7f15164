// A blocking HTTPS client for the tests (Beast over Asio's TLS stream, OpenSSL underneath): it
// verifies the server's certificate against a CA file and the host name 127.0.0.1, may present a
// client certificate, and sends requests one after another on one connection.
#ifndef CONVOY_TESTS_HTTP_HTTPS_TEST_CLIENT_H_
#define CONVOY_TESTS_HTTP_HTTPS_TEST_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace convoy::testing {

struct HttpsResponse {
  int status = 0;
  std::string body;
  bool keep_alive = false;
};

class HttpsTestClient {
 public:
  // Connects to 127.0.0.1:port and completes the TLS handshake, trusting `ca_file`; with
  // `cert_file` and `key_file`, presents that client certificate. UNAVAILABLE (with OpenSSL's
  // reason) when the connection or the handshake fails. Every step is bounded by kLiveness.
  static absl::StatusOr<std::unique_ptr<HttpsTestClient>> Connect(int port,
                                                                  const std::string& ca_file,
                                                                  const std::string& cert_file = "",
                                                                  const std::string& key_file = "");
  ~HttpsTestClient();
  HttpsTestClient(const HttpsTestClient&) = delete;
  HttpsTestClient& operator=(const HttpsTestClient&) = delete;

  // Sends METHOD target (with `body` as JSON when not empty) and reads the whole response.
  absl::StatusOr<HttpsResponse> Request(const std::string& method, const std::string& target,
                                        const std::string& body = "");

 private:
  struct State;
  explicit HttpsTestClient(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_HTTP_HTTPS_TEST_CLIENT_H_
