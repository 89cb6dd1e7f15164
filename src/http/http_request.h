// One HTTP request as the server hands it to a handler: the request line, the header fields in
// the order they came, and the whole body (bounded by HttpServerOptions::max_body_bytes).
#ifndef CONVOY_HTTP_HTTP_REQUEST_H_
#define CONVOY_HTTP_HTTP_REQUEST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace convoy {

// Header fields as (name, value) pairs, in order; a name may repeat.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // as sent: "/v1/completions?stream=1"
  std::string path;    // the target up to '?'
  std::string query;   // the target after '?' (without it); empty when there is none
  int version = 11;    // 10 for HTTP/1.0, 11 for HTTP/1.1
  HttpHeaders headers;
  std::string body;
  // The client's IP address (a proxy's, when one is in front); empty when it cannot be read.
  std::string remote_address;

  // The value of the first field called `name` (compared without case), or null.
  const std::string* FindHeader(absl::string_view name) const;
};

}  // namespace convoy

#endif  // CONVOY_HTTP_HTTP_REQUEST_H_
