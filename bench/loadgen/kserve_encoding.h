// convoy-bench's requests as KServe v2 messages (proto/inference/grpc_service.proto), the way
// tritonclient sends them to an LLM model: the prompt's token ids as the input `input_ids`
// (INT32, shape [n], its bytes in raw_input_contents), max_tokens and sampling as request
// parameters; and what each ModelStreamInfer response says.
#ifndef CONVOY_BENCH_LOADGEN_KSERVE_ENCODING_H_
#define CONVOY_BENCH_LOADGEN_KSERVE_ENCODING_H_

#include <cstdint>
#include <string>

#include "bench/loadgen/request_source.h"
#include "inference/grpc_service.pb.h"

namespace convoy::bench {

// The request for `planned` to model `model` (version left to the server). Its id is
// "bench-<index>", as the native client's client_request_id; parameters max_tokens,
// temperature, seed, and priority when it is not 0.
inference::ModelInferRequest BuildKServeRequest(const PlannedRequest& planned,
                                                const std::string& model);

// One ModelStreamInfer response, read.
struct KServeStreamMessage {
  std::string error;          // error_message; empty when the message is a response
  int64_t output_ids = 0;     // elements of output_ids (by its shape); 0 when absent
  bool final = false;         // parameter triton_final_response is true
  std::string finish_reason;  // parameter finish_reason ("length", "stop"); empty when absent
};
KServeStreamMessage ReadKServeStreamMessage(const inference::ModelStreamInferResponse& message);

}  // namespace convoy::bench

#endif  // CONVOY_BENCH_LOADGEN_KSERVE_ENCODING_H_
