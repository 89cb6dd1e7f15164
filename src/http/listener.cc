#include "http/listener.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/bind_executor.hpp"
#include "boost/asio/post.hpp"
#include "http/connection.h"

namespace convoy::http_internal {
namespace {

namespace net = boost::asio;
using boost::system::error_code;
using net::ip::tcp;

// A failed accept (out of file descriptors, most likely) is retried after this pause rather
// than at once, which would spin.
constexpr std::chrono::milliseconds kAcceptRetry(50);

// host:port, with an IPv6 host in brackets, for messages.
std::string Endpoint(const std::string& address, int port) {
  return absl::StrContains(address, ':') && !absl::StartsWith(address, "[")
             ? absl::StrCat("[", address, "]:", port)
             : absl::StrCat(address, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listener::Bind(std::shared_ptr<ServerCore> core,
                                                         const std::string& address, int port) {
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  error_code error;
  const net::ip::address ip = net::ip::make_address(host, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not an IPv4 or IPv6 address"));
  }
  const tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  tcp::acceptor acceptor(core->io());
  auto failed = [&](const char* step) {
    return absl::UnavailableError(absl::StrCat("cannot ", step, " ", Endpoint(address, port),
                                               " for HTTP: ", error.message()));
  };
  if (acceptor.open(endpoint.protocol(), error)) return failed("open a socket for");
  // A restarted server binds again at once, even with connections of the last one in TIME_WAIT.
  if (acceptor.set_option(net::socket_base::reuse_address(true), error)) return failed("set up");
  if (acceptor.bind(endpoint, error)) return failed("bind");
  if (acceptor.listen(net::socket_base::max_listen_connections, error)) return failed("listen on");
  const int bound_port = acceptor.local_endpoint(error).port();
  if (error) return failed("read the port of");
  return std::unique_ptr<Listener>(new Listener(std::move(core), std::move(acceptor), bound_port));
}

Listener::Listener(std::shared_ptr<ServerCore> core, tcp::acceptor acceptor, int port)
    : core_(std::move(core)),
      port_(port),
      strand_(net::make_strand(core_->io())),
      acceptor_(std::move(acceptor)),
      retry_timer_(strand_) {}

void Listener::Start() {
  net::post(strand_, [this] { Accept(); });
}

void Listener::Close() {
  net::post(strand_, [this] {
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  });
}

void Listener::Accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(net::make_strand(core_->io()),
                         net::bind_executor(strand_, [this](error_code error, tcp::socket socket) {
                           OnAccept(error, std::move(socket));
                         }));
}

void Listener::OnAccept(error_code error, tcp::socket socket) {
  if (!acceptor_.is_open() || core_->stopping()) return;
  if (error) {
    retry_timer_.expires_after(kAcceptRetry);
    retry_timer_.async_wait([this](error_code timer_error) {
      if (!timer_error) Accept();
    });
    return;
  }
  auto connection = std::make_shared<Connection>(core_, std::move(socket));
  if (core_->Register(connection)) connection->Start();
  Accept();
}

}  // namespace convoy::http_internal
