#include "http/http_error.h"

#include "nlohmann/json.hpp"

namespace convoy {

absl::string_view HttpErrorType(int status) {
  return status >= 500 ? "server_error" : "invalid_request_error";
}

std::string HttpErrorBody(absl::string_view message, absl::string_view type,
                          absl::string_view code) {
  nlohmann::json error = {{"message", message}, {"type", type}, {"code", nullptr}};
  if (!code.empty()) error["code"] = code;
  return nlohmann::json{{"error", std::move(error)}}.dump(
      /*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
      nlohmann::json::error_handler_t::replace);
}

}  // namespace convoy
