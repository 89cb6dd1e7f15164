#include "frontend/kserve_request.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "convoy/status_macros.h"
#include "frontend/kserve_tensors.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

constexpr char kTextInput[] = "text_input";
constexpr char kInputIds[] = "input_ids";
constexpr char kTextOutput[] = "text_output";
constexpr char kOutputIds[] = "output_ids";

absl::Status Invalid(absl::string_view name, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", reason));
}

// A logit_bias entry: token id and bias.
using LogitBiasEntry = std::pair<int32_t, float>;

// A sampling value as the request gave it, and the name it gave it under.
template <typename T>
struct Given {
  std::optional<T> value;
  std::string name;  // "max_tokens" (an input) or "parameters.max_tokens"

  absl::Status Set(T v, std::string given_name) {
    if (value) {
      return Invalid(given_name, absl::StrCat("given twice (also as ", name, ")"));
    }
    value = std::move(v);
    name = std::move(given_name);
    return absl::OkStatus();
  }
};

struct Values {
  Given<KServeInteger> max_tokens, top_k, seed, priority, timeout, n;
  Given<double> temperature, top_p;
  // Request parameters only (no inputs of these names).
  Given<double> min_p, presence_penalty, frequency_penalty, repetition_penalty;
  Given<std::vector<LogitBiasEntry>> logit_bias;
  Given<std::vector<std::string>> stop;
  Given<bool> stream, exclude_input;
  // Structured output: one of json_schema, json_object, regex, grammar, choices.
  Given<v1::OutputConstraint> constraint;
};

// A structured-output parameter (InferRequest.constraint) of that name, or nullopt when `key` is
// none of them.
std::optional<absl::StatusOr<v1::OutputConstraint>> ConstraintParameter(
    const std::string& key, const std::string& name, const inference::InferParameter& p) {
  if (key != "json_schema" && key != "json_object" && key != "regex" && key != "grammar" &&
      key != "choices") {
    return std::nullopt;
  }
  v1::OutputConstraint c;
  if (key == "json_object") {
    if (p.parameter_choice_case() != inference::InferParameter::kBoolParam) {
      return absl::StatusOr<v1::OutputConstraint>(Invalid(name, "expected bool_param"));
    }
    c.set_json_object(p.bool_param());
    return c;
  }
  if (p.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::StatusOr<v1::OutputConstraint>(
        Invalid(name, key == "choices" ? "expected string_param: a JSON list of strings"
                                       : "expected string_param"));
  }
  const std::string& text = p.string_param();
  if (key == "json_schema") c.set_json_schema(text);
  if (key == "regex") c.set_regex(text);
  if (key == "grammar") c.set_grammar(text);
  if (key == "choices") {
    const nlohmann::json list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array()) {
      return absl::StatusOr<v1::OutputConstraint>(Invalid(name, "expected a JSON list of strings"));
    }
    for (const nlohmann::json& choice : list) {
      if (!choice.is_string()) {
        return absl::StatusOr<v1::OutputConstraint>(
            Invalid(name, "expected a JSON list of strings"));
      }
      c.mutable_choices()->add_choices(choice.get<std::string>());
    }
  }
  return c;
}

absl::Status ReadInput(const KServeInput& input, Values* v) {
  const std::string& name = input.name();
  if (name == "max_tokens" || name == "top_k" || name == "seed") {
    RETURN_IF_ERROR(input.CheckOneElement());
    ASSIGN_OR_RETURN(std::vector<KServeInteger> values, input.Integers());
    Given<KServeInteger>& field = name == "max_tokens" ? v->max_tokens
                                  : name == "top_k"    ? v->top_k
                                                       : v->seed;
    return field.Set(values[0], name);
  }
  if (name == "temperature" || name == "top_p") {
    ASSIGN_OR_RETURN(double value, input.Number());
    return (name == "temperature" ? v->temperature : v->top_p).Set(value, name);
  }
  if (name == "stream" || name == "exclude_input_in_output") {
    ASSIGN_OR_RETURN(bool value, input.Bool());
    return (name == "stream" ? v->stream : v->exclude_input).Set(value, name);
  }
  if (name == "stop") {
    ASSIGN_OR_RETURN(std::vector<std::string> values, input.Strings());
    return v->stop.Set(std::move(values), name);
  }
  return absl::InternalError(absl::StrCat("no reader for input ", name));
}

absl::StatusOr<KServeInteger> IntegerParameter(const std::string& name,
                                               const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return Invalid(name, "expected an integer (int64_param or uint64_param)");
  }
}

absl::StatusOr<double> NumberParameter(const std::string& name,
                                       const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kInt64Param:
      return static_cast<double>(p.int64_param());
    case inference::InferParameter::kUint64Param:
      return static_cast<double>(p.uint64_param());
    default:
      return Invalid(name, "expected a number (double_param, int64_param or uint64_param)");
  }
}

absl::StatusOr<bool> BoolParameter(const std::string& name, const inference::InferParameter& p) {
  if (p.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return Invalid(name, "expected bool_param");
  }
  return p.bool_param();
}

// logit_bias: string_param holding a JSON object from token ids (decimal strings) to numbers,
// OpenAI's form. Vocabulary and range are checked with every protocol's (PrepareRequest).
absl::StatusOr<std::vector<LogitBiasEntry>> LogitBiasParameter(const std::string& name,
                                                               const inference::InferParameter& p) {
  if (p.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return Invalid(name, "expected string_param: a JSON object from token ids to numbers");
  }
  const nlohmann::json object =
      nlohmann::json::parse(p.string_param(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) {
    return Invalid(name, "expected a JSON object from token ids to numbers");
  }
  std::vector<LogitBiasEntry> entries;
  for (const auto& [key, value] : object.items()) {
    int32_t token = 0;
    if (key.empty() || !absl::ascii_isdigit(key[0]) || !absl::SimpleAtoi(key, &token)) {
      return Invalid(name, absl::StrCat("keys are token ids, got \"", key.substr(0, 32), "\""));
    }
    if (!value.is_number())
      return Invalid(name, absl::StrCat("the value of \"", key, "\" is not a number"));
    entries.emplace_back(token, static_cast<float>(value.get<double>()));
  }
  return entries;
}

absl::Status ReadParameter(const std::string& key, const inference::InferParameter& p, Values* v) {
  const std::string name = absl::StrCat("parameters.", key);
  auto integer = [&](Given<KServeInteger>& field) -> absl::Status {
    ASSIGN_OR_RETURN(KServeInteger value, IntegerParameter(name, p));
    return field.Set(value, name);
  };
  auto number = [&](Given<double>& field) -> absl::Status {
    ASSIGN_OR_RETURN(double value, NumberParameter(name, p));
    return field.Set(value, name);
  };
  auto boolean = [&](Given<bool>& field) -> absl::Status {
    ASSIGN_OR_RETURN(bool value, BoolParameter(name, p));
    return field.Set(value, name);
  };
  if (key == "max_tokens") return integer(v->max_tokens);
  if (key == "top_k") return integer(v->top_k);
  if (key == "seed") return integer(v->seed);
  if (key == "priority") return integer(v->priority);
  if (key == "timeout") return integer(v->timeout);
  if (key == "n") return integer(v->n);
  if (key == "temperature") return number(v->temperature);
  if (key == "top_p") return number(v->top_p);
  if (key == "min_p") return number(v->min_p);
  if (key == "presence_penalty") return number(v->presence_penalty);
  if (key == "frequency_penalty") return number(v->frequency_penalty);
  if (key == "repetition_penalty") return number(v->repetition_penalty);
  if (key == "logit_bias") {
    ASSIGN_OR_RETURN(std::vector<LogitBiasEntry> entries, LogitBiasParameter(name, p));
    return v->logit_bias.Set(std::move(entries), name);
  }
  if (key == "stream") return boolean(v->stream);
  if (key == "exclude_input_in_output") return boolean(v->exclude_input);
  if (key == "stop") {
    if (p.parameter_choice_case() != inference::InferParameter::kStringParam) {
      return Invalid(name, "expected string_param (one stop string; send more as the stop input)");
    }
    return v->stop.Set({p.string_param()}, name);
  }
  if (std::optional<absl::StatusOr<v1::OutputConstraint>> c = ConstraintParameter(key, name, p)) {
    if (!c->ok()) return c->status();
    return v->constraint.Set(**std::move(c), name);
  }
  if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end") {
    return Invalid(name, "sequence batching (stateful models) is not supported");
  }
  // What Triton reserves for itself and its clients send (triton_enable_empty_final_response: the
  // final response is always sent; headers and binary_data_output concern HTTP) means nothing
  // here; anything else is a mistake the client should hear of.
  if (absl::StartsWith(key, "triton_") || key == "headers" || key == "binary_data_output") {
    return absl::OkStatus();
  }
  return Invalid(
      name,
      "unknown parameter; the parameters taken are max_tokens, temperature, top_p, "
      "top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty, "
      "logit_bias, seed, stop, stream, exclude_input_in_output, priority, timeout, n, and "
      "one of json_schema, json_object, regex, grammar and choices");
}

absl::StatusOr<int32_t> ToInt32(const Given<KServeInteger>& field) {
  const KServeInteger v = *field.value;
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return Invalid(field.name, absl::StrCat(KServeIntegerText(v), " is out of range"));
  }
  return static_cast<int32_t>(v);
}

// Whether the prompt's tensor has a batch dimension (which must be 1).
absl::StatusOr<bool> BatchDim(const KServeInput& input) {
  if (input.rank() <= 1) return false;
  if (input.rank() > 2) {
    return Invalid(input.name(), absl::StrCat("shape ", input.ShapeText(),
                                              "; expected rank 1, or 2 with a batch dimension"));
  }
  if (input.tensor().shape(0) != 1) {
    return Invalid(input.name(), absl::StrCat("shape ", input.ShapeText(),
                                              ": one prompt per request (send more requests)"));
  }
  return true;
}

absl::Status ReadPrompt(const KServeInput& input, KServeRequest* out) {
  ASSIGN_OR_RETURN(out->answer.outputs.batch_dim, BatchDim(input));
  if (input.name() == kTextInput) {
    RETURN_IF_ERROR(input.CheckType({"BYTES"}));
    RETURN_IF_ERROR(input.CheckOneElement());
    ASSIGN_OR_RETURN(std::vector<std::string> text, input.Strings());
    if (text[0].empty()) return Invalid(kTextInput, "the prompt is empty");
    out->request.set_prompt_text(text[0]);
    out->answer.prompt_text = text[0];
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(input.CheckType({"INT32", "INT64"}));
  ASSIGN_OR_RETURN(std::vector<KServeInteger> ids, input.Integers());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > std::numeric_limits<int32_t>::max()) {
      return Invalid(
          absl::StrCat(kInputIds, "[", i, "]"),
          absl::StrCat("token id ", KServeIntegerText(ids[i]), " is outside the vocabulary"));
    }
    out->request.add_prompt_token_ids(static_cast<int32_t>(ids[i]));
  }
  return absl::OkStatus();
}

absl::Status Apply(const Values& v, bool streaming, KServeRequest* out) {
  v1::SamplingParameters* s = out->request.mutable_sampling();
  auto name = [out](const char* v1_field, const std::string& given) {
    out->field_names.emplace_back(v1_field, given);
  };
  if (v.constraint.value) {
    *out->request.mutable_constraint() = *v.constraint.value;
    // Its errors name "constraint.<kind>" (output_constraints.h) or "constraint".
    for (const char* field :
         {"constraint.json_schema", "constraint.json_object", "constraint.regex",
          "constraint.grammar", "constraint.choices", "constraint"}) {
      name(field, v.constraint.name);
    }
  }
  if (v.max_tokens.value) {
    ASSIGN_OR_RETURN(int32_t n, ToInt32(v.max_tokens));
    s->set_max_tokens(n);
    name("sampling.max_tokens", v.max_tokens.name);
  }
  if (v.top_k.value) {
    ASSIGN_OR_RETURN(int32_t k, ToInt32(v.top_k));
    s->set_top_k(k);
    name("sampling.top_k", v.top_k.name);
  }
  if (v.seed.value) {
    if (*v.seed.value < 0 || *v.seed.value > std::numeric_limits<uint64_t>::max()) {
      return Invalid(v.seed.name,
                     absl::StrCat("must be in [0, 2^64), got ", KServeIntegerText(*v.seed.value)));
    }
    s->set_seed(static_cast<uint64_t>(*v.seed.value));
  }
  if (v.temperature.value) {
    s->set_temperature(static_cast<float>(*v.temperature.value));
    name("sampling.temperature", v.temperature.name);
  }
  if (v.top_p.value) {
    s->set_top_p(static_cast<float>(*v.top_p.value));
    name("sampling.top_p", v.top_p.name);
  }
  const std::pair<const Given<double>*,
                  std::pair<void (v1::SamplingParameters::*)(float), const char*>>
      extended[] = {
          {&v.min_p, {&v1::SamplingParameters::set_min_p, "sampling.min_p"}},
          {&v.presence_penalty,
           {&v1::SamplingParameters::set_presence_penalty, "sampling.presence_penalty"}},
          {&v.frequency_penalty,
           {&v1::SamplingParameters::set_frequency_penalty, "sampling.frequency_penalty"}},
          {&v.repetition_penalty,
           {&v1::SamplingParameters::set_repetition_penalty, "sampling.repetition_penalty"}},
      };
  for (const auto& [given, setter] : extended) {
    if (!given->value) continue;
    (s->*setter.first)(static_cast<float>(*given->value));
    name(setter.second, given->name);
  }
  if (v.logit_bias.value) {
    for (const auto& [token, bias] : *v.logit_bias.value) (*s->mutable_logit_bias())[token] = bias;
    name("sampling.logit_bias", v.logit_bias.name);
  }
  if (v.stop.value) {
    for (const std::string& stop : *v.stop.value) s->add_stop(stop);
    name("sampling.stop", v.stop.name);
  }
  if (v.priority.value) {
    ASSIGN_OR_RETURN(int32_t priority, ToInt32(v.priority));
    out->request.set_priority(priority);
    name("priority", v.priority.name);
  }
  if (v.n.value) {
    // The choices; CountChoices checks the value.
    ASSIGN_OR_RETURN(int32_t n, ToInt32(v.n));
    out->request.set_n(n);
    name("n", v.n.name);
    out->answer.outputs.choice_dim = n > 1;
  }
  if (v.timeout.value) {
    // Triton's request timeout, in microseconds.
    if (*v.timeout.value < 0 || *v.timeout.value > std::numeric_limits<uint64_t>::max()) {
      return Invalid(v.timeout.name, absl::StrCat("must be >= 0 microseconds, got ",
                                                  KServeIntegerText(*v.timeout.value)));
    }
    out->request.set_timeout_microseconds(static_cast<uint64_t>(*v.timeout.value));
  }
  KServeAnswerSpec& answer = out->answer;
  answer.stream = streaming;
  if (v.stream.value) {
    if (*v.stream.value && !streaming) {
      return Invalid(v.stream.name,
                     "true needs ModelStreamInfer; ModelInfer answers with the whole result");
    }
    answer.stream = *v.stream.value;
  }
  if (v.exclude_input.value) {
    answer.exclude_input = *v.exclude_input.value;
    if (!answer.exclude_input && answer.stream) {
      return Invalid(v.exclude_input.name,
                     "false needs stream: false (streamed responses hold the new text only)");
    }
  }
  out->request.set_return_prompt_token_ids(!answer.exclude_input);
  return absl::OkStatus();
}

absl::Status ReadOutputs(const inference::ModelInferRequest& request, KServeAnswerSpec* answer) {
  if (request.outputs_size() == 0) return absl::OkStatus();
  std::vector<std::string>& names = answer->outputs.names;
  names.clear();
  for (int i = 0; i < request.outputs_size(); ++i) {
    const std::string& name = request.outputs(i).name();
    if (name != kTextOutput && name != kOutputIds) {
      return Invalid(absl::StrCat("outputs[", i, "]"),
                     absl::StrCat("unknown output '", name.substr(0, 64),
                                  "'; this model gives text_output and output_ids"));
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return absl::OkStatus();
}

// The tensors of ModelMetadata and ModelConfig.
struct TensorInfo {
  const char* name;
  const char* datatype;
  inference::DataType type;
  int64_t dim;  // the only dimension: 1, or -1 for any
};
constexpr std::array<TensorInfo, 10> kInputs = {{
    {kTextInput, "BYTES", inference::TYPE_STRING, 1},
    {kInputIds, "INT32", inference::TYPE_INT32, -1},
    {"max_tokens", "INT32", inference::TYPE_INT32, 1},
    {"temperature", "FP32", inference::TYPE_FP32, 1},
    {"top_k", "INT32", inference::TYPE_INT32, 1},
    {"top_p", "FP32", inference::TYPE_FP32, 1},
    {"seed", "UINT64", inference::TYPE_UINT64, 1},
    {"stop", "BYTES", inference::TYPE_STRING, -1},
    {"stream", "BOOL", inference::TYPE_BOOL, 1},
    {"exclude_input_in_output", "BOOL", inference::TYPE_BOOL, 1},
}};
constexpr std::array<TensorInfo, 2> kOutputs = {{
    {kTextOutput, "BYTES", inference::TYPE_STRING, -1},
    {kOutputIds, "INT32", inference::TYPE_INT32, -1},
}};

bool IsInput(absl::string_view name) {
  return std::any_of(kInputs.begin(), kInputs.end(),
                     [name](const TensorInfo& t) { return name == t.name; });
}

std::string InputNames() {
  std::vector<absl::string_view> names;
  for (const TensorInfo& t : kInputs) names.push_back(t.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<KServeRequest> ParseKServeRequest(const inference::ModelInferRequest& request,
                                                 bool streaming) {
  KServeRequest out;
  out.request.set_model(request.model_name());
  out.field_names.emplace_back("model", "model_name");
  if (!request.model_version().empty() && request.model_version() != kKServeModelVersion) {
    return Invalid("model_version",
                   absl::StrCat("unknown version '", request.model_version().substr(0, 32),
                                "'; the model has version ", kKServeModelVersion));
  }
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return Invalid("raw_input_contents",
                   absl::StrCat(request.raw_input_contents_size(), " entries for ",
                                request.inputs_size(), " inputs; give one per input, in order"));
  }
  out.answer.outputs.raw = raw;
  out.answer.id = request.id();
  out.request.set_client_request_id(request.id());

  Values values;
  std::optional<KServeInput> prompt;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const KServeInput::Tensor& tensor = request.inputs(i);
    if (!IsInput(tensor.name())) {
      return Invalid(absl::StrCat("inputs[", i, "]"),
                     absl::StrCat("unknown input '", tensor.name().substr(0, 64),
                                  "'; this model takes ", InputNames()));
    }
    for (int j = 0; j < i; ++j) {
      if (request.inputs(j).name() == tensor.name()) {
        return Invalid(tensor.name(), "the input is given twice");
      }
    }
    ASSIGN_OR_RETURN(KServeInput input,
                     KServeInput::Make(tensor, raw ? &request.raw_input_contents(i) : nullptr));
    if (tensor.name() == kTextInput || tensor.name() == kInputIds) {
      if (prompt) return Invalid(tensor.name(), "give text_input or input_ids, not both");
      prompt = input;
    } else {
      RETURN_IF_ERROR(ReadInput(input, &values));
    }
  }
  if (!prompt) {
    return Invalid(kTextInput,
                   "the request has no prompt; give text_input (BYTES) or input_ids (INT32 or "
                   "INT64)");
  }
  RETURN_IF_ERROR(ReadPrompt(*prompt, &out));

  // In name order, so that the first error is the same on every call.
  std::map<std::string, const inference::InferParameter*> parameters;
  for (const auto& [key, value] : request.parameters()) parameters.emplace(key, &value);
  for (const auto& [key, value] : parameters) RETURN_IF_ERROR(ReadParameter(key, *value, &values));
  RETURN_IF_ERROR(Apply(values, streaming, &out));
  RETURN_IF_ERROR(ReadOutputs(request, &out.answer));
  out.field_names.emplace_back("prompt_text", kTextInput);
  out.field_names.emplace_back("prompt_token_ids", kInputIds);
  return out;
}

absl::Status KServeFieldNames(const absl::Status& status, const KServeRequest& request) {
  const absl::string_view message = status.message();
  for (const auto& [v1_name, name] : request.field_names) {
    if (message.size() > v1_name.size() && absl::StartsWith(message, v1_name) &&
        (message[v1_name.size()] == ':' || message[v1_name.size()] == '[')) {
      std::string renamed = absl::StrCat(name, message.substr(v1_name.size()));
      renamed = absl::StrReplaceAll(renamed, {{"prompt_token_ids", kInputIds}});
      return absl::Status(status.code(), renamed);
    }
  }
  return status;
}

void AddKServeTensorMetadata(inference::ModelMetadataResponse* response) {
  auto add = [](const TensorInfo& t, inference::ModelMetadataResponse::TensorMetadata* m) {
    m->set_name(t.name);
    m->set_datatype(t.datatype);
    m->add_shape(t.dim);
  };
  for (const TensorInfo& t : kInputs) add(t, response->add_inputs());
  for (const TensorInfo& t : kOutputs) add(t, response->add_outputs());
}

void AddKServeTensorConfig(inference::ModelConfig* config) {
  for (const TensorInfo& t : kInputs) {
    inference::ModelInput* input = config->add_input();
    input->set_name(t.name);
    input->set_data_type(t.type);
    input->add_dims(t.dim);
    // A request needs text_input or input_ids: each of them alone is optional.
    input->set_optional(true);
  }
  for (const TensorInfo& t : kOutputs) {
    inference::ModelOutput* output = config->add_output();
    output->set_name(t.name);
    output->set_data_type(t.type);
    output->add_dims(t.dim);
  }
}

}  // namespace convoy
