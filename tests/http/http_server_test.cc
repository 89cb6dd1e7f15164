// The HTTP server over real loopback sockets: routing, keep-alive, the limits it enforces and
// what it answers to requests that are malformed, too large, too slow or not HTTP at all, after
// which it must go on serving.
#include "http/http_server.h"

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_exchange.h"
#include "http_test_client.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::convoy::testing::TestClient;
using ::convoy::testing::TestResponse;
using ::testing::HasSubstr;

// Routes: GET /hello, POST /echo (the body back, with the query and a header), GET+PUT /both.
HttpRouter TestRoutes() {
  HttpRouter router;
  EXPECT_OK(router.Add("GET", "/hello", [](const HttpRequest&, std::shared_ptr<HttpExchange> x) {
    EXPECT_OK(x->Respond(200, "text/plain", "hello\n"));
  }));
  EXPECT_OK(router.Add("POST", "/echo", [](const HttpRequest& r, std::shared_ptr<HttpExchange> x) {
    const std::string* tag = r.FindHeader("x-TAG");
    EXPECT_OK(x->Respond(200, "application/octet-stream", r.body,
                         {{"X-Query", r.query}, {"X-Tag", tag == nullptr ? "" : *tag}}));
  }));
  for (const char* method : {"GET", "PUT"}) {
    EXPECT_OK(
        router.Add(method, "/both", [](const HttpRequest& r, std::shared_ptr<HttpExchange> x) {
          EXPECT_OK(x->Respond(200, "text/plain", r.method));
        }));
  }
  return router;
}

std::unique_ptr<HttpServer> StartServer(HttpServerOptions options = {},
                                        HttpRouter router = TestRoutes()) {
  options.listen_address = "127.0.0.1";
  options.port = 0;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, std::move(router));
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

// The server answers GET /hello on a fresh connection.
void ExpectServing(const HttpServer& server) {
  auto client = TestClient::Connect(server.port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->SendRequest("GET", "/hello"));
  std::string error;
  std::optional<TestResponse> response = client->ReadResponse(false, &error);
  ASSERT_TRUE(response.has_value()) << error;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello\n");
}

// The error body's message, checked to have the OpenAI shape.
std::string ErrorMessage(const TestResponse& response) {
  EXPECT_EQ(response.Header("Content-Type"), "application/json");
  const nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
  EXPECT_TRUE(body.contains("error")) << response.body;
  if (!body.contains("error")) return "";
  const nlohmann::json& error = body["error"];
  EXPECT_TRUE(error["message"].is_string()) << response.body;
  EXPECT_TRUE(error["type"].is_string()) << response.body;
  EXPECT_TRUE(error.contains("code")) << response.body;
  return error["message"].is_string() ? error["message"].get<std::string>() : "";
}

TEST(HttpServerTest, RoutesByMethodAndExactPath) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);

  ASSERT_TRUE(client->SendRequest("POST", "/echo?a=1&b=2", "the body", "X-Tag: seven\r\n"));
  std::optional<TestResponse> echo = client->ReadResponse();
  ASSERT_TRUE(echo.has_value());
  EXPECT_EQ(echo->status, 200);
  EXPECT_EQ(echo->body, "the body");
  EXPECT_EQ(echo->Header("X-Query"), "a=1&b=2");
  EXPECT_EQ(echo->Header("X-Tag"), "seven");
  EXPECT_EQ(echo->Header("Content-Length"), "8");

  ASSERT_TRUE(client->SendRequest("PUT", "/both"));
  std::optional<TestResponse> put = client->ReadResponse();
  ASSERT_TRUE(put.has_value());
  EXPECT_EQ(put->body, "PUT");

  ASSERT_TRUE(client->SendRequest("GET", "/hello/"));
  std::optional<TestResponse> not_found = client->ReadResponse();
  ASSERT_TRUE(not_found.has_value());
  EXPECT_EQ(not_found->status, 404);
  EXPECT_THAT(ErrorMessage(*not_found), HasSubstr("GET /hello/"));

  ASSERT_TRUE(client->SendRequest("DELETE", "/both"));
  std::optional<TestResponse> wrong_method = client->ReadResponse();
  ASSERT_TRUE(wrong_method.has_value());
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->Header("Allow"), "GET, PUT, HEAD");
  EXPECT_THAT(ErrorMessage(*wrong_method), HasSubstr("DELETE"));
  EXPECT_TRUE(wrong_method->keep_alive) << "a 404 or 405 keeps the connection";

  ASSERT_TRUE(client->SendRequest("HEAD", "/hello"));
  std::optional<TestResponse> head = client->ReadResponse(/*head_request=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("Content-Length"), "6");
  EXPECT_EQ(head->body, "");
  // The connection is still in step: the HEAD response had no body.
  ASSERT_TRUE(client->SendRequest("GET", "/hello"));
  std::optional<TestResponse> after_head = client->ReadResponse();
  ASSERT_TRUE(after_head.has_value());
  EXPECT_EQ(after_head->body, "hello\n");
}

TEST(HttpServerTest, KeepsAConnectionForManyRequestsAndAnswersPipelinedOnesInOrder) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 20; ++i) {
    const std::string body = absl::StrCat("request ", i);
    ASSERT_TRUE(client->SendRequest("POST", "/echo", body));
    std::optional<TestResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.has_value()) << "request " << i;
    EXPECT_EQ(response->body, body);
    EXPECT_TRUE(response->keep_alive);
  }
  EXPECT_EQ(server->open_connections(), 1);

  std::string pipelined;
  for (int i = 0; i < 5; ++i) {
    absl::StrAppend(&pipelined, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n", i);
  }
  ASSERT_TRUE(client->Send(pipelined));
  for (int i = 0; i < 5; ++i) {
    std::optional<TestResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.has_value()) << "pipelined request " << i;
    EXPECT_EQ(response->body, absl::StrCat(i));
  }

  ASSERT_TRUE(client->SendRequest("GET", "/hello", "", "Connection: close\r\n"));
  std::optional<TestResponse> last = client->ReadResponse();
  ASSERT_TRUE(last.has_value());
  EXPECT_FALSE(last->keep_alive);
  EXPECT_TRUE(client->WaitForClose());
}

TEST(HttpServerTest, AnHttp10RequestGetsItsAnswerAndTheConnectionCloses) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET /hello HTTP/1.0\r\n\r\n"));
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->version, 10);
  EXPECT_EQ(response->body, "hello\n");
  EXPECT_TRUE(client->WaitForClose());
}

// A client that sends its request and shuts its sending side at once (as `nc -N` does) still
// gets the answer its handler gave at once (a handler that answers later finds it gone:
// HttpExchangeTest), many times over.
TEST(HttpServerTest, AClientThatHalfClosesAfterItsRequestGetsTheImmediateAnswer) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (int round = 0; round < 50; ++round) {
    auto client = TestClient::Connect(server->port());
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->SendRequest("POST", "/echo", "{not json", "Connection: close\r\n"));
    client->HalfClose();
    std::string error;
    std::optional<TestResponse> response = client->ReadResponse(false, &error);
    ASSERT_TRUE(response.has_value()) << "round " << round << ": " << error;
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "{not json");
    EXPECT_TRUE(client->WaitForClose());
  }
  ExpectServing(*server);
}

TEST(HttpServerTest, ABodyOverTheLimitIs413AndTheServerServesOn) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);

  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->SendRequest("POST", "/echo", std::string(1000, 'a')));
  std::optional<TestResponse> at_limit = client->ReadResponse();
  ASSERT_TRUE(at_limit.has_value());
  EXPECT_EQ(at_limit->status, 200);
  EXPECT_EQ(at_limit->body.size(), 1000u);

  // Refused from its Content-Length, before the body is sent.
  ASSERT_TRUE(client->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"));
  std::optional<TestResponse> declared = client->ReadResponse();
  ASSERT_TRUE(declared.has_value());
  EXPECT_EQ(declared->status, 413);
  EXPECT_THAT(ErrorMessage(*declared), HasSubstr("1000 bytes"));
  EXPECT_FALSE(declared->keep_alive);
  EXPECT_TRUE(client->WaitForClose());

  // A chunked body is refused once it passes the limit.
  auto chunked = TestClient::Connect(server->port());
  ASSERT_NE(chunked, nullptr);
  std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) absl::StrAppend(&request, "1f4\r\n", std::string(500, 'b'), "\r\n");
  absl::StrAppend(&request, "0\r\n\r\n");
  ASSERT_TRUE(chunked->Send(request));
  std::optional<TestResponse> too_long = chunked->ReadResponse();
  ASSERT_TRUE(too_long.has_value());
  EXPECT_EQ(too_long->status, 413);

  ExpectServing(*server);
}

TEST(HttpServerTest, AHeaderOverTheLimitIs431) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->SendRequest("GET", "/hello", "",
                                  absl::StrCat("X-Big: ", std::string(2000, 'x'), "\r\n")));
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 431);
  EXPECT_THAT(ErrorMessage(*response), HasSubstr("1024 bytes"));
  ExpectServing(*server);
}

TEST(HttpServerTest, MalformedRequestsAre400AndTheServerServesOn) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> malformed = {
      "GET /hello HTTP/9\r\n\r\n",                           // bad version
      "GET /hello FTP/1.1\r\n\r\n",                          // not HTTP
      "G(T /hello HTTP/1.1\r\n\r\n",                         // bad method
      "GET /hello HTTP/1.1\r\nNo colon here\r\n\r\n",        // bad field
      "GET /hello HTTP/1.1\r\nBad Name: x\r\n\r\n",          // space in a name
      "POST /echo HTTP/1.1\r\nContent-Length: ten\r\n\r\n",  // bad length
      "POST /echo HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  // bad chunk size
  };
  for (const std::string& request : malformed) {
    SCOPED_TRACE(request);
    auto client = TestClient::Connect(server->port());
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->Send(request));
    std::optional<TestResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 400);
    EXPECT_THAT(ErrorMessage(*response), HasSubstr("malformed HTTP request"));
    EXPECT_TRUE(client->WaitForClose());
  }
  ExpectServing(*server);
}

TEST(HttpServerTest, GarbageBytesAreRefusedAndTheServerServesOn) {
  HttpServerOptions options;
  options.request_timeout = absl::Milliseconds(500);  // for bytes that never end a request line
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  std::mt19937 random(7);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::string garbage(1 + random() % 4096, '\0');
    for (char& c : garbage) c = static_cast<char>(random() % 256);
    if (round == 0) garbage = std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
    auto client = TestClient::Connect(server->port());
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->Send(garbage));
    // A 400 (or, for bytes that never end a request line, a 408) and the close; nothing else.
    std::string received;
    ASSERT_TRUE(client->WaitForClose(&received));
    EXPECT_THAT(received, ::testing::AnyOf(::testing::StartsWith("HTTP/1.1 400 Bad Request\r\n"),
                                           ::testing::StartsWith("HTTP/1.1 408 ")));
  }
  ExpectServing(*server);
}

TEST(HttpServerTest, AHalfSentRequestIsAnswered408AndTheServerServesOn) {
  HttpServerOptions options;
  options.request_timeout = absl::Milliseconds(200);
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);

  auto half_header = TestClient::Connect(server->port());
  ASSERT_NE(half_header, nullptr);
  ASSERT_TRUE(half_header->Send("GET /hello HTTP/1.1\r\nHost: x\r\n"));
  auto half_body = TestClient::Connect(server->port());
  ASSERT_NE(half_body, nullptr);
  ASSERT_TRUE(half_body->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  auto silent = TestClient::Connect(server->port());
  ASSERT_NE(silent, nullptr);

  for (TestClient* client : {half_header.get(), half_body.get()}) {
    std::optional<TestResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 408);
    EXPECT_THAT(ErrorMessage(*response), HasSubstr("200ms"));
    EXPECT_TRUE(client->WaitForClose());
  }
  // A connection that sent nothing is closed without an answer.
  std::string received;
  EXPECT_TRUE(silent->WaitForClose(&received));
  EXPECT_EQ(received, "");
  ExpectServing(*server);
}

TEST(HttpServerTest, AnIdleKeepAliveConnectionIsClosedAfterItsTimeout) {
  HttpServerOptions options;
  options.keep_alive_timeout = absl::Milliseconds(100);
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->SendRequest("GET", "/hello"));
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->keep_alive);
  std::string received;
  EXPECT_TRUE(client->WaitForClose(&received));
  EXPECT_EQ(received, "");
}

TEST(HttpServerTest, AnswersExpect100Continue) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = TestClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  std::optional<TestResponse> go_on = client->ReadResponse(/*head_request=*/true);
  ASSERT_TRUE(go_on.has_value());
  EXPECT_EQ(go_on->status, 100);
  ASSERT_TRUE(client->Send("body"));
  std::optional<TestResponse> response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "body");
}

TEST(HttpServerTest, OverMaxConnectionsANewConnectionIsClosedUntilOneEnds) {
  HttpServerOptions options;
  options.max_connections = 2;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<TestClient>> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(TestClient::Connect(server->port()));
    ASSERT_NE(open.back(), nullptr);
    ASSERT_TRUE(open.back()->SendRequest("GET", "/hello"));
    ASSERT_TRUE(open.back()->ReadResponse().has_value());
  }
  auto refused = TestClient::Connect(server->port());
  ASSERT_NE(refused, nullptr);
  refused->SendRequest("GET", "/hello");  // may fail: the server may have closed it already
  std::string received;
  EXPECT_TRUE(refused->WaitForClose(&received));
  EXPECT_EQ(received, "");

  open.front()->Close();
  // Once the server has seen that connection end, a new one is served.
  const absl::Time give_up = absl::Now() + testing::kLiveness;
  bool served = false;
  while (!served && absl::Now() < give_up) {
    auto client = TestClient::Connect(server->port());
    ASSERT_NE(client, nullptr);
    served = client->SendRequest("GET", "/hello") && client->ReadResponse().has_value();
  }
  EXPECT_TRUE(served);
}

TEST(HttpServerTest, RefusesBadOptionsABadAddressAndABusyPort) {
  HttpServerOptions options;
  options.listen_address = "not-an-address";
  EXPECT_THAT(HttpServer::Start(options, HttpRouter()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not-an-address")));
  options.listen_address = "127.0.0.1";
  options.port = 70000;
  EXPECT_THAT(HttpServer::Start(options, HttpRouter()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("70000")));
  options.port = 0;
  options.io_threads = 0;
  EXPECT_THAT(HttpServer::Start(options, HttpRouter()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("io_threads")));
  options.io_threads = 1;
  options.request_timeout = absl::ZeroDuration();
  EXPECT_THAT(HttpServer::Start(options, HttpRouter()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_timeout")));
  options.request_timeout = absl::Seconds(1);

  auto first = HttpServer::Start(options, HttpRouter());
  ASSERT_OK(first);
  options.port = (*first)->port();
  EXPECT_THAT(HttpServer::Start(options, HttpRouter()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(absl::StrCat("cannot bind 127.0.0.1:", options.port))));
  options.listen_address = "[::1]";
  options.port = 0;
  // Where the machine has IPv6 loopback, brackets are accepted; where not, the bind fails.
  auto v6 = HttpServer::Start(options, HttpRouter());
  if (!v6.ok()) {
    EXPECT_THAT(v6, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("[::1]")));
  }
}

TEST(HttpRouterTest, RefusesBadRoutes) {
  HttpRouter router;
  auto handler = [](const HttpRequest&, std::shared_ptr<HttpExchange>) {};
  EXPECT_THAT(router.Add("GET", "health", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must start with '/'")));
  EXPECT_THAT(router.Add("GET", "/a?b", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'/a?b'")));
  EXPECT_THAT(router.Add("G T", "/a", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an HTTP method")));
  EXPECT_THAT(router.Add("GET", "/a", nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no handler")));
  EXPECT_OK(router.Add("GET", "/a", handler));
  EXPECT_THAT(router.Add("GET", "/a", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("added twice")));
  EXPECT_THAT(router.Add("GET", "/a*", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'*' only as its last")));
  EXPECT_THAT(router.Add("GET", "/*/b", handler),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'*' only as its last")));
}

// A route ending in "/*" takes the longer paths under it that no exact route has; the longest
// prefix wins.
TEST(HttpRouterTest, APrefixRouteTakesThePathsUnderIt) {
  HttpRouter router;
  std::string called;
  auto named = [&called](std::string name) {
    return [&called, name](const HttpRequest&, std::shared_ptr<HttpExchange>) { called = name; };
  };
  ASSERT_OK(router.Add("GET", "/v1/models", named("list")));
  ASSERT_OK(router.Add("GET", "/v1/models/*", named("one")));
  ASSERT_OK(router.Add("GET", "/v1/models/special", named("special")));
  ASSERT_OK(router.Add("GET", "/v1/*", named("v1")));
  auto route = [&](absl::string_view method, absl::string_view path) -> std::string {
    called.clear();
    const HttpRouter::Match match = router.Find(method, path);
    if (match.handler == nullptr) return match.path_known ? "405 " + match.allow : "404";
    (*match.handler)(HttpRequest(), nullptr);
    return called;
  };
  EXPECT_EQ(route("GET", "/v1/models"), "list");
  EXPECT_EQ(route("GET", "/v1/models/tiny"), "one");
  EXPECT_EQ(route("GET", "/v1/models/org/name"), "one");
  EXPECT_EQ(route("HEAD", "/v1/models/tiny"), "one");
  EXPECT_EQ(route("GET", "/v1/models/special"), "special");
  EXPECT_EQ(route("GET", "/v1/models/"), "v1");  // nothing after the prefix: the shorter one
  EXPECT_EQ(route("GET", "/v1/other"), "v1");
  EXPECT_EQ(route("GET", "/v1/"), "404");
  EXPECT_EQ(route("GET", "/v2/models/tiny"), "404");
  EXPECT_EQ(route("POST", "/v1/models/tiny"), "405 GET, HEAD");
}

}  // namespace
}  // namespace convoy
