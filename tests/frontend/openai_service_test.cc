// The OpenAI API on a real HTTP server: the work of preparing a request (parsing, tokenizing,
// rendering the chat template) never holds the server's io threads, so readiness probes are
// answered while long prompts are prepared.
#include "frontend/openai_service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "frontend/generation.h"
#include "gtest/gtest.h"
#include "http/http_router.h"
#include "http/http_server.h"
#include "metrics/http_get.h"

namespace convoy {
namespace {

using ::convoy::testing::HttpCall;
using ::convoy::testing::HttpResponse;

constexpr absl::Duration kLiveness = absl::Seconds(60);

// As many requests as the HTTP server has io threads are held while they are prepared (the hook
// stands for tokenizing long prompts); GET /ready is answered meanwhile. Once let go, each
// request gets its answer (503: the hub serves no model).
TEST(OpenAiServiceTest, ReadinessIsAnsweredWhileRequestsArePrepared) {
  constexpr int kIoThreads = 2;
  GenerationHub hub;
  absl::Mutex mu;
  int preparing = 0;
  bool release = false;
  OpenAiOptions options;
  options.prepare_threads = kIoThreads;
  options.before_prepare = [&] {
    absl::MutexLock lock(&mu);
    ++preparing;
    mu.Await(absl::Condition(&release));
  };
  OpenAiService openai(&hub, options);
  HttpRouter router;
  ASSERT_TRUE(router
                  .Add("GET", "/ready",
                       [](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
                         exchange->Respond(200, "text/plain", "ready\n").IgnoreError();
                       })
                  .ok());
  ASSERT_TRUE(openai.AddRoutes(&router).ok());
  HttpServerOptions http;
  http.listen_address = "127.0.0.1";
  http.io_threads = kIoThreads;
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(http, std::move(router));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  std::vector<int> codes(kIoThreads);
  std::vector<std::thread> clients;
  for (int i = 0; i < kIoThreads; ++i) {
    clients.emplace_back([&codes, port, i] {
      absl::StatusOr<HttpResponse> response =
          HttpCall(port, "POST", "/v1/completions", {"Content-Type: application/json"},
                   R"({"prompt": "a prompt as long as you like", "max_tokens": 4})");
      codes[i] = response.ok() ? response->status_code : -1;
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return preparing == kIoThreads; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), kLiveness))
        << preparing << " of " << kIoThreads << " requests reached preparation";
  }
  absl::StatusOr<HttpResponse> ready = HttpCall(port, "GET", "/ready");
  EXPECT_TRUE(ready.ok()) << "/ready went unanswered while requests were prepared: "
                          << ready.status();
  if (ready.ok()) {
    EXPECT_EQ(ready->status_code, 200);
  }
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  for (std::thread& client : clients) client.join();
  for (int code : codes) EXPECT_EQ(code, 503);
}

}  // namespace
}  // namespace convoy
