#include "http/http_router.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "http/wire.h"

namespace convoy {

absl::Status HttpRouter::Add(absl::string_view method, absl::string_view path,
                             HttpHandler handler) {
  if (!http_internal::IsHttpToken(method)) {
    return absl::InvalidArgumentError(absl::StrCat("'", method, "' is not an HTTP method"));
  }
  if (!absl::StartsWith(path, "/") || absl::StrContains(path, '?')) {
    return absl::InvalidArgumentError(
        absl::StrCat("route path '", path, "' must start with '/' and hold no '?'"));
  }
  if (handler == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("route ", method, " ", path, " has no handler"));
  }
  const bool prefix = absl::EndsWith(path, "/*");
  if (!prefix && absl::StrContains(path, '*')) {
    return absl::InvalidArgumentError(
        absl::StrCat("route path '", path, "' may hold '*' only as its last part, after '/'"));
  }
  auto& methods = routes_[std::string(path)];
  if (!methods.emplace(std::string(method), std::move(handler)).second) {
    return absl::InvalidArgumentError(absl::StrCat("route ", method, " ", path, " added twice"));
  }
  if (prefix && std::find(prefixes_.begin(), prefixes_.end(), path) == prefixes_.end()) {
    prefixes_.emplace_back(path);
    std::sort(prefixes_.begin(), prefixes_.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  }
  return absl::OkStatus();
}

HttpRouter::Match HttpRouter::Find(absl::string_view method, absl::string_view path) const {
  Match match;
  auto by_path = routes_.find(path);
  if (by_path == routes_.end() || absl::EndsWith(path, "/*")) {
    by_path = routes_.end();
    for (const std::string& prefix : prefixes_) {
      const absl::string_view under = absl::string_view(prefix).substr(0, prefix.size() - 1);
      if (path.size() > under.size() && absl::StartsWith(path, under)) {
        by_path = routes_.find(prefix);
        break;
      }
    }
  }
  if (by_path == routes_.end()) return match;
  const auto& methods = by_path->second;
  match.path_known = true;
  if (auto it = methods.find(method); it != methods.end()) {
    match.handler = &it->second;
  } else if (method == "HEAD") {
    if (auto get = methods.find("GET"); get != methods.end()) {
      match.handler = &get->second;
      match.head_only = true;
    }
  }
  if (match.handler != nullptr) return match;
  std::vector<std::string> allowed;
  for (const auto& [name, handler] : methods) allowed.push_back(name);
  if (methods.count("GET") > 0 && methods.count("HEAD") == 0) allowed.push_back("HEAD");
  match.allow = absl::StrJoin(allowed, ", ");
  return match;
}

}  // namespace convoy
