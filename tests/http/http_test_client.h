// A blocking HTTP client over a plain loopback socket for the server's tests: it sends whatever
// bytes a test gives (well-formed or not) and parses responses with Beast's parser, chunk by
// chunk when asked. Every read is bounded by kLiveness (a guard against a hung server, not a
// timing check).
#ifndef CONVOY_TESTS_HTTP_HTTP_TEST_CLIENT_H_
#define CONVOY_TESTS_HTTP_HTTP_TEST_CLIENT_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace convoy::testing {

inline constexpr absl::Duration kLiveness = absl::Seconds(60);

struct TestResponse {
  int status = 0;
  int version = 11;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // A chunked body's chunks as they came.
  std::vector<std::string> chunks;
  bool chunked = false;
  bool keep_alive = false;

  // The first field called `name` (without case), or "" when there is none.
  std::string Header(absl::string_view name) const;
};

class TestClient {
 public:
  // Connects to 127.0.0.1:port; null (with a test failure) when it cannot. `receive_buffer`
  // (when > 0) shrinks the socket's receive buffer, set before connecting.
  static std::unique_ptr<TestClient> Connect(int port, int receive_buffer = 0);
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  // Sends all of `bytes`; false when the connection is gone.
  bool Send(absl::string_view bytes);
  // Sends "METHOD target HTTP/1.1" with Host, `headers` (whole lines, each ending in \r\n), and
  // a Content-Length when `body` is not empty.
  bool SendRequest(absl::string_view method, absl::string_view target, absl::string_view body = "",
                   absl::string_view headers = "");

  // Reads one whole response. nullopt when the connection ended or the read timed out first;
  // `error` (optional) says which. `head_request`: the response has no body.
  std::optional<TestResponse> ReadResponse(bool head_request = false, std::string* error = nullptr);

  // Reads a response's head (status and fields), then its chunks one at a time.
  std::optional<TestResponse> ReadHead(std::string* error = nullptr);
  // The next chunk of the body whose head ReadHead read; nullopt at its end (or on an error).
  std::optional<std::string> ReadChunk(std::string* error = nullptr);

  // Reads until the server closes the connection (EOF or reset); false when it does not within
  // kLiveness. What came meanwhile goes to `received` (optional).
  bool WaitForClose(std::string* received = nullptr);
  // Closes the socket (a client going away).
  void Close();
  // Shuts the sending side only (the client has said all it will, and still reads).
  void HalfClose();

 private:
  class Reader;
  explicit TestClient(int fd);
  // Appends what the socket has (waiting up to kLiveness) to pending_; false at EOF, an error
  // or a timeout (then *timed_out, when given, is set).
  bool Receive(std::string* error, bool* timed_out = nullptr);
  // Feeds the response parser until `enough` or the message is whole; false (with why) when the
  // connection ends first or the response is malformed.
  bool Parse(const std::function<bool()>& enough, std::string* error);

  int fd_;
  std::string pending_;  // bytes read and not parsed yet
  std::unique_ptr<Reader> reader_;
};

// Whether a connection to 127.0.0.1:port succeeds (it is closed at once).
bool AcceptsConnections(int port);

// Threads of this process now (entries of /proc/self/task).
int CountThreads();

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_HTTP_HTTP_TEST_CLIENT_H_
