#include "https_test_client.h"

#include <openssl/ssl.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "http_test_client.h"

namespace convoy::testing {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using net::ip::tcp;

absl::Status Failed(const std::string& step, const boost::system::error_code& error) {
  return absl::UnavailableError(absl::StrCat("HTTPS ", step, ": ", error.message()));
}

}  // namespace

struct HttpsTestClient::State {
  net::io_context io;
  ssl::context context{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> stream;
  boost::beast::flat_buffer buffer;
};

HttpsTestClient::HttpsTestClient(std::unique_ptr<State> state) : state_(std::move(state)) {}
HttpsTestClient::~HttpsTestClient() = default;

absl::StatusOr<std::unique_ptr<HttpsTestClient>> HttpsTestClient::Connect(
    int port, const std::string& ca_file, const std::string& cert_file,
    const std::string& key_file) {
  auto state = std::make_unique<State>();
  boost::system::error_code error;
  state->context.load_verify_file(ca_file, error);
  if (error) return Failed("CA file", error);
  if (!cert_file.empty()) {
    state->context.use_certificate_chain_file(cert_file, error);
    if (error) return Failed("client certificate", error);
    state->context.use_private_key_file(key_file, ssl::context::pem, error);
    if (error) return Failed("client key", error);
  }
  state->context.set_verify_mode(ssl::verify_peer);
  state->stream = std::make_unique<ssl::stream<tcp::socket>>(state->io, state->context);
  state->stream->set_verify_callback(ssl::host_name_verification("127.0.0.1"));
  tcp::socket& socket = state->stream->next_layer();
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)),
                 error);
  if (error) return Failed("connect", error);
  // Bounds every blocking read and write (a hung server fails the test instead of hanging it).
  const timeval limit{static_cast<time_t>(absl::ToInt64Seconds(kLiveness)), 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  state->stream->handshake(ssl::stream_base::client, error);
  if (error) return Failed("handshake", error);
  return std::unique_ptr<HttpsTestClient>(new HttpsTestClient(std::move(state)));
}

absl::StatusOr<HttpsResponse> HttpsTestClient::Request(const std::string& method,
                                                       const std::string& target,
                                                       const std::string& body) {
  http::request<http::string_body> request(http::string_to_verb(method), target, 11);
  request.set(http::field::host, "127.0.0.1");
  if (!body.empty()) {
    request.set(http::field::content_type, "application/json");
    request.body() = body;
  }
  request.prepare_payload();
  boost::system::error_code error;
  http::write(*state_->stream, request, error);
  if (error) return Failed("write", error);
  http::response<http::string_body> response;
  http::read(*state_->stream, state_->buffer, response, error);
  if (error) return Failed("read", error);
  return HttpsResponse{static_cast<int>(response.result_int()), std::move(response.body()),
                       response.keep_alive()};
}

}  // namespace convoy::testing
