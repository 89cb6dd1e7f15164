#include "http/wire.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/write.hpp"
#include "http/http_error.h"

namespace convoy::http_internal {
namespace {

namespace http = boost::beast::http;

bool IsFieldValue(absl::string_view text) {
  return text.find_first_of(absl::string_view("\r\n\0", 3)) == absl::string_view::npos;
}

}  // namespace

bool IsHttpToken(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    if (absl::string_view("!#$%&'*+-.^_`|~").find(c) == absl::string_view::npos) return false;
  }
  return true;
}

absl::Status CheckResponse(int status, absl::string_view content_type, const HttpHeaders& headers) {
  if (status < 200 || status > 599) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP status ", status, " is not a final status (200..599)"));
  }
  if (!IsFieldValue(content_type)) {
    return absl::InvalidArgumentError("the content type holds CR, LF or NUL");
  }
  for (const auto& [name, value] : headers) {
    if (!IsHttpToken(name)) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a header field name"));
    }
    if (!IsFieldValue(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the value of header field ", name, " holds CR, LF or NUL"));
    }
    for (absl::string_view own : {"Content-Length", "Transfer-Encoding", "Connection"}) {
      if (absl::EqualsIgnoreCase(name, own)) {
        return absl::InvalidArgumentError(
            absl::StrCat("header field ", name, " is set by the server, not by a handler"));
      }
    }
  }
  return absl::OkStatus();
}

std::string SerializeHead(const ResponseHead& head) {
  http::response<http::empty_body> response;
  response.version(head.version);
  response.result(static_cast<unsigned>(head.status));
  response.set(http::field::server, "convoy");
  if (!head.content_type.empty()) {
    response.set(http::field::content_type,
                 boost::beast::string_view(head.content_type.data(), head.content_type.size()));
  }
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) response.insert(name, value);
  }
  if (head.content_length.has_value()) {
    response.content_length(*head.content_length);
  } else if (head.version >= 11) {
    response.chunked(true);
  }
  response.keep_alive(head.keep_alive);
  std::ostringstream out;
  out << response.base();
  return std::move(out).str();
}

std::string ErrorResponse(int status, absl::string_view message, absl::string_view code,
                          int version, bool keep_alive, bool head_only,
                          const HttpHeaders& headers) {
  const std::string body = HttpErrorBody(message, HttpErrorType(status), code);
  ResponseHead head;
  head.status = status;
  head.content_type = kJsonContentType;
  head.headers = &headers;
  head.version = version;
  head.keep_alive = keep_alive;
  head.content_length = body.size();
  std::string bytes = SerializeHead(head);
  if (!head_only) bytes += body;
  return bytes;
}

}  // namespace convoy::http_internal
