#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/file_util.h"
#include "model/long_rope.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

using Json = nlohmann::json;

// Reads config.json fields; every error is prefixed with the source file.
class ConfigReader {
 public:
  ConfigReader(const Json& json, const std::string& source) : json_(json), source_(source) {}

  absl::Status Invalid(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
  }
  absl::Status Unsupported(const std::string& message) const {
    return absl::UnimplementedError(absl::StrCat(source_, ": ", message));
  }

  // A field that is absent or null.
  bool IsMissing(const Json& object, const char* field) const {
    auto it = object.find(field);
    return it == object.end() || it->is_null();
  }

  absl::StatusOr<int64_t> Int(const Json& object, const std::string& path, const char* field,
                              const int64_t* default_value) const {
    if (IsMissing(object, field)) {
      if (default_value != nullptr) return *default_value;
      return Invalid(absl::StrFormat("field '%s%s' is required, found none", path, field));
    }
    const Json& value = object.at(field);
    if (value.is_number_unsigned()) {
      if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Invalid(
            absl::StrFormat("field '%s%s' must be an integer that fits in 64 bits, "
                            "found %s",
                            path, field, value.dump()));
      }
      return static_cast<int64_t>(value.get<uint64_t>());
    }
    if (value.is_number_integer()) return value.get<int64_t>();
    return Invalid(
        absl::StrFormat("field '%s%s' must be an integer, found %s", path, field, value.dump()));
  }

  absl::StatusOr<int64_t> Int(const char* field, int64_t default_value) const {
    return Int(json_, "", field, &default_value);
  }
  absl::StatusOr<int64_t> RequiredInt(const char* field) const {
    return Int(json_, "", field, nullptr);
  }

  absl::StatusOr<double> Double(const Json& object, const std::string& path, const char* field,
                                const double* default_value) const {
    if (IsMissing(object, field)) {
      if (default_value != nullptr) return *default_value;
      return Invalid(absl::StrFormat("field '%s%s' is required, found none", path, field));
    }
    const Json& value = object.at(field);
    if (!value.is_number()) {
      return Invalid(
          absl::StrFormat("field '%s%s' must be a number, found %s", path, field, value.dump()));
    }
    return value.get<double>();
  }

  absl::StatusOr<bool> Bool(const char* field, bool default_value) const {
    if (IsMissing(json_, field)) return default_value;
    const Json& value = json_.at(field);
    if (!value.is_boolean()) {
      return Invalid(
          absl::StrFormat("field '%s' must be true or false, found %s", field, value.dump()));
    }
    return value.get<bool>();
  }

  // nullptr when absent or null.
  absl::StatusOr<const std::string*> String(const Json& object, const std::string& path,
                                            const char* field) const {
    if (IsMissing(object, field)) return nullptr;
    const Json& value = object.at(field);
    if (!value.is_string()) {
      return Invalid(
          absl::StrFormat("field '%s%s' must be a string, found %s", path, field, value.dump()));
    }
    return value.get_ptr<const std::string*>();
  }

  const Json& json() const { return json_; }

 private:
  const Json& json_;
  const std::string& source_;
};

// The family config.json names: the first entry of 'architectures' that is a known family's, or
// 'model_type' when 'architectures' is absent.
absl::StatusOr<const ModelFamily*> ReadFamily(const ConfigReader& reader) {
  const Json& json = reader.json();
  if (!reader.IsMissing(json, "architectures")) {
    const Json& architectures = json.at("architectures");
    if (!architectures.is_array()) {
      return reader.Invalid(absl::StrCat("field 'architectures' must be a list of strings, found ",
                                         architectures.dump()));
    }
    for (const Json& name : architectures) {
      if (!name.is_string()) continue;
      if (const ModelFamily* family = FindModelFamilyByArchitecture(name.get<std::string>())) {
        return family;
      }
    }
    return reader.Unsupported(absl::StrCat("field 'architectures' must contain one of ",
                                           SupportedArchitectures(), ", found ",
                                           architectures.dump()));
  }
  ASSIGN_OR_RETURN(const std::string* model_type, reader.String(json, "", "model_type"));
  const ModelFamily* family = model_type == nullptr ? nullptr : FindModelFamilyByName(*model_type);
  if (family == nullptr) {
    return reader.Unsupported(
        absl::StrCat("field 'model_type' must be one of ", SupportedFamilyNames(),
                     " when 'architectures' is absent, found ",
                     model_type == nullptr ? std::string("none") : Json(*model_type).dump()));
  }
  return family;
}

// A list of numbers, each finite and positive: LongRoPE's frequency factors.
absl::StatusOr<std::vector<double>> PositiveNumbers(const ConfigReader& reader, const Json& object,
                                                    const std::string& path, const char* field) {
  if (reader.IsMissing(object, field)) {
    return reader.Invalid(absl::StrFormat("field '%s%s' is required, found none", path, field));
  }
  const Json& list = object.at(field);
  std::vector<double> numbers;
  for (const Json& value : list.is_array() ? list : Json::array({nullptr})) {
    if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
      return reader.Invalid(absl::StrFormat(
          "field '%s%s' must be a list of positive numbers, found %s", path, field, list.dump()));
    }
    numbers.push_back(value.get<double>());
  }
  return numbers;
}

// Phi-3's LongRoPE (see ParseModelConfig). max_position_embeddings is read beforehand.
absl::StatusOr<RopeScaling> ParseLongRope(const ConfigReader& reader, const Json& object,
                                          const std::string& path) {
  RopeScaling scaling;
  scaling.rope_type = "longrope";
  ASSIGN_OR_RETURN(scaling.short_factor, PositiveNumbers(reader, object, path, "short_factor"));
  ASSIGN_OR_RETURN(scaling.long_factor, PositiveNumbers(reader, object, path, "long_factor"));
  const Json& json = reader.json();
  const bool top_level = !reader.IsMissing(json, "original_max_position_embeddings");
  const char* original_path = top_level ? "" : path.c_str();
  ASSIGN_OR_RETURN(scaling.original_max_position_embeddings,
                   reader.Int(top_level ? json : object, original_path,
                              "original_max_position_embeddings", nullptr));
  if (scaling.original_max_position_embeddings <= 0) {
    return reader.Invalid(
        absl::StrFormat("field '%soriginal_max_position_embeddings' must be "
                        "positive, found %d",
                        original_path, scaling.original_max_position_embeddings));
  }
  const int64_t default_context = 2048;  // transformers' and ModelConfig's
  ASSIGN_OR_RETURN(int64_t context,
                   reader.Int(json, "", "max_position_embeddings", &default_context));
  const double ratio =
      static_cast<double>(context) / static_cast<double>(scaling.original_max_position_embeddings);
  ASSIGN_OR_RETURN(scaling.factor, reader.Double(object, path, "factor", &ratio));
  const double paper =
      LongRopeAttentionFactor(scaling.factor, scaling.original_max_position_embeddings);
  ASSIGN_OR_RETURN(scaling.attention_factor,
                   reader.Double(object, path, "attention_factor", &paper));
  return scaling;
}

// The rope scaling object: transformers 4 writes it as "rope_scaling" (rope_theta beside it),
// transformers 5 as "rope_parameters" (rope_theta inside it).
absl::StatusOr<RopeScaling> ParseRopeScaling(const ConfigReader& reader, const char* field) {
  RopeScaling scaling;
  const Json& json = reader.json();
  if (reader.IsMissing(json, field)) return scaling;
  const Json& object = json.at(field);
  const std::string path = absl::StrCat(field, ".");
  if (!object.is_object()) {
    return reader.Invalid(
        absl::StrCat("field '", field, "' must be null or an object, found ", object.dump()));
  }
  // Newer configs spell it "rope_type", older ones "type".
  const char* type_field = object.contains("rope_type") ? "rope_type" : "type";
  ASSIGN_OR_RETURN(const std::string* type, reader.String(object, path, type_field));
  if (type == nullptr) {
    return reader.Invalid(absl::StrFormat(
        "field '%s.rope_type' is required when %s is set, found none", field, field));
  }
  if (*type == "default") return scaling;
  if (*type == "longrope" || *type == "su") return ParseLongRope(reader, object, path);
  if (*type != "llama3") {
    return reader.Unsupported(absl::StrFormat(
        "field '%s.%s' must be \"llama3\" or \"longrope\" (the supported RoPE scalings), found "
        "\"%s\"",
        field, type_field, *type));
  }
  scaling.rope_type = "llama3";
  ASSIGN_OR_RETURN(scaling.factor, reader.Double(object, path, "factor", nullptr));
  ASSIGN_OR_RETURN(scaling.low_freq_factor,
                   reader.Double(object, path, "low_freq_factor", nullptr));
  ASSIGN_OR_RETURN(scaling.high_freq_factor,
                   reader.Double(object, path, "high_freq_factor", nullptr));
  ASSIGN_OR_RETURN(scaling.original_max_position_embeddings,
                   reader.Int(object, path, "original_max_position_embeddings", nullptr));
  return scaling;
}

absl::StatusOr<DType> ParseTorchDType(const ConfigReader& reader) {
  // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
  const char* field = reader.json().contains("torch_dtype") ? "torch_dtype" : "dtype";
  ASSIGN_OR_RETURN(const std::string* name, reader.String(reader.json(), "", field));
  if (name == nullptr || *name == "float32") return DType::kF32;
  if (*name == "float16") return DType::kF16;
  if (*name == "bfloat16") return DType::kBF16;
  return reader.Unsupported(absl::StrFormat(
      "field '%s' must be \"float32\", \"float16\" or \"bfloat16\", found \"%s\"", field, *name));
}

absl::Status ParseTokenIds(const ConfigReader& reader, ModelConfig& config) {
  const Json& json = reader.json();
  if (reader.IsMissing(json, "bos_token_id")) {
    if (json.contains("bos_token_id")) config.bos_token_id = -1;
  } else {
    ASSIGN_OR_RETURN(config.bos_token_id, reader.RequiredInt("bos_token_id"));
  }
  if (reader.IsMissing(json, "eos_token_id")) {
    if (json.contains("eos_token_id")) config.eos_token_id = -1;
    return absl::OkStatus();
  }
  const Json& eos = json.at("eos_token_id");
  if (!eos.is_array()) {
    ASSIGN_OR_RETURN(config.eos_token_id, reader.RequiredInt("eos_token_id"));
    config.eos_token_ids = {config.eos_token_id};
    return absl::OkStatus();
  }
  if (eos.empty()) {
    return reader.Invalid("field 'eos_token_id' must be an integer or a non-empty list, found []");
  }
  for (const Json& id : eos) {
    if (!id.is_number_integer()) {
      return reader.Invalid(absl::StrCat(
          "field 'eos_token_id' must be an integer or a list of integers, found ", eos.dump()));
    }
    config.eos_token_ids.push_back(id.get<int64_t>());
  }
  config.eos_token_id = config.eos_token_ids.front();
  return absl::OkStatus();
}

const char* ActivationName(Activation activation) {
  return activation == Activation::kGeluTanh ? "gelu_pytorch_tanh" : "silu";
}

absl::Status CheckUnsupportedFeatures(const ConfigReader& reader, const ModelFamily& family) {
  // A family with QKV biases has them whatever the config says (Qwen2's has no field for them).
  if (!family.attention_bias) {
    ASSIGN_OR_RETURN(bool has_bias, reader.Bool("attention_bias", false));
    if (has_bias) {
      return reader.Unsupported(absl::StrFormat(
          "field 'attention_bias' must be false (%s has no attention biases), found true",
          family.architecture));
    }
  }
  ASSIGN_OR_RETURN(bool mlp_bias, reader.Bool("mlp_bias", false));
  if (mlp_bias) {
    return reader.Unsupported(
        "field 'mlp_bias' must be false (biases are not supported), found true");
  }
  // Gemma's configs name it hidden_activation.
  const char* activation_field =
      reader.IsMissing(reader.json(), "hidden_activation") ? "hidden_act" : "hidden_activation";
  ASSIGN_OR_RETURN(const std::string* activation,
                   reader.String(reader.json(), "", activation_field));
  const char* expected = ActivationName(family.activation);
  if (activation != nullptr && *activation != expected) {
    return reader.Unsupported(absl::StrFormat("field '%s' must be \"%s\" for %s, found \"%s\"",
                                              activation_field, expected, family.architecture,
                                              *activation));
  }
  // Partial rotary embeddings (Phi-4-mini's 0.75), at the top level or among the rope parameters;
  // a family that has them reads them in ParsePartialRotary.
  for (const char* object_field : {"", "rope_parameters", "rope_scaling"}) {
    if (family.partial_rotary) break;
    const Json& object =
        *object_field == '\0' ? reader.json() : reader.json().value(object_field, Json());
    if (!object.is_object()) continue;
    const std::string path = *object_field == '\0' ? "" : absl::StrCat(object_field, ".");
    const double full = 1.0;
    ASSIGN_OR_RETURN(double factor, reader.Double(object, path, "partial_rotary_factor", &full));
    if (factor != 1.0) {
      return reader.Unsupported(absl::StrFormat(
          "field '%spartial_rotary_factor' must be 1 (partial rotary embeddings are not "
          "supported), found %g",
          path, factor));
    }
  }
  // Qwen's configs carry a window that only applies with use_sliding_window (transformers 5 also
  // lists each layer's kind in layer_types).
  ASSIGN_OR_RETURN(bool sliding, reader.Bool("use_sliding_window", false));
  if (sliding) {
    return reader.Unsupported(
        "field 'use_sliding_window' must be false (sliding-window attention is not supported), "
        "found true");
  }
  const Json& json = reader.json();
  // Gemma 3's layer kinds are read by ParseGemmaAttention.
  if (!reader.IsMissing(json, "layer_types") && !family.gemma_attention) {
    const Json& types = json.at("layer_types");
    if (!types.is_array()) {
      return reader.Invalid(
          absl::StrCat("field 'layer_types' must be a list of strings, found ", types.dump()));
    }
    for (const Json& type : types) {
      if (type != "full_attention") {
        return reader.Unsupported(absl::StrCat(
            "field 'layer_types' must hold only \"full_attention\" (sliding-window attention is "
            "not supported), found ",
            type.dump()));
      }
    }
  }
  return absl::OkStatus();
}

// Partial rotary embeddings in a family with ModelFamily::partial_rotary: partial_rotary_factor
// from rope_parameters, rope_scaling or the top level, the first found (transformers' order).
// head_dim is read beforehand.
absl::Status ParsePartialRotary(const ConfigReader& reader, ModelConfig& config) {
  for (const char* object_field : {"rope_parameters", "rope_scaling", ""}) {
    const Json& object =
        *object_field == '\0' ? reader.json() : reader.json().value(object_field, Json());
    if (!object.is_object() || reader.IsMissing(object, "partial_rotary_factor")) continue;
    const std::string path = *object_field == '\0' ? "" : absl::StrCat(object_field, ".");
    ASSIGN_OR_RETURN(double factor, reader.Double(object, path, "partial_rotary_factor", nullptr));
    if (!(factor > 0) || factor > 1) {
      return reader.Invalid(absl::StrFormat(
          "field '%spartial_rotary_factor' must be in (0, 1], found %g", path, factor));
    }
    config.rotary_dim = static_cast<int64_t>(static_cast<double>(config.head_dim) * factor);
    if (config.rotary_dim <= 0) {
      return reader.Invalid(absl::StrFormat(
          "field '%spartial_rotary_factor' must turn at least one pair of head_dim %d, found %g",
          path, config.head_dim, factor));
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// Gemma 3's attention: the layer kinds (layer_types, or every sliding_window_pattern-th layer
// global), each kind's rope base (transformers 5: rope_parameters.full_attention /
// .sliding_attention; transformers 4: rope_theta, rope_local_base_freq), the query scale, and the
// logit soft-capping. Attention-score soft-capping and bidirectional attention are refused.
absl::Status ParseGemmaAttention(const ConfigReader& reader, ModelConfig& config) {
  const Json& json = reader.json();
  for (const char* field : {"attn_logit_softcapping", "use_bidirectional_attention"}) {
    if (!reader.IsMissing(json, field) && json.at(field) != false) {
      return reader.Unsupported(
          absl::StrFormat("field '%s' must be null or false (not supported), found %s", field,
                          json.at(field).dump()));
    }
  }
  const double no_cap = 0.0;
  ASSIGN_OR_RETURN(config.final_logit_softcapping,
                   reader.Double(json, "", "final_logit_softcapping", &no_cap));
  const double default_scalar = static_cast<double>(config.head_dim);
  ASSIGN_OR_RETURN(config.query_pre_attn_scalar,
                   reader.Double(json, "", "query_pre_attn_scalar", &default_scalar));
  ASSIGN_OR_RETURN(config.sliding_window, reader.Int("sliding_window", 4096));
  if (config.sliding_window <= 0) {
    return reader.Invalid(
        absl::StrFormat("field 'sliding_window' must be a positive number of positions, found %d",
                        config.sliding_window));
  }
  config.layer_sliding.clear();
  if (!reader.IsMissing(json, "layer_types")) {
    const Json& types = json.at("layer_types");
    if (!types.is_array() || types.size() != static_cast<size_t>(config.num_hidden_layers)) {
      return reader.Invalid(absl::StrFormat(
          "field 'layer_types' must be a list of num_hidden_layers %d strings, found %s",
          config.num_hidden_layers, types.dump()));
    }
    for (const Json& type : types) {
      if (type != "sliding_attention" && type != "full_attention") {
        return reader.Unsupported(absl::StrCat(
            "field 'layer_types' must hold \"sliding_attention\" or \"full_attention\", found ",
            type.dump()));
      }
      config.layer_sliding.push_back(type == "sliding_attention");
    }
  } else {
    ASSIGN_OR_RETURN(int64_t pattern, reader.Int("sliding_window_pattern", 6));
    if (pattern <= 0) {
      return reader.Invalid(
          absl::StrFormat("field 'sliding_window_pattern' must be positive, found %d", pattern));
    }
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      config.layer_sliding.push_back((i + 1) % pattern != 0);
    }
  }
  const Json* parameters = nullptr;
  if (!reader.IsMissing(json, "rope_parameters") && json.at("rope_parameters").is_object() &&
      json.at("rope_parameters").contains("full_attention")) {
    parameters = &json.at("rope_parameters");
  }
  if (parameters == nullptr) {
    // transformers 4: rope_scaling applies to the global layers; only none is supported.
    ASSIGN_OR_RETURN(config.rope_scaling, ParseRopeScaling(reader, "rope_scaling"));
    const double local = config.rope_local_theta;
    ASSIGN_OR_RETURN(config.rope_local_theta,
                     reader.Double(json, "", "rope_local_base_freq", &local));
    return absl::OkStatus();
  }
  for (const char* kind : {"full_attention", "sliding_attention"}) {
    const std::string path = absl::StrCat("rope_parameters.", kind, ".");
    const Json& object = parameters->value(kind, Json());
    if (!object.is_object()) {
      return reader.Invalid(absl::StrCat("field 'rope_parameters.", kind,
                                         "' must be an object, found ", object.dump()));
    }
    ASSIGN_OR_RETURN(const std::string* type, reader.String(object, path, "rope_type"));
    if (type != nullptr && *type != "default") {
      return reader.Unsupported(absl::StrFormat(
          "field '%srope_type' must be \"default\" (Gemma's %s scaling is not supported), "
          "found \"%s\"",
          path, *type, *type));
    }
    double& theta =
        std::string(kind) == "full_attention" ? config.rope_theta : config.rope_local_theta;
    const double current = theta;
    ASSIGN_OR_RETURN(theta, reader.Double(object, path, "rope_theta", &current));
  }
  return absl::OkStatus();
}

const char* DTypeJsonName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
    case DType::kQuantized:  // never a config's: its tensors' storage only
      break;
  }
  return "float32";
}

template <typename... Args>
absl::Status InvalidField(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

}  // namespace

const std::vector<ModelFamily>& ModelFamilies() {
  static const std::vector<ModelFamily> kFamilies = {
      {"llama", "LlamaForCausalLM", /*attention_bias=*/false, /*qk_norm=*/false,
       /*gguf_permuted_qk=*/true, /*fused_projections=*/false, /*sliding_window=*/false, "llama",
       /*long_rope=*/false, /*partial_rotary=*/false, Activation::kSilu, /*sandwich_norms=*/false,
       /*norm_weight_offsets=*/false,
       /*gemma_attention=*/false},
      {"qwen2", "Qwen2ForCausalLM", /*attention_bias=*/true, /*qk_norm=*/false,
       /*gguf_permuted_qk=*/false, /*fused_projections=*/false, /*sliding_window=*/false, "qwen2",
       /*long_rope=*/false, /*partial_rotary=*/false, Activation::kSilu, /*sandwich_norms=*/false,
       /*norm_weight_offsets=*/false,
       /*gemma_attention=*/false},
      {"qwen3", "Qwen3ForCausalLM", /*attention_bias=*/false, /*qk_norm=*/true,
       /*gguf_permuted_qk=*/false, /*fused_projections=*/false, /*sliding_window=*/false, "qwen3",
       /*long_rope=*/false, /*partial_rotary=*/false, Activation::kSilu, /*sandwich_norms=*/false,
       /*norm_weight_offsets=*/false,
       /*gemma_attention=*/false},
      {"phi3", "Phi3ForCausalLM", /*attention_bias=*/false, /*qk_norm=*/false,
       /*gguf_permuted_qk=*/false, /*fused_projections=*/true, /*sliding_window=*/true, "phi3",
       /*long_rope=*/true, /*partial_rotary=*/true, Activation::kSilu, /*sandwich_norms=*/false,
       /*norm_weight_offsets=*/false,
       /*gemma_attention=*/false},
      {"mistral", "MistralForCausalLM", /*attention_bias=*/false, /*qk_norm=*/false,
       /*gguf_permuted_qk=*/true, /*fused_projections=*/false, /*sliding_window=*/true, "llama",
       /*long_rope=*/false, /*partial_rotary=*/false, Activation::kSilu, /*sandwich_norms=*/false,
       /*norm_weight_offsets=*/false,
       /*gemma_attention=*/false},
      {"gemma3_text", "Gemma3ForCausalLM", /*attention_bias=*/false, /*qk_norm=*/true,
       /*gguf_permuted_qk=*/false, /*fused_projections=*/false, /*sliding_window=*/true, "gemma3",
       /*long_rope=*/false, /*partial_rotary=*/false, Activation::kGeluTanh,
       /*sandwich_norms=*/true,
       /*norm_weight_offsets=*/true,
       /*gemma_attention=*/true},
  };
  return kFamilies;
}

const ModelFamily* FindModelFamilyByArchitecture(const std::string& architecture) {
  for (const ModelFamily& family : ModelFamilies()) {
    if (architecture == family.architecture) return &family;
  }
  return nullptr;
}

const ModelFamily* FindModelFamilyByName(const std::string& name) {
  for (const ModelFamily& family : ModelFamilies()) {
    if (name == family.name) return &family;
  }
  return nullptr;
}

const ModelFamily* FindModelFamilyByGgufArchitecture(const std::string& gguf_architecture,
                                                     int64_t sliding_window) {
  const ModelFamily* found = nullptr;
  for (const ModelFamily& family : ModelFamilies()) {
    if (gguf_architecture != family.gguf_architecture) continue;
    if (found == nullptr) found = &family;
    if (sliding_window > 0 && family.sliding_window) return &family;
  }
  return found;
}

namespace {

// Each of `field`'s values once, quoted as JSON, in table order.
std::string JoinFamilyField(const char* ModelFamily::*field) {
  std::vector<std::string> names;
  for (const ModelFamily& family : ModelFamilies()) {
    std::string name = Json(family.*field).dump();
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

std::string SupportedFamilyNames() { return JoinFamilyField(&ModelFamily::name); }
std::string SupportedArchitectures() { return JoinFamilyField(&ModelFamily::architecture); }
std::string SupportedGgufArchitectures() {
  return JoinFamilyField(&ModelFamily::gguf_architecture);
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQuantized:
      return "QUANTIZED";
  }
  return "unknown";
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQuantized:
      return 0;
  }
  return 0;
}

int64_t ModelConfig::NumParameters() const {
  const int64_t embeddings = vocab_size * hidden_size;
  const int64_t per_layer = 2 * hidden_size                        // the two norms
                            + q_size() * hidden_size * 2           // q_proj, o_proj
                            + kv_size() * hidden_size * 2          // k_proj, v_proj
                            + intermediate_size * hidden_size * 3  // gate, up, down
                            + (attention_bias ? q_size() + 2 * kv_size() : 0) +
                            (qk_norm ? 2 * head_dim : 0) + (sandwich_norms ? 2 * hidden_size : 0);
  return embeddings * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * per_layer + hidden_size;
}

absl::Status ModelConfig::Validate() const {
  const ModelFamily* known = family();
  if (known == nullptr) {
    return absl::UnimplementedError(
        absl::StrFormat("architecture \"%s\" is not supported, expected one of %s", architecture,
                        SupportedArchitectures()));
  }
  if (attention_bias != known->attention_bias || qk_norm != known->qk_norm ||
      fused_projections != known->fused_projections) {
    auto name = [](bool b) { return b ? "true" : "false"; };
    return InvalidField(
        "attention_bias %s, qk_norm %s and fused_projections %s disagree with %s "
        "(attention_bias %s, qk_norm %s, fused_projections %s)",
        name(attention_bias), name(qk_norm), name(fused_projections), architecture,
        name(known->attention_bias), name(known->qk_norm), name(known->fused_projections));
  }
  if (activation != known->activation || sandwich_norms != known->sandwich_norms) {
    return InvalidField("activation %s and sandwich_norms %s disagree with %s",
                        ActivationName(activation), sandwich_norms ? "true" : "false",
                        architecture);
  }
  if (!layer_sliding.empty() && layer_sliding.size() != static_cast<size_t>(num_hidden_layers)) {
    return InvalidField("field 'layer_types' must have num_hidden_layers %d entries, found %d",
                        num_hidden_layers, layer_sliding.size());
  }
  if (!(query_pre_attn_scalar >= 0) || !std::isfinite(query_pre_attn_scalar) ||
      !(final_logit_softcapping >= 0) || !std::isfinite(final_logit_softcapping) ||
      !(embedding_scale > 0) || !std::isfinite(embedding_scale) || !(rope_local_theta > 0) ||
      !std::isfinite(rope_local_theta)) {
    return InvalidField(
        "fields 'query_pre_attn_scalar' %g and 'final_logit_softcapping' %g must be 0 or "
        "positive, the embedding scale %g and 'rope_local_base_freq' %g positive",
        query_pre_attn_scalar, final_logit_softcapping, embedding_scale, rope_local_theta);
  }
  if (sliding_window < 0 || (sliding_window > 0 && !known->sliding_window)) {
    return InvalidField("field 'sliding_window' must be %s for %s, found %d",
                        known->sliding_window ? "positive or 0 (none)" : "0 (none)", architecture,
                        sliding_window);
  }
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [field, value] : positive) {
    if (value <= 0) return InvalidField("field '%s' must be positive, found %d", field, value);
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return InvalidField("field 'num_key_value_heads' must divide num_attention_heads %d, found %d",
                        num_attention_heads, num_key_value_heads);
  }
  if (head_dim % 2 != 0) {
    return InvalidField("field 'head_dim' must be even (RoPE rotates pairs), found %d", head_dim);
  }
  if (rotary_dim != 0 && rotary_dim != head_dim) {
    if (!known->partial_rotary) {
      return absl::UnimplementedError(absl::StrFormat(
          "partial rotary embeddings (%d of head_dim %d dimensions) are not supported for %s",
          rotary_dim, head_dim, architecture));
    }
    if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
      return InvalidField(
          "field 'partial_rotary_factor' must turn an even number of dimensions, at most head_dim "
          "%d, found %d",
          head_dim, rotary_dim);
    }
  }
  // Keeps every tensor's element count far from int64 overflow.
  constexpr int64_t kMaxDimension = int64_t{1} << 24;
  for (const auto& [field, value] : positive) {
    if (value > kMaxDimension) {
      return InvalidField("field '%s' must be at most %d, found %d", field, kMaxDimension, value);
    }
  }
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) {
    return InvalidField("field 'rms_norm_eps' must be a positive number, found %g", rms_norm_eps);
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) {
    return InvalidField("field 'rope_theta' must be a positive number, found %g", rope_theta);
  }
  if (rope_scaling.rope_type == "llama3") {
    if (!(rope_scaling.factor > 0) || !std::isfinite(rope_scaling.factor)) {
      return InvalidField("field 'rope_scaling.factor' must be a positive number, found %g",
                          rope_scaling.factor);
    }
    if (!(rope_scaling.low_freq_factor > 0) || !std::isfinite(rope_scaling.low_freq_factor)) {
      return InvalidField(
          "field 'rope_scaling.low_freq_factor' must be a positive number, found %g",
          rope_scaling.low_freq_factor);
    }
    if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
        !std::isfinite(rope_scaling.high_freq_factor)) {
      return InvalidField(
          "field 'rope_scaling.high_freq_factor' must be greater than low_freq_factor %g, "
          "found %g",
          rope_scaling.low_freq_factor, rope_scaling.high_freq_factor);
    }
    if (rope_scaling.original_max_position_embeddings <= 0) {
      return InvalidField(
          "field 'rope_scaling.original_max_position_embeddings' must be positive, found %d",
          rope_scaling.original_max_position_embeddings);
    }
  } else if (rope_scaling.rope_type == "longrope") {
    RETURN_IF_ERROR(ValidateLongRope(*this));
  } else if (rope_scaling.rope_type != "default") {
    return InvalidField(
        "field 'rope_scaling.rope_type' must be \"default\", \"llama3\" or \"longrope\", found "
        "\"%s\"",
        rope_scaling.rope_type);
  }
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    return InvalidField("field 'bos_token_id' must be in [0, vocab_size %d) or null, found %d",
                        vocab_size, bos_token_id);
  }
  if (!eos_token_ids.empty() && eos_token_ids.front() != eos_token_id) {
    return InvalidField("field 'eos_token_ids' must start with eos_token_id %d, found %d",
                        eos_token_id, eos_token_ids.front());
  }
  for (int64_t id : eos_token_ids.empty() ? std::vector<int64_t>{eos_token_id} : eos_token_ids) {
    if (id < -1 || id >= vocab_size || (id == -1 && eos_token_ids.size() > 1)) {
      return InvalidField("field 'eos_token_id' must be in [0, vocab_size %d) or null, found %d",
                          vocab_size, id);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source) {
  Json json;
  try {
    json = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object, found ", json.type_name()));
  }
  const ConfigReader reader(json, source);
  ASSIGN_OR_RETURN(const ModelFamily* family, ReadFamily(reader));
  RETURN_IF_ERROR(CheckUnsupportedFeatures(reader, *family));

  ModelConfig config;
  config.architecture = family->architecture;
  config.attention_bias = family->attention_bias;
  config.qk_norm = family->qk_norm;
  config.fused_projections = family->fused_projections;
  config.activation = family->activation;
  config.sandwich_norms = family->sandwich_norms;
  config.norm_weight_offset = family->norm_weight_offsets ? 1.0 : 0.0;
  // A family with sliding windows takes config.json's (null: none); another ignores the field, as
  // transformers does. (Gemma's is read with its layer kinds below.)
  if (family->sliding_window && !family->gemma_attention) {
    ASSIGN_OR_RETURN(config.sliding_window, reader.Int("sliding_window", 0));
    if (config.sliding_window <= 0 && !reader.IsMissing(json, "sliding_window")) {
      return reader.Invalid(absl::StrFormat(
          "field 'sliding_window' must be a positive number of positions or null, found %d",
          config.sliding_window));
    }
  }
  ASSIGN_OR_RETURN(config.vocab_size, reader.RequiredInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequiredInt("hidden_size"));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequiredInt("intermediate_size"));
  ASSIGN_OR_RETURN(config.num_hidden_layers, reader.RequiredInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config.num_attention_heads, reader.RequiredInt("num_attention_heads"));
  if (config.num_attention_heads <= 0) {
    return reader.Invalid(absl::StrFormat("field 'num_attention_heads' must be positive, found %d",
                                          config.num_attention_heads));
  }
  ASSIGN_OR_RETURN(config.num_key_value_heads,
                   reader.Int("num_key_value_heads", config.num_attention_heads));
  if (reader.IsMissing(json, "head_dim")) {
    if (config.hidden_size % config.num_attention_heads != 0) {
      return reader.Invalid(absl::StrFormat(
          "field 'hidden_size' must be a multiple of num_attention_heads %d when head_dim is "
          "absent, found %d",
          config.num_attention_heads, config.hidden_size));
    }
    config.head_dim = config.hidden_size / config.num_attention_heads;
  } else {
    ASSIGN_OR_RETURN(config.head_dim, reader.RequiredInt("head_dim"));
  }
  if (family->partial_rotary) RETURN_IF_ERROR(ParsePartialRotary(reader, config));
  ASSIGN_OR_RETURN(config.max_position_embeddings,
                   reader.Int("max_position_embeddings", config.max_position_embeddings));
  ASSIGN_OR_RETURN(config.rms_norm_eps,
                   reader.Double(json, "", "rms_norm_eps", &config.rms_norm_eps));
  ASSIGN_OR_RETURN(config.rope_theta, reader.Double(json, "", "rope_theta", &config.rope_theta));
  if (family->gemma_attention) {
    config.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
    RETURN_IF_ERROR(ParseGemmaAttention(reader, config));
  } else if (reader.IsMissing(json, "rope_scaling") && !reader.IsMissing(json, "rope_parameters") &&
             json.at("rope_parameters").is_object()) {
    ASSIGN_OR_RETURN(config.rope_theta,
                     reader.Double(json.at("rope_parameters"), "rope_parameters.", "rope_theta",
                                   &config.rope_theta));
    ASSIGN_OR_RETURN(config.rope_scaling, ParseRopeScaling(reader, "rope_parameters"));
  } else {
    ASSIGN_OR_RETURN(config.rope_scaling, ParseRopeScaling(reader, "rope_scaling"));
  }
  // Gemma's configs tie the embeddings unless they say otherwise (transformers' default).
  ASSIGN_OR_RETURN(config.tie_word_embeddings,
                   reader.Bool("tie_word_embeddings", family->gemma_attention));
  ASSIGN_OR_RETURN(config.torch_dtype, ParseTorchDType(reader));
  RETURN_IF_ERROR(ParseTokenIds(reader, config));

  absl::Status status = config.Validate();
  if (!status.ok())
    return absl::Status(status.code(), absl::StrCat(source, ": ", status.message()));
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseModelConfig(text, path);
}

absl::Status MergeGenerationConfig(const std::string& json_text, const std::string& source,
                                   ModelConfig& config) {
  const Json json = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  if (!json.contains("eos_token_id") || json["eos_token_id"].is_null()) return absl::OkStatus();
  const Json& eos = json["eos_token_id"];
  std::vector<int64_t> ids;
  if (eos.is_number_integer()) {
    ids.push_back(eos.get<int64_t>());
  } else if (eos.is_array() && std::all_of(eos.begin(), eos.end(),
                                           [](const Json& id) { return id.is_number_integer(); })) {
    ids = eos.get<std::vector<int64_t>>();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": field 'eos_token_id' must be an integer or a list of integers, found ",
        eos.dump()));
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": field 'eos_token_id': ", id,
                                                     " is not in [0, vocab_size ",
                                                     config.vocab_size, ")"));
    }
  }
  if (config.eos_token_ids.empty() && config.eos_token_id >= 0) {
    config.eos_token_ids.push_back(config.eos_token_id);
  }
  for (int64_t id : ids) {
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) ==
        config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(id);
    }
  }
  config.eos_token_id = config.eos_token_ids.front();
  return absl::OkStatus();
}

std::string ModelConfigToJson(const ModelConfig& config) {
  nlohmann::ordered_json json;
  auto token_id = [](int64_t id) {
    return id < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(id);
  };
  json["architectures"] = {config.architecture};
  const ModelFamily* family = config.family();
  json["attention_bias"] = config.attention_bias;
  json["attention_dropout"] = 0.0;
  json["bos_token_id"] = token_id(config.bos_token_id);
  if (config.eos_token_ids.size() > 1) {
    json["eos_token_id"] = config.eos_token_ids;
  } else {
    json["eos_token_id"] = token_id(config.eos_token_id);
  }
  json["head_dim"] = config.head_dim;
  json[config.activation == Activation::kSilu ? "hidden_act" : "hidden_activation"] =
      ActivationName(config.activation);
  json["hidden_size"] = config.hidden_size;
  json["initializer_range"] = 0.02;
  json["intermediate_size"] = config.intermediate_size;
  json["max_position_embeddings"] = config.max_position_embeddings;
  json["mlp_bias"] = false;
  json["model_type"] = family != nullptr ? family->name : "llama";
  json["num_attention_heads"] = config.num_attention_heads;
  json["num_hidden_layers"] = config.num_hidden_layers;
  json["num_key_value_heads"] = config.num_key_value_heads;
  if (config.RotaryDim() != config.head_dim) {
    json["partial_rotary_factor"] =
        static_cast<double>(config.rotary_dim) / static_cast<double>(config.head_dim);
  }
  json["pretraining_tp"] = 1;
  json["rms_norm_eps"] = config.rms_norm_eps;
  if (config.rope_scaling.rope_type == "llama3") {
    nlohmann::ordered_json scaling;
    scaling["factor"] = config.rope_scaling.factor;
    scaling["high_freq_factor"] = config.rope_scaling.high_freq_factor;
    scaling["low_freq_factor"] = config.rope_scaling.low_freq_factor;
    scaling["original_max_position_embeddings"] =
        config.rope_scaling.original_max_position_embeddings;
    scaling["rope_type"] = "llama3";
    json["rope_scaling"] = std::move(scaling);
  } else if (config.rope_scaling.rope_type == "longrope") {
    // original_max_position_embeddings at the top level, where Phi-3's configs have it.
    nlohmann::ordered_json scaling;
    scaling["attention_factor"] = config.rope_scaling.attention_factor;
    scaling["factor"] = config.rope_scaling.factor;
    scaling["long_factor"] = config.rope_scaling.long_factor;
    scaling["rope_type"] = "longrope";
    scaling["short_factor"] = config.rope_scaling.short_factor;
    json["rope_scaling"] = std::move(scaling);
    json["original_max_position_embeddings"] = config.rope_scaling.original_max_position_embeddings;
  } else {
    json["rope_scaling"] = nullptr;
  }
  json["rope_theta"] = config.rope_theta;
  if (family != nullptr && family->gemma_attention) {
    json["query_pre_attn_scalar"] = config.query_pre_attn_scalar;
    json["final_logit_softcapping"] = config.final_logit_softcapping > 0
                                          ? nlohmann::ordered_json(config.final_logit_softcapping)
                                          : nlohmann::ordered_json();
    json["rope_local_base_freq"] = config.rope_local_theta;
    std::vector<std::string> types;
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      types.push_back(config.LayerSliding(i) ? "sliding_attention" : "full_attention");
    }
    json["layer_types"] = types;
  }
  if (family != nullptr && family->sliding_window) {
    json["sliding_window"] = config.sliding_window > 0
                                 ? nlohmann::ordered_json(config.sliding_window)
                                 : nlohmann::ordered_json();
  }
  json["tie_word_embeddings"] = config.tie_word_embeddings;
  json["torch_dtype"] = DTypeJsonName(config.torch_dtype);
  json["use_cache"] = true;
  json["vocab_size"] = config.vocab_size;
  return json.dump(2) + "\n";
}

const std::vector<double>& ModelConfig::LongRopeFactors() const {
  static const std::vector<double> kNone;
  if (rope_scaling.rope_type != "longrope") return kNone;
  return max_position_embeddings > rope_scaling.original_max_position_embeddings
             ? rope_scaling.long_factor
             : rope_scaling.short_factor;
}

std::vector<int32_t> ModelConfig::EndOfGenerationIds(std::optional<int32_t> tokenizer_eos) const {
  std::vector<int32_t> ids;
  auto add = [&ids](int64_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(static_cast<int32_t>(id));
    }
  };
  for (int64_t id : eos_token_ids) add(id);
  add(eos_token_id);
  if (tokenizer_eos) add(*tokenizer_eos);
  return ids;
}

}  // namespace convoy
