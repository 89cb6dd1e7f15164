#include "http/http_request.h"

#include "absl/strings/match.h"

namespace convoy {

const std::string* HttpRequest::FindHeader(absl::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (absl::EqualsIgnoreCase(field, name)) return &value;
  }
  return nullptr;
}

}  // namespace convoy
