// convoy-bench's OpenAI client against a local HTTP server (src/http) that answers with canned
// server-sent events: what it sends, how it reads a stream written in odd pieces, how it reports
// failures, and that cancelling closes the connection.
#include "bench/loadgen/openai_client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_exchange.h"
#include "http/http_router.h"
#include "http/http_server.h"
#include "nlohmann/json.hpp"

namespace convoy::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kChunk[] =
    R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny",)"
    R"("choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":null}],"usage":null})";
constexpr char kFinish[] =
    R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny",)"
    R"("choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}],"usage":null})";
constexpr char kUsage[] =
    R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":[],)"
    R"("usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}})";

std::string Event(const std::string& json) { return absl::StrCat("data: ", json, "\n\n"); }

// The events of a good stream of three output events carrying five tokens.
std::string GoodStream() {
  return absl::StrCat(Event(kChunk), Event(kChunk), Event(kChunk), Event(kFinish), Event(kUsage),
                      "data: [DONE]\n\n");
}

PlannedRequest Planned() {
  PlannedRequest r;
  r.index = 3;
  r.class_index = 0;
  r.max_tokens = 5;
  r.prompt_token_ids = {5, 6, 7};
  return r;
}

// Collects the records the client reports.
class Records {
 public:
  std::function<void(RequestRecord)> Callback() {
    return [this](RequestRecord r) {
      absl::MutexLock lock(&mu_);
      records_.push_back(std::move(r));
    };
  }
  std::vector<RequestRecord> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(records_);
  }

 private:
  absl::Mutex mu_;
  std::vector<RequestRecord> records_ ABSL_GUARDED_BY(mu_);
};

class OpenAiClientTest : public ::testing::Test {
 protected:
  // Serves `handler` on POST /v1/completions and makes a client for it, with `api_key`.
  void Serve(HttpHandler handler, std::string api_key = "") {
    HttpRouter router;
    ASSERT_TRUE(router.Add("POST", "/v1/completions", std::move(handler)).ok());
    HttpServerOptions options;
    options.listen_address = "127.0.0.1";
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(options, std::move(router));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    OpenAiClientOptions client_options;
    client_options.address = absl::StrCat("127.0.0.1:", server_->port());
    client_options.model = "tiny";
    client_options.api_key = std::move(api_key);
    absl::StatusOr<std::unique_ptr<RequestClient>> client =
        MakeOpenAiClient(client_options, SteadyClock::now());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Sends one request and returns its record.
  RequestRecord RunOne() {
    client_->Start(Planned(), records_.Callback());
    EXPECT_TRUE(client_->WaitForIdle(absl::Now() + absl::Seconds(30)));
    std::vector<RequestRecord> records = records_.Take();
    EXPECT_THAT(records, SizeIs(1));
    return records.empty() ? RequestRecord() : records[0];
  }

  void TearDown() override {
    if (client_ != nullptr) {
      client_->CancelAll();
      client_->WaitForIdle(absl::InfiniteFuture());
    }
    client_.reset();
    if (server_ != nullptr) server_->Stop(absl::ZeroDuration());
  }

  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<RequestClient> client_;
  Records records_;
};

// Writes `stream` as a streamed response in pieces of `piece` bytes, then ends it.
void StreamInPieces(HttpExchange& exchange, const std::string& stream, size_t piece) {
  ASSERT_TRUE(exchange.StartStream(200, "text/event-stream").ok());
  for (size_t i = 0; i < stream.size(); i += piece) {
    ASSERT_TRUE(exchange.Write(stream.substr(i, piece)).ok());
  }
  ASSERT_TRUE(exchange.Finish().ok());
}

TEST_F(OpenAiClientTest, SendsTheCompletionRequest) {
  absl::Mutex mu;
  HttpRequest seen;
  Serve([&](const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
    {
      absl::MutexLock lock(&mu);
      seen = request;
    }
    StreamInPieces(*exchange, GoodStream(), 1 << 20);
  });
  const RequestRecord record = RunOne();
  EXPECT_TRUE(record.completed) << record.error;
  absl::MutexLock lock(&mu);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/v1/completions");
  ASSERT_NE(seen.FindHeader("Content-Type"), nullptr);
  EXPECT_EQ(*seen.FindHeader("Content-Type"), "application/json");
  const nlohmann::json body = nlohmann::json::parse(seen.body);
  EXPECT_EQ(body["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(seen.FindHeader("Authorization"), nullptr);  // no key given, none sent
}

TEST_F(OpenAiClientTest, SendsTheApiKey) {
  absl::Mutex mu;
  std::string authorization;
  Serve(
      [&](const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
        {
          absl::MutexLock lock(&mu);
          const std::string* header = request.FindHeader("Authorization");
          authorization = header == nullptr ? "(none)" : *header;
        }
        StreamInPieces(*exchange, GoodStream(), 1 << 20);
      },
      "victim-key-0123456789");
  const RequestRecord record = RunOne();
  EXPECT_TRUE(record.completed) << record.error;
  absl::MutexLock lock(&mu);
  EXPECT_EQ(authorization, "Bearer victim-key-0123456789");
}

TEST_F(OpenAiClientTest, ReadsAStreamWrittenInOddPieces) {
  for (size_t piece : {size_t{1}, size_t{7}, size_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat("pieces of ", piece));
    TearDown();
    Serve([piece](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
      StreamInPieces(*exchange, GoodStream(), piece);
    });
    const RequestRecord record = RunOne();
    EXPECT_TRUE(record.completed) << record.error;
    EXPECT_EQ(record.output_tokens, 5);    // from the usage
    EXPECT_EQ(record.output_messages, 3);  // one arrival per output event
    EXPECT_THAT(record.token_gaps_s, SizeIs(2));
    EXPECT_EQ(record.prompt_tokens, 3);
    EXPECT_GE(record.first_token_s, record.send_s);
    EXPECT_GE(record.end_s, record.first_token_s);
  }
}

TEST_F(OpenAiClientTest, HttpErrorStatus) {
  Serve([](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    ASSERT_TRUE(exchange
                    ->Respond(429, "application/json",
                              R"({"error":{"message":"the queue is full","type":)"
                              R"("rate_limit_error","param":null,"code":"queue_full"}})")
                    .ok());
  });
  const RequestRecord record = RunOne();
  EXPECT_FALSE(record.completed);
  EXPECT_EQ(record.error, "http 429: the queue is full");
}

TEST_F(OpenAiClientTest, ErrorEventAfterOutput) {
  Serve([](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    StreamInPieces(*exchange,
                   absl::StrCat(Event(kChunk),
                                Event(R"({"error":{"message":"deadline exceeded","type":)"
                                      R"("server_error","param":null,"code":"timeout"}})"),
                                "data: [DONE]\n\n"),
                   5);
  });
  const RequestRecord record = RunOne();
  EXPECT_FALSE(record.completed);
  EXPECT_EQ(record.error, "deadline exceeded");
  EXPECT_EQ(record.output_messages, 1);
}

TEST_F(OpenAiClientTest, StreamEndingWithoutDone) {
  Serve([](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    StreamInPieces(*exchange, absl::StrCat(Event(kChunk), Event(kFinish)), 1 << 20);
  });
  const RequestRecord record = RunOne();
  EXPECT_FALSE(record.completed);
  EXPECT_THAT(record.error, HasSubstr("[DONE]"));
}

TEST_F(OpenAiClientTest, NoServerListening) {
  Serve([](const HttpRequest&, std::shared_ptr<HttpExchange>) {});
  server_->Stop(absl::ZeroDuration());  // the port is closed now
  const RequestRecord record = RunOne();
  EXPECT_FALSE(record.completed);
  EXPECT_THAT(record.error, HasSubstr("connect"));
}

TEST_F(OpenAiClientTest, CancelAllClosesTheConnection) {
  absl::Notification streaming, closed;
  absl::Mutex mu;
  std::shared_ptr<HttpExchange> held;  // keeps the stream open
  Serve([&](const HttpRequest&, std::shared_ptr<HttpExchange> exchange) {
    exchange->OnClosed([&closed] { closed.Notify(); });
    ASSERT_TRUE(exchange->StartStream(200, "text/event-stream").ok());
    ASSERT_TRUE(exchange->Write(Event(kChunk)).ok());
    {
      absl::MutexLock lock(&mu);
      held = std::move(exchange);
    }
    streaming.Notify();
  });
  client_->Start(Planned(), records_.Callback());
  ASSERT_TRUE(streaming.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(client_->in_flight(), 1);
  client_->CancelAll();
  ASSERT_TRUE(client_->WaitForIdle(absl::Now() + absl::Seconds(30)));
  const std::vector<RequestRecord> records = records_.Take();
  ASSERT_THAT(records, SizeIs(1));
  EXPECT_FALSE(records[0].completed);
  EXPECT_EQ(records[0].error, "cancelled");
  // The server sees the client go.
  EXPECT_TRUE(closed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  held.reset();
}

TEST(OpenAiClientAddressTest, RefusesAnAddressWithoutPort) {
  OpenAiClientOptions options;
  options.address = "localhost";
  EXPECT_FALSE(MakeOpenAiClient(options, SteadyClock::now()).ok());
  options.address = "localhost:0";
  EXPECT_FALSE(MakeOpenAiClient(options, SteadyClock::now()).ok());
}

}  // namespace
}  // namespace convoy::bench
