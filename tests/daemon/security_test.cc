// Serving safely: TLS and mutual TLS on the gRPC port (certificates made here, with the openssl
// command, for this test only), and API keys on every protocol (gRPC metadata, KServe, the HTTP
// API), with each key's cap on the priority it may claim; health and metrics need no key.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "http/https_test_client.h"
#include "inference/grpc_service.grpc.pb.h"
#include "metrics/http_get.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"
#include "test_pki.h"

namespace convoy::testing {
namespace {

using ::convoy::testing::HttpsResponse;
using ::convoy::testing::HttpsTestClient;
using ::testing::HasSubstr;

std::shared_ptr<grpc::ChannelCredentials> TlsCredentials(const std::string& ca,
                                                         const std::string& cert = "",
                                                         const std::string& key = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadText(ca);
  if (!cert.empty()) {
    ssl.pem_cert_chain = ReadText(cert);
    ssl.pem_private_key = ReadText(key);
  }
  return grpc::SslCredentials(ssl);
}

// A health check over `credentials`; the call's status. With `expect_served`, the call waits for
// the channel to connect (up to its deadline) rather than failing at the first failed attempt:
// Debian's gRPC 1.51 can take a connect still in progress as failed (grpc/grpc#35064), which
// would fail a call the daemon serves. The calls that must be refused fail fast, so that their
// status is the handshake's.
grpc::Status HealthOver(const DaemonProcess& daemon,
                        std::shared_ptr<grpc::ChannelCredentials> credentials,
                        bool expect_served = false) {
  auto channel = grpc::CreateChannel(daemon.address(), std::move(credentials));
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  context.set_wait_for_ready(expect_served);
  grpc::health::v1::HealthCheckResponse response;
  return health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
}

std::string PkiDir(const std::string& name) { return ProcessDir("convoy_security_" + name); }

// A daemon with the server certificate of `pki` (and, with `mutual`, its CA for clients),
// waited for over `credentials`.
std::unique_ptr<DaemonProcess> StartWithTls(const Pki& pki, bool mutual,
                                            std::shared_ptr<grpc::ChannelCredentials> credentials) {
  const std::string model_dir = WriteTestModel("tls", TinyModelConfig());
  const std::string client_ca =
      mutual ? absl::StrCat(" client_ca_file: \"", pki.ca_cert, "\"") : "";
  return DaemonProcess::Start(
      model_dir,
      DefaultTestConfig(absl::StrCat("tls { cert_file: \"", pki.server_cert, "\" key_file: \"",
                                     pki.server_key, "\"", client_ca, " }")),
      std::move(credentials));
}

TEST(DaemonTlsTest, ServesClientsThatTrustItsCaAndRefusesOthers) {
  const Pki pki = MakePki(PkiDir("tls"));
  auto daemon = StartWithTls(pki, /*mutual=*/false, TlsCredentials(pki.ca_cert));
  ASSERT_NE(daemon, nullptr);
  // Served over TLS (Start waited for SERVING over it); an inference call too.
  v1::InferResponse response;
  const grpc::Status served = CallInfer(*daemon->inference(), MakeRequest({1, 2, 3}, 4), &response);
  ASSERT_TRUE(served.ok()) << served.error_message();
  EXPECT_EQ(response.token_ids_size(), 4);
  EXPECT_THAT(daemon->WaitForLog("(TLS"), HasSubstr("(TLS"));

  const grpc::Status wrong_ca = HealthOver(*daemon, TlsCredentials(pki.other_ca_cert));
  EXPECT_EQ(wrong_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << wrong_ca.error_message();
  const grpc::Status plain = HealthOver(*daemon, grpc::InsecureChannelCredentials());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
}

TEST(DaemonTlsTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  const Pki pki = MakePki(PkiDir("mtls"));
  auto daemon = StartWithTls(pki, /*mutual=*/true,
                             TlsCredentials(pki.ca_cert, pki.client_cert, pki.client_key));
  ASSERT_NE(daemon, nullptr);
  EXPECT_THAT(daemon->WaitForLog("(mutual TLS"), HasSubstr("(mutual TLS"));
  const grpc::Status trusted =
      HealthOver(*daemon, TlsCredentials(pki.ca_cert, pki.client_cert, pki.client_key),
                 /*expect_served=*/true);
  EXPECT_TRUE(trusted.ok()) << trusted.error_message();
  const grpc::Status no_cert = HealthOver(*daemon, TlsCredentials(pki.ca_cert));
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << no_cert.error_message();
  // A certificate the server's client CA did not sign: the other CA's own, with its key.
  const grpc::Status foreign =
      HealthOver(*daemon, TlsCredentials(pki.ca_cert, pki.other_ca_cert, pki.other_ca_key));
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAVAILABLE) << foreign.error_message();
}

TEST(DaemonTlsTest, UnreadableTlsFilesStopTheStartNamingTheField) {
  const std::string model_dir = WriteTestModel("tls", TinyModelConfig());
  const std::string dir = PkiDir("missing");
  std::filesystem::create_directories(dir);
  const std::string missing = dir + "/nothing.pem";
  const std::string config = dir + "/config.pbtxt";
  std::ofstream(config) << DefaultTestConfig(
      absl::StrCat("tls { cert_file: \"", missing, "\" key_file: \"", missing, "\" }"));
  const ProcessResult result =
      Execute(absl::StrCat(CONVOYD_PATH, " --model ", model_dir, " --config ", config,
                           " --port 0 --http-port 0 --metrics-port 0"));
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out,
              HasSubstr(absl::StrCat("frontend.tls.cert_file: cannot read '", missing)));
}

// frontend.http_tls: the OpenAI API and health over HTTPS (mutual TLS here), beside plain gRPC.
TEST(DaemonTlsTest, HttpsServesTheHttpApiToClientsWithACertificateFromTheCa) {
  const Pki pki = MakePki(PkiDir("https"));
  const std::string model_dir = WriteTestModel("https", TinyModelConfig());
  auto daemon = DaemonProcess::Start(
      model_dir, DefaultTestConfig(absl::StrCat("http_tls { cert_file: \"", pki.server_cert,
                                                "\" key_file: \"", pki.server_key,
                                                "\" client_ca_file: \"", pki.ca_cert, "\" }")));
  ASSERT_NE(daemon, nullptr);
  EXPECT_THAT(daemon->WaitForLog("HTTP at https://"), HasSubstr("HTTP at https://"));
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> client =
      HttpsTestClient::Connect(daemon->http_port(), pki.ca_cert, pki.client_cert, pki.client_key);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<HttpsResponse> ready = (*client)->Request("GET", "/ready");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status, 200);
  absl::StatusOr<HttpsResponse> models = (*client)->Request("GET", "/v1/models");
  ASSERT_TRUE(models.ok()) << models.status();
  const nlohmann::json listed = nlohmann::json::parse(models->body);
  const std::string model = listed["data"][0]["id"].get<std::string>();
  absl::StatusOr<HttpsResponse> completion = (*client)->Request(
      "POST", "/v1/completions",
      nlohmann::json{{"model", model}, {"prompt", {1, 2, 3}}, {"max_tokens", 4}}.dump());
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(nlohmann::json::parse(completion->body)["usage"]["completion_tokens"], 4);

  // No client certificate: refused (at the handshake, or at the latest on the request).
  absl::StatusOr<std::unique_ptr<HttpsTestClient>> anonymous =
      HttpsTestClient::Connect(daemon->http_port(), pki.ca_cert);
  if (anonymous.ok()) {
    EXPECT_FALSE((*anonymous)->Request("GET", "/ready").ok());
  }
  // Plain HTTP gets no answer; gRPC (no TLS configured for it) still serves.
  EXPECT_FALSE(HttpGet(daemon->http_port(), "/ready").ok());
  v1::InferResponse response;
  EXPECT_TRUE(CallInfer(*daemon->inference(), MakeRequest({1, 2, 3}, 2), &response).ok());
}

TEST(DaemonTlsTest, AnHttpsKeyWithoutItsCertificateIsRefusedNamingTheField) {
  const std::string model_dir = WriteTestModel("https", TinyModelConfig());
  const std::string dir = PkiDir("https_half");
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/config.pbtxt";
  std::ofstream(config) << DefaultTestConfig("http_tls { key_file: \"/nonexistent.key\" }");
  const ProcessResult result =
      Execute(absl::StrCat(CONVOYD_PATH, " --model ", model_dir, " --config ", config,
                           " --port 0 --http-port 0 --metrics-port 0"));
  // A config that does not validate is a usage error (exit 2), named at the line of the field set.
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, HasSubstr("config.pbtxt:4: frontend.http_tls.key_file: cert_file and "
                                    "key_file go together"));
}

// API keys: "full" may claim any of the two levels, "background" only level 2.
constexpr char kFullKey[] = "full-key-0123456789abcdef";
constexpr char kBackgroundKey[] = "background-key-0123456789";

class DaemonApiKeyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model_dir = WriteSmolLm2VocabModel("api_keys", 2048, /*chat_template=*/false);
    daemon_ = DaemonProcess::Start(
                  model_dir, DefaultTestConfig(
                                 absl::StrCat("api_key { name: \"full\" key: \"", kFullKey,
                                              "\" } api_key { name: \"background\" key: \"",
                                              kBackgroundKey, "\" max_priority: 2 }"),
                                 "max_batch_size: 8 priority_levels: 2 default_priority_level: 1"))
                  .release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  static grpc::Status Infer(const std::string& key, int32_t priority, v1::InferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kLiveness));
    if (!key.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", key));
    v1::InferRequest request = MakeRequest({1, 2, 3}, 4);
    request.set_priority(priority);
    return daemon_->inference()->Infer(&context, request, response);
  }

  static absl::StatusOr<HttpResponse> Completion(const std::string& key, int32_t priority) {
    std::vector<std::string> headers;
    if (!key.empty()) headers.push_back(absl::StrCat("Authorization: Bearer ", key));
    nlohmann::json body = {{"prompt", "Hello"}, {"max_tokens", 4}};
    if (priority != 0) body["priority"] = priority;
    return HttpCall(daemon_->http_port(), "POST", "/v1/completions", headers, body.dump());
  }

  static DaemonProcess* daemon_;
};

DaemonProcess* DaemonApiKeyTest::daemon_ = nullptr;

TEST_F(DaemonApiKeyTest, GrpcNeedsAValidKey) {
  v1::InferResponse response;
  grpc::Status status = Infer("", 0, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("Authorization: Bearer KEY"));
  status = Infer("not-a-key-of-this-server", 0, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  status = Infer(kFullKey, 0, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.token_ids_size(), 4);

  // Metadata calls too.
  grpc::ClientContext context;
  v1::ServerInfo info;
  EXPECT_EQ(daemon_->inference()->GetServerInfo(&context, {}, &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(DaemonApiKeyTest, KServeNeedsAValidKey) {
  auto kserve = inference::GRPCInferenceService::NewStub(daemon_->channel());
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status = kserve->ModelInfer(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  {
    grpc::ClientContext context;
    inference::ModelInferRequest message;
    auto stream = kserve->ModelStreamInfer(&context);
    inference::ModelStreamInferResponse reply;
    EXPECT_FALSE(stream->Read(&reply));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    inference::ServerLiveResponse live;
    EXPECT_TRUE(kserve->ServerLive(&context, {}, &live).ok()) << "health needs no key";
  }
}

TEST_F(DaemonApiKeyTest, HttpApiNeedsAValidKey) {
  absl::StatusOr<HttpResponse> response = Completion("", 0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 401) << response->body;
  const nlohmann::json error = nlohmann::json::parse(response->body)["error"];
  EXPECT_EQ(error["code"], "invalid_api_key");
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("no API key"));

  response = Completion("wrong-key-0123456789abcdef", 0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 401) << response->body;

  response = HttpCall(daemon_->http_port(), "GET", "/v1/models");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 401) << response->body;

  response = Completion(kFullKey, 0);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 200) << response->body;
}

TEST_F(DaemonApiKeyTest, AKeyCannotClaimAPriorityAboveItsCap) {
  v1::InferResponse response;
  grpc::Status status = Infer(kBackgroundKey, 1, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("priority: 1 is higher than API key 'background'"));
  EXPECT_TRUE(Infer(kBackgroundKey, 2, &response).ok());
  // No priority: the default level (1) is above the cap, so it runs at 2.
  EXPECT_TRUE(Infer(kBackgroundKey, 0, &response).ok());
  EXPECT_TRUE(Infer(kFullKey, 1, &response).ok());

  absl::StatusOr<HttpResponse> http = Completion(kBackgroundKey, 1);
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->status_code, 400) << http->body;
  EXPECT_EQ(nlohmann::json::parse(http->body)["error"]["param"], "priority");
}

TEST_F(DaemonApiKeyTest, HealthAndMetricsNeedNoKey) {
  EXPECT_TRUE(daemon_->WaitUntilServing());  // grpc.health.v1, without a key
  for (const char* path : {"/health", "/ready"}) {
    absl::StatusOr<HttpResponse> response = HttpGet(daemon_->http_port(), path);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status_code, 200) << path;
  }
  absl::StatusOr<HttpResponse> metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status_code, 200);
  EXPECT_THAT(metrics->body, HasSubstr("convoy_config_info"));
}

}  // namespace
}  // namespace convoy::testing
