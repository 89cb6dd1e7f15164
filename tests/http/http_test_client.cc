#include "http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "gtest/gtest.h"

namespace convoy::testing {
namespace {

namespace http = boost::beast::http;

std::string Text(boost::beast::string_view text) { return std::string(text.data(), text.size()); }

bool ConnectToLoopback(int fd, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
}

}  // namespace

std::string TestResponse::Header(absl::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (absl::EqualsIgnoreCase(field, name)) return value;
  }
  return "";
}

// One response being parsed: Beast's parser, with its chunk callbacks gathering whole chunks.
class TestClient::Reader {
 public:
  explicit Reader(bool head_request) {
    parser_.eager(true);
    parser_.skip(head_request);
    parser_.body_limit(boost::none);
    parser_.on_chunk_header(on_header_);
    parser_.on_chunk_body(on_body_);
  }

  http::response_parser<http::string_body>& parser() { return parser_; }
  std::deque<std::string>& chunks() { return chunks_; }

  TestResponse Head() {
    TestResponse response;
    const auto& message = parser_.get();
    response.status = static_cast<int>(message.result_int());
    response.version = static_cast<int>(message.version());
    for (const auto& field : message) {
      response.headers.emplace_back(Text(field.name_string()), Text(field.value()));
    }
    response.chunked = parser_.chunked();
    response.keep_alive = parser_.keep_alive();
    return response;
  }

 private:
  std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
      on_header_ =
          [this](std::uint64_t size, boost::beast::string_view, boost::system::error_code&) {
            if (size > 0) current_.clear();
          };
  std::function<size_t(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
      on_body_ =
          [this](std::uint64_t remain, boost::beast::string_view body, boost::system::error_code&) {
            current_.append(body.data(), body.size());
            if (remain == body.size()) chunks_.push_back(std::move(current_));
            return body.size();
          };
  std::string current_;
  std::deque<std::string> chunks_;
  http::response_parser<http::string_body> parser_;
};

std::unique_ptr<TestClient> TestClient::Connect(int port, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<TestClient> client(new TestClient(fd));
  timeval timeout{};
  timeout.tv_sec = absl::ToInt64Seconds(kLiveness);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  if (!ConnectToLoopback(fd, port)) {
    ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    return nullptr;
  }
  return client;
}

TestClient::TestClient(int fd) : fd_(fd) {}

TestClient::~TestClient() { Close(); }

void TestClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TestClient::HalfClose() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool TestClient::Send(absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TestClient::SendRequest(absl::string_view method, absl::string_view target,
                             absl::string_view body, absl::string_view headers) {
  std::string request = absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  if (!body.empty()) absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  absl::StrAppend(&request, headers, "\r\n", body);
  return Send(request);
}

bool TestClient::Receive(std::string* error, bool* timed_out) {
  char buffer[16384];
  while (true) {
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n > 0) {
      pending_.append(buffer, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    const bool timeout = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (timed_out != nullptr) *timed_out = timeout;
    if (error != nullptr) {
      *error = n == 0    ? "the server closed the connection"
               : timeout ? absl::StrCat("no answer within ", absl::FormatDuration(kLiveness))
                         : absl::StrCat("recv: ", std::strerror(errno));
    }
    return false;
  }
}

bool TestClient::Parse(const std::function<bool()>& enough, std::string* error) {
  auto& parser = reader_->parser();
  while (!enough() && !parser.is_done()) {
    boost::system::error_code parse_error;
    if (!pending_.empty()) {
      // Beast may take a whole chunk and still say need_more (it wants the CRLF after it).
      const size_t used =
          parser.put(boost::asio::buffer(pending_.data(), pending_.size()), parse_error);
      pending_.erase(0, used);
      if (parse_error && parse_error != http::error::need_more) {
        if (error != nullptr) *error = "malformed response: " + parse_error.message();
        return false;
      }
      if (enough() || parser.is_done()) break;
      if (used > 0 && !parse_error) continue;
    }
    if (!Receive(error)) {
      // A body without a length (HTTP/1.0) is whole when the connection ends.
      parser.put_eof(parse_error);
      if (parse_error || !parser.is_done()) return false;
    }
  }
  return true;
}

std::optional<TestResponse> TestClient::ReadHead(std::string* error) {
  reader_ = std::make_unique<Reader>(/*head_request=*/false);
  auto& parser = reader_->parser();
  if (!Parse([&] { return parser.is_header_done(); }, error)) return std::nullopt;
  return reader_->Head();
}

std::optional<std::string> TestClient::ReadChunk(std::string* error) {
  if (reader_ == nullptr) {
    if (error != nullptr) *error = "no response head was read";
    return std::nullopt;
  }
  if (!Parse([&] { return !reader_->chunks().empty(); }, error)) return std::nullopt;
  if (reader_->chunks().empty()) return std::nullopt;  // the body ended
  std::string chunk = std::move(reader_->chunks().front());
  reader_->chunks().pop_front();
  return chunk;
}

std::optional<TestResponse> TestClient::ReadResponse(bool head_request, std::string* error) {
  reader_ = std::make_unique<Reader>(head_request);
  if (!Parse([] { return false; }, error)) return std::nullopt;
  TestResponse response = reader_->Head();
  response.body = reader_->parser().get().body();
  response.chunks.assign(reader_->chunks().begin(), reader_->chunks().end());
  for (const std::string& chunk : response.chunks) response.body += chunk;
  reader_.reset();
  return response;
}

bool TestClient::WaitForClose(std::string* received) {
  bool timed_out = false;
  while (Receive(nullptr, &timed_out)) {
  }
  if (received != nullptr) *received = std::move(pending_);
  pending_.clear();
  return !timed_out;
}

bool AcceptsConnections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool connected = ConnectToLoopback(fd, port);
  ::close(fd);
  return connected;
}

int CountThreads() {
  int threads = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++threads;
  }
  return threads;
}

}  // namespace convoy::testing
