// HttpExchange over real loopback sockets: answers given later from other threads, streamed
// responses, backpressure, a client that goes away, and handlers that drop their exchange.
#include "http/http_exchange.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "exchange_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_server.h"
#include "http_test_client.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::CallCounter;
using ::convoy::testing::ParkedExchanges;
using ::convoy::testing::StartParkingServer;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestClient;
using ::convoy::testing::TestResponse;
using ::testing::HasSubstr;

// A parking server for each test.
class HttpExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartParkingServer(&parked_);
    ASSERT_NE(server_, nullptr);
  }
  // A request on a new connection, parked; the test fails at once when it is not.
  testing::ParkedRequest Park(absl::string_view headers = "", int receive_buffer = 0) {
    testing::ParkedRequest request = testing::Park(*server_, &parked_, headers, receive_buffer);
    EXPECT_NE(request.exchange, nullptr);
    return request;
  }

  ParkedExchanges parked_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpExchangeTest, AnswersLaterFromAnotherThread) {
  auto [client, exchange] = Park("X-Id: 42\r\n");
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(exchange->request().method, "GET");
  EXPECT_EQ(exchange->request().target, "/park");
  EXPECT_EQ(exchange->request().path, "/park");
  ASSERT_NE(exchange->request().FindHeader("x-id"), nullptr);
  EXPECT_EQ(*exchange->request().FindHeader("x-id"), "42");

  std::thread engine([exchange = std::move(exchange)] {
    EXPECT_OK(exchange->Respond(201, "application/json", R"({"ok":true})", {{"X-From", "engine"}}));
  });
  engine.join();
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, R"({"ok":true})");
  EXPECT_EQ(response->Header("X-From"), "engine");
  EXPECT_EQ(response->Header("Content-Type"), "application/json");
  EXPECT_TRUE(response->keep_alive);
}

TEST_F(HttpExchangeTest, StreamsManyChunksWrittenFromAnotherThreadInOrder) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);

  constexpr int kChunks = 1000;
  std::thread producer([exchange = exchange] {
    EXPECT_OK(exchange->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
    for (int i = 0; i < kChunks; ++i) EXPECT_OK(exchange->Write(absl::StrCat("data: ", i, "\n\n")));
    EXPECT_OK(exchange->Write(""));  // sends nothing: an empty chunk would end the body
    EXPECT_OK(exchange->Finish());
  });
  std::optional<TestResponse> response = client->ReadResponse();
  producer.join();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->Header("Content-Type"), "text/event-stream");
  EXPECT_EQ(response->Header("Cache-Control"), "no-cache");
  ASSERT_EQ(response->chunks.size(), static_cast<size_t>(kChunks));
  for (int i = 0; i < kChunks; ++i)
    EXPECT_EQ(response->chunks[i], absl::StrCat("data: ", i, "\n\n"));

  // The connection serves on after a streamed response.
  ASSERT_TRUE(client->SendRequest("GET", "/park"));
  std::shared_ptr<HttpExchange> next = parked_.Take();
  ASSERT_NE(next, nullptr);
  EXPECT_OK(next->Respond(200, "text/plain", "next"));
  std::optional<TestResponse> second = client->ReadResponse();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->body, "next");
}

TEST_F(HttpExchangeTest, EachWriteReachesTheClientWithoutWaitingForTheNext) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  ASSERT_OK(exchange->StartStream(200, "text/event-stream"));
  ASSERT_TRUE(client->ReadHead().has_value());
  // Lockstep: chunk i+1 is written only once the client has read chunk i.
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK(exchange->Write(absl::StrCat("event ", i)));
    std::optional<std::string> chunk = client->ReadChunk();
    ASSERT_TRUE(chunk.has_value()) << "chunk " << i;
    EXPECT_EQ(*chunk, absl::StrCat("event ", i));
  }
  ASSERT_OK(exchange->Finish());
  EXPECT_FALSE(client->ReadChunk().has_value()) << "the body ends after Finish";
}

TEST_F(HttpExchangeTest, DrainedWaitsForASlowReader) {
  auto [client, exchange] = Park("", /*receive_buffer=*/4096);
  ASSERT_NE(exchange, nullptr);

  // Far more than the socket buffers of both ends hold.
  constexpr int kChunks = 64;
  const std::string chunk(1 << 20, 'x');
  ASSERT_OK(exchange->StartStream(200, "application/octet-stream"));
  for (int i = 0; i < kChunks; ++i) ASSERT_OK(exchange->Write(chunk));
  CallCounter drained;
  exchange->OnDrained(drained.Callback());
  // The client reads nothing yet: the queue cannot drain.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(drained.calls(), 0);
  EXPECT_GT(exchange->queued_bytes(), 0u);

  ASSERT_TRUE(client->ReadHead().has_value());
  for (int i = 0; i < kChunks; ++i) {
    std::optional<std::string> got = client->ReadChunk();
    ASSERT_TRUE(got.has_value()) << "chunk " << i;
    ASSERT_EQ(got->size(), chunk.size());
  }
  ASSERT_TRUE(drained.AwaitCalls(1));
  EXPECT_EQ(exchange->queued_bytes(), 0u);
  // With nothing queued a new callback runs at once.
  CallCounter empty;
  exchange->OnDrained(empty.Callback());
  EXPECT_TRUE(empty.AwaitCalls(1));
  ASSERT_OK(exchange->Finish());
  EXPECT_FALSE(client->ReadChunk().has_value());
  EXPECT_EQ(drained.calls(), 1);
}

TEST(HttpWriteTimeoutTest, AClientThatStopsReadingIsClosedAfterTheWriteTimeout) {
  ParkedExchanges parked;
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(200);
  auto server = StartParkingServer(&parked, options);
  ASSERT_NE(server, nullptr);
  auto [client, exchange] = testing::Park(*server, &parked, "", /*receive_buffer=*/4096);
  ASSERT_NE(exchange, nullptr);
  CallCounter closed;
  exchange->OnClosed(closed.Callback());
  ASSERT_OK(exchange->StartStream(200, "application/octet-stream"));
  // More than the socket buffers hold, and a client that reads none of it. On a slow machine (or
  // under a sanitizer) the timeout can close the connection before the last write: that write is
  // then refused as the one after the close is.
  for (int i = 0; i < 64; ++i) {
    absl::Status written = exchange->Write(std::string(1 << 20, 'x'));
    if (!written.ok()) {
      EXPECT_THAT(written, StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
      break;
    }
  }
  ASSERT_TRUE(closed.AwaitCalls(1));
  EXPECT_TRUE(exchange->client_gone());
  EXPECT_EQ(exchange->queued_bytes(), 0u) << "what was queued is dropped";
  EXPECT_THAT(exchange->Write("more"), StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
}

TEST_F(HttpExchangeTest, OnClosedRunsOnceWhenTheClientLeavesMidStream) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  CallCounter closed;
  exchange->OnClosed(closed.Callback());
  ASSERT_OK(exchange->StartStream(200, "text/event-stream"));
  ASSERT_OK(exchange->Write("first"));
  ASSERT_TRUE(client->ReadHead().has_value());
  ASSERT_EQ(client->ReadChunk(), std::optional<std::string>("first"));

  client->Close();
  ASSERT_TRUE(closed.AwaitCalls(1));
  EXPECT_TRUE(exchange->client_gone());
  EXPECT_THAT(exchange->Write("more"), StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
  EXPECT_THAT(exchange->Finish(), StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
  // A callback registered now runs at once; the first never runs again.
  CallCounter late;
  exchange->OnClosed(late.Callback());
  ASSERT_TRUE(late.AwaitCalls(1));
  exchange.reset();
  EXPECT_EQ(closed.calls(), 1);
}

TEST_F(HttpExchangeTest, OnClosedRunsWhenTheClientLeavesWhileTheHandlerWorks) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  CallCounter closed;
  exchange->OnClosed(closed.Callback());
  client->Close();
  ASSERT_TRUE(closed.AwaitCalls(1));
  EXPECT_THAT(exchange->Respond(200, "text/plain", "too late"),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
  EXPECT_EQ(closed.calls(), 1);
}

// A client that only shuts its sending side looks like one that left: the work is cancelled and
// the connection closes (an answer given at once still reaches it: HttpServerTest).
TEST_F(HttpExchangeTest, AHalfClosedConnectionWhoseHandlerHasNotAnsweredIsClosed) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  CallCounter closed;
  exchange->OnClosed(closed.Callback());
  client->HalfClose();
  ASSERT_TRUE(closed.AwaitCalls(1));
  EXPECT_TRUE(exchange->client_gone());
  EXPECT_THAT(exchange->Respond(200, "text/plain", "too late"),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("client")));
  EXPECT_TRUE(client->WaitForClose());
}

TEST_F(HttpExchangeTest, OnClosedDoesNotRunAfterTheResponse) {
  auto [client, exchange] = Park("Connection: close\r\n");
  ASSERT_NE(exchange, nullptr);
  CallCounter closed;
  exchange->OnClosed(closed.Callback());
  ASSERT_OK(exchange->Respond(200, "text/plain", "done"));
  ASSERT_TRUE(client->ReadResponse().has_value());
  EXPECT_TRUE(client->WaitForClose());
  // The connection closed after a whole response: that is no reason to cancel anything.
  const absl::Time give_up = absl::Now() + testing::kLiveness;
  while (!exchange->client_gone() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(exchange->client_gone());
  EXPECT_EQ(closed.calls(), 0);
}

TEST(HttpExchangeDropTest, AnExchangeDroppedUnansweredAnswers500) {
  HttpServerOptions options;
  options.listen_address = "127.0.0.1";
  HttpRouter router;
  ASSERT_OK(router.Add("GET", "/drop", [](const HttpRequest&, std::shared_ptr<HttpExchange>) {}));
  ASSERT_OK(router.Add("GET", "/throw", [](const HttpRequest&, std::shared_ptr<HttpExchange>) {
    throw std::runtime_error("handler failed");
  }));
  auto server = HttpServer::Start(options, std::move(router));
  ASSERT_OK(server);
  auto client = TestClient::Connect((*server)->port());
  ASSERT_NE(client, nullptr);
  for (const char* path : {"/drop", "/throw"}) {
    SCOPED_TRACE(path);
    ASSERT_TRUE(client->SendRequest("GET", path));
    std::optional<TestResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 500);
    EXPECT_THAT(response->body, HasSubstr("ended without answering"));
    EXPECT_THAT(response->body, HasSubstr(path));
  }
}

TEST_F(HttpExchangeTest, AStreamDroppedUnfinishedIsCutShort) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  ASSERT_OK(exchange->StartStream(200, "text/plain"));
  ASSERT_OK(exchange->Write("partial"));
  exchange.reset();
  std::string error;
  EXPECT_FALSE(client->ReadResponse(false, &error).has_value());
  EXPECT_THAT(error, HasSubstr("closed")) << "the body must not look complete";
}

TEST_F(HttpExchangeTest, RefusesWhatDoesNotFitTheResponse) {
  auto [client, exchange] = Park();
  ASSERT_NE(exchange, nullptr);
  EXPECT_THAT(exchange->Write("x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("StartStream")));
  EXPECT_THAT(exchange->Finish(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("StartStream")));
  EXPECT_THAT(exchange->Respond(99, "text/plain", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("99")));
  EXPECT_THAT(exchange->Respond(200, "text/plain", "", {{"X-A", "one\r\nX-B: two"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("X-A")));
  EXPECT_THAT(exchange->Respond(200, "text/plain", "", {{"Content-Length", "3"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("set by the server")));
  EXPECT_THAT(exchange->StartStream(200, "text/plain", {{"Bad Name", "x"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bad Name")));
  ASSERT_OK(exchange->RespondError(429, "slow down", "rate_limited"));
  EXPECT_THAT(exchange->Respond(200, "text/plain", "again"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already sent")));
  EXPECT_THAT(exchange->StartStream(200, "text/plain"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already sent")));
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 429);
  EXPECT_EQ(
      response->body,
      R"({"error":{"code":"rate_limited","message":"slow down","type":"invalid_request_error"}})");
}

TEST_F(HttpExchangeTest, AStreamToAnHttp10ClientEndsWithTheConnection) {
  auto client = TestClient::Connect(server_->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET /park HTTP/1.0\r\n\r\n"));
  std::shared_ptr<HttpExchange> exchange = parked_.Take();
  ASSERT_NE(exchange, nullptr);
  ASSERT_OK(exchange->StartStream(200, "text/plain"));
  for (int i = 0; i < 10; ++i) ASSERT_OK(exchange->Write(absl::StrCat(i)));
  ASSERT_OK(exchange->Finish());
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_FALSE(response->chunked);
  EXPECT_EQ(response->body, "0123456789");
  EXPECT_EQ(response->Header("Content-Length"), "");
}

}  // namespace
}  // namespace convoy
