// The routes of an HTTP server: a handler per method and exact path (the target without its
// query), or per path prefix: a route path ending in "/*" takes every longer path under it
// ("/v1/models/*" takes "/v1/models/tiny"; the handler reads request.path), when no exact route
// has it. Filled before the server starts and read-only afterwards.
#ifndef CONVOY_HTTP_HTTP_ROUTER_H_
#define CONVOY_HTTP_HTTP_ROUTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/http_request.h"

namespace convoy {

class HttpExchange;

// Runs on one of the server's io threads and must not block: it answers through `exchange`, at
// once or later from any thread (see HttpExchange). `request` is the exchange's own copy
// (exchange->request()), valid as long as the exchange.
using HttpHandler =
    std::function<void(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange)>;

class HttpRouter {
 public:
  // INVALID_ARGUMENT when `method` is not an HTTP token, `path` does not start with '/' or holds
  // a '?', or the route exists already. A GET route answers HEAD too, unless HEAD has its own.
  absl::Status Add(absl::string_view method, absl::string_view path, HttpHandler handler);

  struct Match {
    const HttpHandler* handler = nullptr;  // null: no route for this method
    bool path_known = false;               // some method has a route on the path
    bool head_only = false;                // a HEAD request served by the GET handler
    std::string allow;                     // the path's methods, for a 405's Allow header
  };
  Match Find(absl::string_view method, absl::string_view path) const;

 private:
  // path -> method -> handler
  std::map<std::string, std::map<std::string, HttpHandler, std::less<>>, std::less<>> routes_;
  // The prefix routes' paths ("/v1/models/*"), longest first.
  std::vector<std::string> prefixes_;
};

}  // namespace convoy

#endif  // CONVOY_HTTP_HTTP_ROUTER_H_
