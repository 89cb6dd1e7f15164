#include "bench/loadgen/kserve_encoding.h"

#include "absl/strings/str_cat.h"

namespace convoy::bench {

inference::ModelInferRequest BuildKServeRequest(const PlannedRequest& planned,
                                                const std::string& model) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_id(absl::StrCat("bench-", planned.index));
  inference::ModelInferRequest::InferInputTensor* input = request.add_inputs();
  input->set_name("input_ids");
  input->set_datatype("INT32");
  input->add_shape(static_cast<int64_t>(planned.prompt_token_ids.size()));
  // Raw contents are little-endian elements, whatever the host's order.
  std::string* raw = request.add_raw_input_contents();
  raw->reserve(planned.prompt_token_ids.size() * 4);
  for (int32_t id : planned.prompt_token_ids) {
    const uint32_t u = static_cast<uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) raw->push_back(static_cast<char>(u >> shift));
  }
  auto& parameters = *request.mutable_parameters();
  parameters["max_tokens"].set_int64_param(planned.max_tokens);
  parameters["temperature"].set_double_param(planned.temperature);
  parameters["seed"].set_uint64_param(planned.sampling_seed);
  if (planned.priority != 0) parameters["priority"].set_int64_param(planned.priority);
  return request;
}

KServeStreamMessage ReadKServeStreamMessage(const inference::ModelStreamInferResponse& message) {
  KServeStreamMessage out;
  out.error = message.error_message();
  const inference::ModelInferResponse& response = message.infer_response();
  for (const auto& output : response.outputs()) {
    if (output.name() != "output_ids") continue;
    int64_t n = 1;
    for (int64_t d : output.shape()) n *= d;
    out.output_ids = n;
  }
  const auto& parameters = response.parameters();
  if (auto it = parameters.find("triton_final_response"); it != parameters.end()) {
    out.final = it->second.bool_param();
  }
  if (auto it = parameters.find("finish_reason"); it != parameters.end()) {
    out.finish_reason = it->second.string_param();
  }
  return out;
}

}  // namespace convoy::bench
