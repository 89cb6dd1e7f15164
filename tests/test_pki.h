// A throwaway PKI for the TLS tests, made with the openssl command: two CAs, a server
// certificate for 127.0.0.1 (and localhost) from the first, a client certificate from the first.
#ifndef CONVOY_TESTS_TEST_PKI_H_
#define CONVOY_TESTS_TEST_PKI_H_

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace convoy::testing {

struct Pki {
  std::string dir;
  std::string ca_cert, ca_key, other_ca_cert, other_ca_key;
  std::string server_cert, server_key, client_cert, client_key;
};

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Makes the PKI's files under `dir` (created); a failed openssl command fails the test.
inline Pki MakePki(const std::string& dir) {
  std::filesystem::create_directories(dir);
  Pki pki{dir,
          dir + "/ca.pem",
          dir + "/ca.key",
          dir + "/other_ca.pem",
          dir + "/other_ca.key",
          dir + "/server.pem",
          dir + "/server.key",
          dir + "/client.pem",
          dir + "/client.key"};
  auto run = [](const std::string& command) {
    const ProcessResult result = Execute(command);
    EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  };
  const std::string req = "openssl req -batch -newkey rsa:2048 -nodes";
  run(absl::StrCat(req, " -x509 -days 2 -subj /CN=convoy-test-ca -keyout ", pki.ca_key, " -out ",
                   pki.ca_cert));
  run(absl::StrCat(req, " -x509 -days 2 -subj /CN=convoy-other-ca -keyout ", pki.other_ca_key,
                   " -out ", pki.other_ca_cert));
  auto issue = [&](const std::string& name, const std::string& subject, const std::string& ext,
                   const std::string& cert, const std::string& key) {
    const std::string csr = dir + "/" + name + ".csr";
    const std::string ext_file = dir + "/" + name + ".ext";
    std::ofstream(ext_file) << ext << "\n";
    run(absl::StrCat(req, " -subj ", subject, " -keyout ", key, " -out ", csr));
    run(absl::StrCat("openssl x509 -req -days 2 -in ", csr, " -CA ", pki.ca_cert, " -CAkey ",
                     pki.ca_key, " -CAcreateserial -extfile ", ext_file, " -out ", cert));
  };
  issue("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost", pki.server_cert,
        pki.server_key);
  issue("client", "/CN=convoy-test-client", "extendedKeyUsage=clientAuth", pki.client_cert,
        pki.client_key);
  return pki;
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_TEST_PKI_H_
