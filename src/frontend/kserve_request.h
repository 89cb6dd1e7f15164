// The model convoyd serves over KServe v2 (frontend/kserve_service.h) and what its tensors mean:
// a ModelInferRequest becomes a v1::InferRequest, which PrepareRequest then checks as it checks
// every protocol's, plus how the answer is wanted.
//
// The tensors are those of Triton's LLM backends (vLLM, TensorRT-LLM):
//   inputs   text_input  BYTES, one element (shape [1], or [1, 1] with a batch dimension)
//            input_ids   INT32 or INT64, the prompt's token ids (shape [n] or [1, n])
//            max_tokens, top_k, seed (integers), temperature, top_p (FP32 or FP64), stop (BYTES,
//            any number of stop strings), stream and exclude_input_in_output (BOOL): one
//            element each but stop, each also accepted as a request parameter of its name
//   outputs  text_output BYTES, one element: the generated text
//            output_ids  INT32: the generated token ids
// The request parameters priority (1 is the highest) and timeout (microseconds) are Triton's; the
// parameter n asks for n choices (InferRequest.n, up to request_limits.max_choices), whose
// outputs gain a dimension of n: text_output [n], output_ids [n, longest] padded with -1.
// Outputs carry the batch dimension when the prompt's tensor had one. A request whose inputs came
// in raw_input_contents (as tritonclient sends them) is answered in raw_output_contents, one with
// typed contents in typed contents.
#ifndef CONVOY_FRONTEND_KSERVE_REQUEST_H_
#define CONVOY_FRONTEND_KSERVE_REQUEST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "convoy/v1/inference.pb.h"
#include "frontend/kserve_tensors.h"
#include "inference/grpc_service.pb.h"
#include "inference/model_config.pb.h"

namespace convoy {

// The one version of the model ("" picks it too).
inline constexpr char kKServeModelVersion[] = "1";

// How a request wants its answer.
struct KServeAnswerSpec {
  // The request's id, echoed in every response.
  std::string id;
  KServeOutputFormat outputs;
  // On ModelStreamInfer: one response per chunk of new tokens (else one with everything).
  bool stream = false;
  // The outputs hold the generated text and ids only; when false, the prompt comes first.
  bool exclude_input = true;
  // text_input as given (for exclude_input == false); empty for a prompt of ids.
  std::string prompt_text;
};

// A KServe request as convoy's.
struct KServeRequest {
  v1::InferRequest request;
  KServeAnswerSpec answer;
  // (v1 field, the name the client used): "sampling.max_tokens" -> "max_tokens" (an input) or
  // "parameters.max_tokens" (a request parameter).
  std::vector<std::pair<std::string, std::string>> field_names;
};

// Reads `request`. `streaming`: it came on ModelStreamInfer (stream defaults to true there;
// ModelInfer refuses stream: true; a streamed answer cannot hold the prompt). INVALID_ARGUMENT
// naming the input, parameter or output at fault: an unknown name, a wrong datatype, a shape that
// does not match the data, a missing or doubled prompt, a value given twice. The values' ranges
// and the model name are left for PrepareRequest to check. An unknown request parameter is
// refused by name too, but for those Triton reserves, which its clients may send (triton_*,
// headers, binary_data_output: ignored); sequence_id, sequence_start and sequence_end are refused
// (no sequence batching).
absl::StatusOr<KServeRequest> ParseKServeRequest(const inference::ModelInferRequest& request,
                                                 bool streaming);

// `status` with the request field at the start of its message (and "prompt_token_ids" anywhere in
// it) named as the client named it; other statuses unchanged.
absl::Status KServeFieldNames(const absl::Status& status, const KServeRequest& request);

// The model's tensors, for ModelMetadata and ModelConfig.
void AddKServeTensorMetadata(inference::ModelMetadataResponse* response);
void AddKServeTensorConfig(inference::ModelConfig* config);

}  // namespace convoy

#endif  // CONVOY_FRONTEND_KSERVE_REQUEST_H_
