#include "bench/loadgen/metrics_sampler.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http.hpp"

namespace convoy::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

absl::StatusOr<std::string> HttpGetText(const std::string& address, const std::string& path,
                                        const std::string& api_key, absl::Duration timeout) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string url = absl::StrCat("http://", address, path);
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
    stream.connect(resolver.resolve(host, address.substr(colon + 1)));
    http::request<http::empty_body> request(http::verb::get, path, 11);
    request.set(http::field::host, host);
    if (!api_key.empty()) request.set(http::field::authorization, "Bearer " + api_key);
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    if (response.result_int() != 200) {
      return absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", response.result_int()));
    }
    return std::move(response.body());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", e.what()));
  }
}

MetricsSampler::MetricsSampler(std::string address, std::string api_key, absl::Duration interval)
    : address_(std::move(address)), api_key_(std::move(api_key)) {
  thread_ = std::thread([this, interval] {
    do {
      Scrape();
    } while (!stop_.WaitForNotificationWithTimeout(interval));
  });
}

MetricsSampler::~MetricsSampler() {
  if (thread_.joinable()) {
    stop_.Notify();
    thread_.join();
  }
}

void MetricsSampler::Scrape() {
  absl::StatusOr<std::string> text = HttpGetText(address_, "/metrics", api_key_, absl::Seconds(5));
  absl::MutexLock lock(&mu_);
  if (!text.ok()) {
    error_ = std::string(text.status().message());
    return;
  }
  memory_.Add(ParseServerMetrics(*text));
}

ServerMemory MetricsSampler::Stop(std::string* error) {
  if (thread_.joinable()) {
    stop_.Notify();
    thread_.join();
  }
  Scrape();
  absl::MutexLock lock(&mu_);
  if (error != nullptr) *error = error_;
  return memory_;
}

}  // namespace convoy::bench
