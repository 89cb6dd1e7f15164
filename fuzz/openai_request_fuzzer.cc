// ParseOpenAiRequest on an arbitrary body (the first byte picks the endpoint: chat completions,
// completions or responses); a body that parses
// goes through PrepareRequest as the HTTP service sends it, and every error through
// OpenAiErrorFromStatus and ToJson.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontend/openai_api.h"
#include "frontend/request_validation.h"
#include "fuzz_serving_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy;
  if (size == 0) return 0;
  constexpr OpenAiEndpoint kEndpoints[] = {
      OpenAiEndpoint::kChatCompletions, OpenAiEndpoint::kCompletions, OpenAiEndpoint::kResponses};
  const OpenAiEndpoint endpoint = kEndpoints[data[0] % 3];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  ParsedOpenAiRequest parsed = ParseOpenAiRequest(endpoint, body);
  if (!parsed.request.has_value()) {
    (void)parsed.error.ToJson();
    return 0;
  }
  const ServingLimits& limits = fuzz::FuzzServingLimits();
  absl::StatusOr<PreparedRequest> prepared = PrepareRequest(parsed.request->request, limits);
  fuzz::CheckPrepared(prepared, limits);
  if (!prepared.ok()) (void)OpenAiErrorFromStatus(prepared.status(), endpoint).ToJson();
  return 0;
}
