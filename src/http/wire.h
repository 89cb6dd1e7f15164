// Internal to the HTTP server: what a connection writes (whole responses, response heads,
// chunks), made with Beast's serializer, and the checks on what a handler asks to send.
#ifndef CONVOY_HTTP_WIRE_H_
#define CONVOY_HTTP_WIRE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/http_request.h"

namespace convoy::http_internal {

// One item of a connection's write queue, written in order on its strand.
struct Outgoing {
  enum class Kind {
    kBytes,      // `bytes` as they are (a response, a head, an HTTP/1.0 stream's data)
    kChunk,      // `bytes` as one chunk of a chunked body
    kLastChunk,  // the end of a chunked body
    kAbort,      // close the connection here (a stream its handler dropped unfinished)
  };
  Kind kind = Kind::kBytes;
  std::string bytes;
  size_t counted = 0;          // bytes counted in the exchange's queued_bytes()
  bool ends_response = false;  // the response is whole once this is written
  bool close_after = false;    // close the connection once this is written
};

// RFC 9110's token (a method or a header field name): one or more of its tchar.
bool IsHttpToken(absl::string_view text);

// INVALID_ARGUMENT, naming the problem, for a status outside 200..599, a field name that is not
// a token, a value with CR, LF or NUL, or a field the server sets itself (Content-Length,
// Transfer-Encoding, Connection).
absl::Status CheckResponse(int status, absl::string_view content_type, const HttpHeaders& headers);

struct ResponseHead {
  int status = 200;
  absl::string_view content_type;  // empty: no Content-Type
  const HttpHeaders* headers = nullptr;
  int version = 11;
  bool keep_alive = true;
  // Set: a Content-Length. Unset: a chunked body (HTTP/1.1) or one that ends with the connection
  // (HTTP/1.0; keep_alive must be false).
  std::optional<size_t> content_length;
};

// The status line and header fields, up to and including the empty line.
std::string SerializeHead(const ResponseHead& head);

// A whole response with a JSON error body (http_error.h); the head only when `head_only`.
std::string ErrorResponse(int status, absl::string_view message, absl::string_view code,
                          int version, bool keep_alive, bool head_only,
                          const HttpHeaders& headers = {});

}  // namespace convoy::http_internal

#endif  // CONVOY_HTTP_WIRE_H_
