// The HTTP server under many connections and while stopping: a thousand concurrent streams on
// the io threads alone, and Stop with requests in flight.
#include <sys/resource.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "exchange_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_exchange.h"
#include "http/http_server.h"
#include "http_test_client.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::CallCounter;
using ::convoy::testing::CountThreads;
using ::convoy::testing::Park;
using ::convoy::testing::ParkedExchanges;
using ::convoy::testing::StartParkingServer;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestClient;
using ::convoy::testing::TestResponse;

// Raises the soft limit on open files to what `needed` asks (within the hard limit); false
// when the hard limit is lower.
bool AllowOpenFiles(rlim_t needed) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= needed) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) return false;
  limit.rlim_cur = needed;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

TEST(HttpLoadTest, AThousandConcurrentStreamsRunOnTheIoThreadsAlone) {
  constexpr int kConnections = 1000;
  constexpr int kChunks = 10;
  // Both ends of every connection are in this process.
  if (!AllowOpenFiles(2 * kConnections + 200)) {
    GTEST_SKIP() << "the hard limit on open files is below " << 2 * kConnections + 200;
  }
  // One thread started and joined first: a sanitizer's runtime starts its own helper thread with
  // the process's first (ThreadSanitizer does), which is then counted in threads_before.
  std::thread([] {}).join();
  const int threads_before = CountThreads();
  ParkedExchanges parked;
  HttpServerOptions options;
  options.io_threads = 2;
  auto server = StartParkingServer(&parked, options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->io_threads(), 2);

  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(TestClient::Connect(server->port()));
    ASSERT_NE(clients.back(), nullptr) << "connection " << i;
    ASSERT_TRUE(clients.back()->SendRequest("GET", absl::StrCat("/park?i=", i)));
  }
  ASSERT_TRUE(parked.AwaitReceived(kConnections));
  std::vector<std::shared_ptr<HttpExchange>> exchanges;
  for (int i = 0; i < kConnections; ++i) {
    exchanges.push_back(parked.Take());
    ASSERT_NE(exchanges.back(), nullptr);
    ASSERT_OK(exchanges.back()->StartStream(200, "text/event-stream"));
  }
  EXPECT_EQ(server->open_connections(), kConnections);
  // Every connection open, every stream started: the server has added its io threads, no more.
  EXPECT_LE(CountThreads(), threads_before + options.io_threads);

  // All streams at once, chunk after chunk, from a thread that is not the server's.
  std::thread producer([&] {
    for (int k = 0; k < kChunks; ++k) {
      for (const auto& exchange : exchanges) {
        EXPECT_OK(exchange->Write(absl::StrCat(exchange->request().query, " chunk ", k, "\n")));
      }
    }
    for (const auto& exchange : exchanges) EXPECT_OK(exchange->Finish());
  });
  for (int i = 0; i < kConnections; ++i) {
    std::optional<TestResponse> response = clients[i]->ReadResponse();
    ASSERT_TRUE(response.has_value()) << "connection " << i;
    ASSERT_EQ(response->chunks.size(), static_cast<size_t>(kChunks)) << "connection " << i;
    for (int k = 0; k < kChunks; ++k) {
      ASSERT_EQ(response->chunks[k], absl::StrCat("i=", i, " chunk ", k, "\n"));
    }
  }
  producer.join();
  EXPECT_LE(CountThreads(), threads_before + options.io_threads);
}

TEST(HttpStopTest, StopClosesIdleConnectionsAndLetsInFlightOnesFinish) {
  ParkedExchanges parked;
  auto server = StartParkingServer(&parked);
  ASSERT_NE(server, nullptr);
  const int port = server->port();

  auto [idle, first] = Park(*server, &parked);
  ASSERT_NE(first, nullptr);
  ASSERT_OK(first->Respond(200, "text/plain", "first"));
  ASSERT_TRUE(idle->ReadResponse().has_value());  // now idle, kept alive

  auto [busy, in_flight] = Park(*server, &parked);
  ASSERT_NE(in_flight, nullptr);
  ASSERT_OK(in_flight->StartStream(200, "text/plain"));
  ASSERT_OK(in_flight->Write("before stop;"));

  std::thread stopper([&] { server->Stop(testing::kLiveness); });
  EXPECT_TRUE(idle->WaitForClose()) << "an idle connection is closed at once";
  // The stream goes on while the server stops, and its connection closes after it.
  ASSERT_OK(in_flight->Write("after stop"));
  ASSERT_OK(in_flight->Finish());
  std::optional<TestResponse> response = busy->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "before stop;after stop");
  EXPECT_TRUE(busy->WaitForClose());
  stopper.join();
  EXPECT_EQ(server->open_connections(), 0);

  EXPECT_FALSE(testing::AcceptsConnections(port)) << "nothing listens any more";
}

TEST(HttpStopTest, AfterTheGraceStopClosesWhatIsLeft) {
  ParkedExchanges parked;
  auto server = StartParkingServer(&parked);
  ASSERT_NE(server, nullptr);
  auto [client, stuck] = Park(*server, &parked);
  ASSERT_NE(stuck, nullptr);
  CallCounter closed;
  stuck->OnClosed(closed.Callback());

  server->Stop(absl::Milliseconds(50));
  EXPECT_EQ(closed.calls(), 1) << "OnClosed ran before Stop returned";
  EXPECT_THAT(stuck->Respond(200, "text/plain", "late"),
              StatusIs(absl::StatusCode::kCancelled, ::testing::HasSubstr("client")));
  std::string received;
  EXPECT_TRUE(client->WaitForClose(&received));
  EXPECT_EQ(received, "");
  // The server is gone; the exchange it left behind is still safe to use and to drop.
  server.reset();
  EXPECT_THAT(stuck->Write("x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("StartStream")));
  stuck->OnClosed([] {});
  stuck->OnDrained([] {});
  stuck.reset();
}

}  // namespace
}  // namespace convoy
