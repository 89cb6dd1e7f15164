// The JSON body of every error the HTTP server and its handlers send, in the shape of the OpenAI
// API (which clients of the OpenAI layer parse):
//   {"error": {"message": "...", "type": "invalid_request_error", "code": "not_found"}}
#ifndef CONVOY_HTTP_HTTP_ERROR_H_
#define CONVOY_HTTP_HTTP_ERROR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace convoy {

inline constexpr char kJsonContentType[] = "application/json";

// The error type for an HTTP status: "invalid_request_error" for 4xx, "server_error" for 5xx.
absl::string_view HttpErrorType(int status);

// The error body; an empty `code` is written as null. `message` may hold any bytes (invalid
// UTF-8 is replaced, never refused).
std::string HttpErrorBody(absl::string_view message, absl::string_view type,
                          absl::string_view code);

}  // namespace convoy

#endif  // CONVOY_HTTP_HTTP_ERROR_H_
