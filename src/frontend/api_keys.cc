#include "frontend/api_keys.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/text_proto.h"
#include "config/server_config.h"
#include "convoy/status_macros.h"

namespace convoy {
namespace {

// Compares without stopping at the first difference, so that the time taken tells nothing of
// how much of a guess was right.
bool SameSecret(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ApiKeys>> ApiKeys::FromConfig(
    const v1::FrontendConfig& frontend, uint32_t priority_levels) {
  auto keys = std::make_shared<ApiKeys>();
  google::protobuf::RepeatedPtrField<v1::ApiKey> all = frontend.api_key();
  const int from_config = all.size();
  const std::string& file = frontend.api_key_file();
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("frontend.api_key_file: cannot open '", file, "'"));
    }
    std::stringstream text;
    text << in.rdbuf();
    v1::ApiKeyList list;
    google::protobuf::TextFormat::ParseInfoTree tree;
    RETURN_IF_ERROR(ParseTextProto(text.str(), file, &list, &tree));
    for (v1::ApiKey& key : *list.mutable_api_key()) {
      if (!key.has_max_priority()) key.set_max_priority(1);
      *all.Add() = std::move(key);
    }
  }
  for (int i = 0; i < all.size(); ++i) {
    RETURN_IF_ERROR(
        ValidateApiKey(all, i, priority_levels, [&](const char* field, absl::string_view reason) {
          const bool in_file = i >= from_config;
          return absl::InvalidArgumentError(absl::StrCat(in_file ? file : "frontend", ": api_key[",
                                                         in_file ? i - from_config : i, "].", field,
                                                         ": ", reason));
        }));
  }
  keys->keys_.assign(all.begin(), all.end());
  return std::shared_ptr<const ApiKeys>(std::move(keys));
}

absl::StatusOr<Caller> ApiKeys::Authenticate(absl::string_view authorization) const {
  if (keys_.empty()) return Caller();
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "no API key: send it as `Authorization: Bearer KEY` (gRPC: `authorization` metadata)");
  }
  absl::string_view scheme = "Bearer ";
  if (authorization.size() < scheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, scheme.size()), scheme)) {
    return absl::UnauthenticatedError(
        "the authorization is not `Bearer KEY` (the only scheme this server takes)");
  }
  const absl::string_view presented =
      absl::StripAsciiWhitespace(authorization.substr(scheme.size()));
  const v1::ApiKey* match = nullptr;
  for (const v1::ApiKey& key : keys_) {
    if (SameSecret(presented, key.key())) match = &key;
  }
  if (match == nullptr) return absl::UnauthenticatedError("the API key is not valid");
  Caller caller;
  caller.key_name = match->name();
  caller.max_priority = static_cast<int32_t>(match->max_priority());
  return caller;
}

absl::Status CapPriority(const Caller& caller, int32_t default_priority_level, int32_t* priority) {
  if (*priority == 0) {
    if (default_priority_level < caller.max_priority) *priority = caller.max_priority;
    return absl::OkStatus();
  }
  if (*priority < caller.max_priority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority: ", *priority, " is higher than API key '", caller.key_name,
                     "' may claim (", caller.max_priority, " or a larger number)"));
  }
  return absl::OkStatus();
}

}  // namespace convoy
