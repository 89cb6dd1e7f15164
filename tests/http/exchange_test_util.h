// For the exchange and load tests: a server whose handlers park every exchange for the test to
// answer later, from the test's own threads.
#ifndef CONVOY_TESTS_HTTP_EXCHANGE_TEST_UTIL_H_
#define CONVOY_TESTS_HTTP_EXCHANGE_TEST_UTIL_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "http/http_exchange.h"
#include "http/http_server.h"
#include "http_test_client.h"
#include "status_matchers.h"

namespace convoy::testing {

class ParkedExchanges {
 public:
  // A handler that keeps each exchange it gets.
  HttpHandler Handler() {
    return [this](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
      absl::MutexLock lock(&mu_);
      parked_.push_back(std::move(exchange));
      ++received_;
    };
  }

  // The oldest exchange not taken yet, waiting up to kLiveness; null (with a failure) on timeout.
  std::shared_ptr<HttpExchange> Take() {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !parked_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), kLiveness)) {
      ADD_FAILURE() << "no request reached the handler within " << kLiveness;
      return nullptr;
    }
    std::shared_ptr<HttpExchange> exchange = std::move(parked_.front());
    parked_.pop_front();
    return exchange;
  }

  // Waits until `count` requests reached the handler in all.
  bool AwaitReceived(int count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return received_ >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kLiveness);
  }

 private:
  absl::Mutex mu_;
  std::deque<std::shared_ptr<HttpExchange>> parked_ ABSL_GUARDED_BY(mu_);
  int received_ ABSL_GUARDED_BY(mu_) = 0;
};

// A server on 127.0.0.1 (a free port) whose "GET /park" parks its exchanges in `parked`.
inline std::unique_ptr<HttpServer> StartParkingServer(ParkedExchanges* parked,
                                                      HttpServerOptions options = {}) {
  options.listen_address = "127.0.0.1";
  options.port = 0;
  HttpRouter router;
  EXPECT_OK(router.Add("GET", "/park", parked->Handler()));
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, std::move(router));
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

// A client whose request ("GET /park" and `headers`) is parked: the exchange to answer it.
struct ParkedRequest {
  std::unique_ptr<TestClient> client;
  std::shared_ptr<HttpExchange> exchange;  // null (with a test failure) when it did not come
};

inline ParkedRequest Park(const HttpServer& server, ParkedExchanges* parked,
                          absl::string_view headers = "", int receive_buffer = 0) {
  ParkedRequest request;
  request.client = TestClient::Connect(server.port(), receive_buffer);
  if (request.client == nullptr) return request;
  if (!request.client->SendRequest("GET", "/park", "", headers)) {
    ADD_FAILURE() << "cannot send the request";
    return request;
  }
  request.exchange = parked->Take();
  return request;
}

// Counts calls of a callback and lets a test wait for them.
class CallCounter {
 public:
  std::function<void()> Callback() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++calls_;
    };
  }
  bool AwaitCalls(int count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kLiveness);
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_HTTP_EXCHANGE_TEST_UTIL_H_
