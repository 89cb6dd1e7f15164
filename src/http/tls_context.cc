#include "http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"

namespace convoy::http_internal {
namespace {

namespace ssl = boost::asio::ssl;

absl::Status Refused(const char* what, const boost::system::error_code& error) {
  return absl::InvalidArgumentError(
      absl::StrCat("HTTPS: the ", what, " does not load: ", error.message()));
}

// How many PEM certificates `pem` holds before anything that is not one. (Asio's
// add_certificate_authority takes text without any as an empty list, without an error.)
int CountCertificates(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return 0;
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_free(cert);
    ++count;
  }
  BIO_free(bio);
  ERR_clear_error();
  return count;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ssl::context>> MakeTlsContext(const HttpTlsOptions& options) {
  if (options.cert_chain.empty() || options.private_key.empty()) {
    return absl::InvalidArgumentError("HTTPS needs both a certificate chain and its private key");
  }
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  boost::system::error_code error;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       error);
  if (error) return Refused("protocol settings", error);
  context->use_certificate_chain(boost::asio::buffer(options.cert_chain), error);
  if (error) return Refused("certificate chain (PEM)", error);
  // OpenSSL checks here that the key belongs to the certificate ("key values mismatch").
  context->use_private_key(boost::asio::buffer(options.private_key), ssl::context::pem, error);
  if (error) return Refused("private key (PEM)", error);
  if (!options.client_ca.empty()) {
    if (CountCertificates(options.client_ca) == 0) {
      return absl::InvalidArgumentError("HTTPS: the client CA holds no PEM certificate");
    }
    context->add_certificate_authority(boost::asio::buffer(options.client_ca), error);
    if (error) return Refused("client CA (PEM)", error);
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, error);
    if (error) return Refused("client verification settings", error);
  }
  return context;
}

}  // namespace convoy::http_internal
