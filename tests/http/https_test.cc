// HTTPS: the server over TLS on real loopback sockets (certificates made here with the openssl
// command), with a client that verifies it: whole and streamed answers on one connection, mutual
// TLS, and what it does with clients that do not trust it, that speak plain HTTP, or that lack a
// certificate; and TLS material that does not load, refused at start naming the part.
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_server.h"
#include "http_test_client.h"
#include "https_test_client.h"
#include "model/test_dir.h"
#include "status_matchers.h"
#include "test_pki.h"

namespace convoy {
namespace {

using ::convoy::testing::HttpsResponse;
using ::convoy::testing::HttpsTestClient;
using ::convoy::testing::Pki;
using ::convoy::testing::ReadText;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// One PKI for every test of this file.
const Pki& TestPki() {
  static const Pki* pki = new Pki(testing::MakePki(testing::ProcessDir("convoy_https")));
  return *pki;
}

HttpRouter Routes() {
  HttpRouter router;
  EXPECT_OK(router.Add("GET", "/hello", [](const HttpRequest&, std::shared_ptr<HttpExchange> x) {
    EXPECT_OK(x->Respond(200, "text/plain", "hello\n"));
  }));
  EXPECT_OK(router.Add("GET", "/count", [](const HttpRequest&, std::shared_ptr<HttpExchange> x) {
    EXPECT_OK(x->StartStream(200, "text/plain"));
    for (int i = 0; i < 100; ++i) EXPECT_OK(x->Write(absl::StrCat(i, "\n")));
    EXPECT_OK(x->Finish());
  }));
  return router;
}

HttpTlsOptions TlsOptions(const Pki& pki, bool mutual) {
  HttpTlsOptions tls;
  tls.cert_chain = ReadText(pki.server_cert);
  tls.private_key = ReadText(pki.server_key);
  if (mutual) tls.client_ca = ReadText(pki.ca_cert);
  return tls;
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartHttps(HttpTlsOptions tls) {
  HttpServerOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.tls = std::move(tls);
  return HttpServer::Start(options, Routes());
}

std::string Counted() {
  std::string all;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&all, i, "\n");
  return all;
}

TEST(HttpsTest, AnswersWholeAndStreamedResponsesOnOneConnection) {
  const Pki& pki = TestPki();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartHttps(TlsOptions(pki, false));
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> client =
      HttpsTestClient::Connect((*server)->port(), pki.ca_cert);
  ASSERT_OK(client);
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<HttpsResponse> hello = (*client)->Request("GET", "/hello");
    ASSERT_OK(hello);
    EXPECT_EQ(hello->status, 200);
    EXPECT_EQ(hello->body, "hello\n");
    EXPECT_TRUE(hello->keep_alive);
    absl::StatusOr<HttpsResponse> count = (*client)->Request("GET", "/count");
    ASSERT_OK(count);
    EXPECT_EQ(count->body, Counted());
  }
  absl::StatusOr<HttpsResponse> missing = (*client)->Request("GET", "/nothing");
  ASSERT_OK(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ((*server)->open_connections(), 1);
}

TEST(HttpsTest, AClientThatDoesNotTrustTheCertificateIsRefusedAndTheServerServesOn) {
  const Pki& pki = TestPki();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartHttps(TlsOptions(pki, false));
  ASSERT_OK(server);
  EXPECT_THAT(HttpsTestClient::Connect((*server)->port(), pki.other_ca_cert),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("handshake")));
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> client =
      HttpsTestClient::Connect((*server)->port(), pki.ca_cert);
  ASSERT_OK(client);
  ASSERT_OK((*client)->Request("GET", "/hello"));
}

TEST(HttpsTest, PlainHttpToTheHttpsPortGetsNoAnswerAndTheConnectionCloses) {
  const Pki& pki = TestPki();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartHttps(TlsOptions(pki, false));
  ASSERT_OK(server);
  auto plain = testing::TestClient::Connect((*server)->port());
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(plain->SendRequest("GET", "/hello"));
  std::string received;
  EXPECT_TRUE(plain->WaitForClose(&received));
  EXPECT_THAT(received, ::testing::Not(HasSubstr("hello")));
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> client =
      HttpsTestClient::Connect((*server)->port(), pki.ca_cert);
  ASSERT_OK(client);
  ASSERT_OK((*client)->Request("GET", "/hello"));
}

TEST(HttpsTest, MutualTlsServesOnlyClientsWithACertificateFromTheCa) {
  const Pki& pki = TestPki();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartHttps(TlsOptions(pki, true));
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> client =
      HttpsTestClient::Connect((*server)->port(), pki.ca_cert, pki.client_cert, pki.client_key);
  ASSERT_OK(client);
  absl::StatusOr<HttpsResponse> hello = (*client)->Request("GET", "/hello");
  ASSERT_OK(hello);
  EXPECT_EQ(hello->body, "hello\n");

  // Without a certificate, or with one another CA signed: under TLS 1.3 the client's handshake
  // may finish before the server refuses it, so the refusal shows at the latest on the request.
  for (const auto& [cert, key] :
       {std::pair<std::string, std::string>{"", ""}, {pki.other_ca_cert, pki.other_ca_key}}) {
    absl::StatusOr<std::unique_ptr<HttpsTestClient>> refused =
        HttpsTestClient::Connect((*server)->port(), pki.ca_cert, cert, key);
    if (refused.ok()) {
      EXPECT_FALSE((*refused)->Request("GET", "/hello").ok()) << "certificate: '" << cert << "'";
    }
  }
}

TEST(HttpsTest, TlsMaterialThatDoesNotLoadIsRefusedNamingThePart) {
  const Pki& pki = TestPki();
  HttpTlsOptions garbage = TlsOptions(pki, false);
  garbage.cert_chain = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  EXPECT_THAT(StartHttps(garbage),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("certificate chain")));
  HttpTlsOptions foreign_key = TlsOptions(pki, false);
  foreign_key.private_key = ReadText(pki.client_key);
  EXPECT_THAT(StartHttps(foreign_key),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("private key")));
  HttpTlsOptions no_key = TlsOptions(pki, false);
  no_key.private_key.clear();
  EXPECT_THAT(StartHttps(no_key),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("private key")));
  HttpTlsOptions bad_ca = TlsOptions(pki, true);
  bad_ca.client_ca = "not a certificate";
  EXPECT_THAT(StartHttps(bad_ca), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("CA")));
}

}  // namespace
}  // namespace convoy
