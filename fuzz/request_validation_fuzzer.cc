// PrepareRequest on an InferRequest parsed from arbitrary bytes (protobuf wire format), against
// fixed limits with a tokenizer and a chat template, so that token ids, text and messages all
// reach validation.
#include <cstddef>
#include <cstdint>

#include "convoy/v1/inference.pb.h"
#include "frontend/request_validation.h"
#include "fuzz_serving_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::v1::InferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const convoy::ServingLimits& limits = convoy::fuzz::FuzzServingLimits();
  convoy::fuzz::CheckPrepared(convoy::PrepareRequest(request, limits), limits);
  (void)convoy::RequestDeadline(absl::InfiniteFuture(), request.timeout_microseconds(),
                                absl::FromUnixSeconds(1'800'000'000));
  return 0;
}
