// API keys: who may call the server, and the highest priority each caller may claim. Every
// protocol asks the same object (through GenerationHub::Authenticate): gRPC with its
// `authorization` metadata, HTTP with its Authorization header, both "Bearer KEY".
#ifndef CONVOY_FRONTEND_API_KEYS_H_
#define CONVOY_FRONTEND_API_KEYS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convoy/v1/server_config.pb.h"

namespace convoy {

// Who a request comes from.
struct Caller {
  // The key's name; empty when the server asks for no key.
  std::string key_name;
  // The highest priority (the smallest level) the caller may claim; 1: any.
  int32_t max_priority = 1;
};

// Immutable; thread-safe.
class ApiKeys {
 public:
  // No keys: every caller is let in.
  ApiKeys() = default;
  // The keys of frontend.api_key and of frontend.api_key_file (an ApiKeyList), checked as the
  // config's own (names and keys unique across both, max_priority in 1..priority_levels).
  // INVALID_ARGUMENT or NOT_FOUND naming the file and the field at fault.
  static absl::StatusOr<std::shared_ptr<const ApiKeys>> FromConfig(
      const v1::FrontendConfig& frontend, uint32_t priority_levels);

  bool enabled() const { return !keys_.empty(); }
  int size() const { return static_cast<int>(keys_.size()); }

  // `authorization`: the header's value, "Bearer KEY" (empty when the request has none).
  // UNAUTHENTICATED when keys are enabled and it names none of them.
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization) const;

 private:
  std::vector<v1::ApiKey> keys_;
};

// Holds a request's priority (0: the server's default level) to what `caller` may claim.
// INVALID_ARGUMENT naming `priority` when it claims a higher one; an unset priority whose default
// level is higher than the cap runs at the cap.
absl::Status CapPriority(const Caller& caller, int32_t default_priority_level, int32_t* priority);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_API_KEYS_H_
