// The OpenAI API on a real HTTP server: the work of preparing a request (parsing, tokenizing,
// rendering the chat template) never holds the server's io threads, so readiness probes are
// answered while long prompts are prepared.
#include "frontend/openai_service.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "frontend/generation.h"
#include "gtest/gtest.h"
#include "http/http_router.h"
#include "http/http_server.h"
#include "metrics/http_get.h"
#include "reactor_harness.h"

namespace convoy {
namespace {

using ::convoy::testing::FakeEngine;
using ::convoy::testing::HttpCall;
using ::convoy::testing::HttpResponse;

using ::convoy::testing::kLiveness;

// A connection to 127.0.0.1:port that has sent `bytes`; -1 when it could not. The caller closes it.
int SendAndKeepOpen(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      send(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

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

// A client that goes away while its request waits to be prepared leaves nothing behind: whether
// the server sees it go before or after the request reaches the engine, the request is not run
// (never submitted, or cancelled there), its session closes and the client's one in-flight slot
// is free again.
TEST(OpenAiServiceTest, AClientGoneWhileItsRequestIsPreparedLeavesNothingBehind) {
  FakeEngine engine;
  GenerationHub hub;
  ServingContext context;
  context.engine = &engine;
  context.limits.model_name = "fake";
  context.limits.vocab_size = 100;
  context.limits.max_context_length = 256;
  hub.Start(std::move(context));
  absl::Mutex mu;
  bool preparing = false;
  bool release = false;
  OpenAiOptions options;
  options.before_prepare = [&] {
    absl::MutexLock lock(&mu);
    preparing = true;
    mu.Await(absl::Condition(&release));
  };
  options.prepare_threads = 1;  // requests are prepared one at a time, in order
  OpenAiService openai(&hub, options);
  HttpRouter router;
  ASSERT_TRUE(openai.AddRoutes(&router).ok());
  HttpServerOptions http;
  http.listen_address = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(http, std::move(router));
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string body = R"({"prompt": [1, 2, 3], "max_tokens": 4})";
  const int client = SendAndKeepOpen(
      (*server)->port(),
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                   "Content-Length: ", body.size(), "\r\n\r\n", body));
  ASSERT_GE(client, 0);
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&preparing), kLiveness));
  }
  close(client);  // the client goes away
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  // A request prepared after it, and refused there (its token is outside the vocabulary), is
  // answered once the first has been handled: that one never reached the engine, or the engine
  // has been told to cancel it. (A body that does not parse is refused on the HTTP thread, before
  // the first is handled; as the barrier here it let the test look at the engine too early.)
  absl::StatusOr<HttpResponse> after = HttpCall((*server)->port(), "POST", "/v1/completions", {},
                                                R"({"prompt": [500], "max_tokens": 4})");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status_code, 400);
  EXPECT_NE(after->body.find("token id 500"), std::string::npos) << after->body;
  for (RequestId id : engine.AwaitSubmitted(0)) {
    EXPECT_TRUE(engine.AwaitCancelled(id)) << "request " << id << " ran on for a client gone";
    engine.Final(id, Outcome::kCancelled, absl::CancelledError("cancelled"), 0);
  }
  EXPECT_TRUE(hub.WaitForNoSessions(kLiveness));
  EXPECT_EQ(hub.open_sessions(), 0);
  EXPECT_EQ(hub.client_in_flight("address 127.0.0.1"), 0);
}

}  // namespace
}  // namespace convoy
