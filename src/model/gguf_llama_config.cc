#include "model/gguf_llama_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_rope.h"
#include "model/long_rope.h"

namespace convoy {
namespace {

constexpr char kArchitectureKey[] = "general.architecture";
// Llama 3's original context, used when a file with rope frequency factors does not say.
constexpr int64_t kDefaultOriginalContext = 8192;
// Phi-3's LongRoPE factors for short and long contexts.
constexpr const char* kLongRopeTensors[] = {"rope_factors_short.weight",
                                            "rope_factors_long.weight"};

// Typed metadata reads; every error names the file and the key.
class MetadataReader {
 public:
  explicit MetadataReader(const GgufFile& file) : file_(file) {}

  // The family's keys are under its GGUF architecture: "llama.context_length",
  // "qwen2.context_length".
  void set_prefix(const std::string& architecture) { prefix_ = absl::StrCat(architecture, "."); }
  std::string Key(const char* name) const { return absl::StrCat(prefix_, name); }
  const std::string& prefix() const { return prefix_; }

  absl::Status Invalid(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(file_.path(), ": ", message));
  }
  absl::Status Unsupported(const std::string& message) const {
    return absl::UnimplementedError(absl::StrCat(file_.path(), ": ", message));
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(const std::string& key) const {
    const GgufValue* value = file_.FindValue(key);
    if (value == nullptr) return std::nullopt;
    std::optional<int64_t> result = value->AsInt();
    if (!result.has_value()) {
      return Invalid(
          absl::StrCat("key '", key, "': expected an integer, found ", value->Describe()));
    }
    return result;
  }

  absl::StatusOr<int64_t> RequiredInt(const std::string& key) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> result, OptionalInt(key));
    if (!result.has_value()) return Missing(key, "an integer");
    return *result;
  }

  absl::StatusOr<std::optional<double>> OptionalFloat(const std::string& key) const {
    const GgufValue* value = file_.FindValue(key);
    if (value == nullptr) return std::nullopt;
    std::optional<double> result = value->AsDouble();
    if (!result.has_value()) {
      return Invalid(absl::StrCat("key '", key, "': expected a number, found ", value->Describe()));
    }
    return result;
  }

  absl::StatusOr<double> RequiredFloat(const std::string& key) const {
    ASSIGN_OR_RETURN(std::optional<double> result, OptionalFloat(key));
    if (!result.has_value()) return Missing(key, "a number");
    return *result;
  }

  absl::StatusOr<std::optional<std::string>> OptionalString(const std::string& key) const {
    const GgufValue* value = file_.FindValue(key);
    if (value == nullptr) return std::nullopt;
    if (value->type != GgufValueType::kString) {
      return Invalid(absl::StrCat("key '", key, "': expected a string, found ", value->Describe()));
    }
    return std::string(value->string);
  }

  absl::Status Missing(const std::string& key, const char* expected) const {
    return Invalid(absl::StrCat("missing required key '", key, "' (expected ", expected, ")"));
  }

 private:
  const GgufFile& file_;
  std::string prefix_;
};

absl::Status ReadShape(const MetadataReader& reader, ModelConfig& config) {
  auto Key = [&reader](const char* name) { return reader.Key(name); };
  ASSIGN_OR_RETURN(config.max_position_embeddings, reader.RequiredInt(Key("context_length")));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequiredInt(Key("embedding_length")));
  ASSIGN_OR_RETURN(config.num_hidden_layers, reader.RequiredInt(Key("block_count")));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequiredInt(Key("feed_forward_length")));
  ASSIGN_OR_RETURN(config.num_attention_heads, reader.RequiredInt(Key("attention.head_count")));
  if (config.num_attention_heads <= 0) {
    return reader.Invalid(absl::StrFormat("key '%s': expected a positive head count, found %d",
                                          Key("attention.head_count"), config.num_attention_heads));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads,
                   reader.OptionalInt(Key("attention.head_count_kv")));
  config.num_key_value_heads = kv_heads.value_or(config.num_attention_heads);
  ASSIGN_OR_RETURN(config.rms_norm_eps,
                   reader.RequiredFloat(Key("attention.layer_norm_rms_epsilon")));

  ASSIGN_OR_RETURN(std::optional<int64_t> key_length,
                   reader.OptionalInt(Key("attention.key_length")));
  ASSIGN_OR_RETURN(std::optional<int64_t> value_length,
                   reader.OptionalInt(Key("attention.value_length")));
  if (key_length.has_value() && value_length.has_value() && *key_length != *value_length) {
    return reader.Unsupported(absl::StrFormat(
        "key '%s' is %d and '%s' is %d: different key and value head sizes are not supported",
        Key("attention.key_length"), *key_length, Key("attention.value_length"), *value_length));
  }
  if (key_length.has_value() || value_length.has_value()) {
    config.head_dim = key_length.has_value() ? *key_length : *value_length;
  } else if (config.hidden_size % config.num_attention_heads != 0) {
    return reader.Invalid(
        absl::StrFormat("key '%s' (%d) must be a multiple of '%s' (%d) when '%s' is absent",
                        Key("embedding_length"), config.hidden_size, Key("attention.head_count"),
                        config.num_attention_heads, Key("attention.key_length")));
  } else {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> rope_dims,
                   reader.OptionalInt(Key("rope.dimension_count")));
  if (rope_dims.has_value() && *rope_dims != config.head_dim) {
    // Partial rotary embeddings (Phi-4-mini), in a family that has them.
    if (!config.family()->partial_rotary) {
      return reader.Unsupported(absl::StrFormat(
          "key '%s': expected the head size %d (partial rotary embeddings are not supported for "
          "%s), found %d",
          Key("rope.dimension_count"), config.head_dim, config.architecture, *rope_dims));
    }
    if (*rope_dims <= 0 || *rope_dims > config.head_dim || *rope_dims % 2 != 0) {
      return reader.Invalid(absl::StrFormat(
          "key '%s': expected an even number of dimensions, at most the head size %d, found %d",
          Key("rope.dimension_count"), config.head_dim, *rope_dims));
    }
    config.rotary_dim = *rope_dims;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> experts, reader.OptionalInt(Key("expert_count")));
  if (experts.value_or(0) > 0) {
    return reader.Unsupported(
        absl::StrFormat("key '%s': expected 0 (mixture of experts is not supported), found %d",
                        Key("expert_count"), *experts));
  }
  return absl::OkStatus();
}

// One rope factor per rotary pair, in F32, F16 or BF16.
absl::StatusOr<std::vector<float>> ReadRopeFactors(const GgufFile& file,
                                                   const MetadataReader& reader, const char* name,
                                                   int64_t count) {
  const GgufTensor* tensor = file.FindTensor(name);
  if (tensor == nullptr || tensor->shape != std::vector<int64_t>{count} ||
      !CanDequantize(tensor->type)) {
    return reader.Invalid(absl::StrFormat(
        "tensor '%s': expected shape [%d] (a factor per rotary pair) in F32, F16 or BF16, found %s",
        name, count,
        tensor == nullptr ? std::string("none")
                          : absl::StrCat(GgmlTypeName(tensor->type), " [",
                                         absl::StrJoin(tensor->shape, ", "), "]")));
  }
  std::vector<float> factors(static_cast<size_t>(count));
  RETURN_IF_ERROR(DequantizeRow(*tensor, 0, factors.data()));
  return factors;
}

// Phi-3's LongRoPE as llama.cpp's converter writes it: the short and long factors as tensors,
// rope.scaling.original_context_length, and rope.scaling.attn_factor (transformers' attention
// factor for context_length / original_context_length when absent).
absl::Status ReadLongRope(const GgufFile& file, const MetadataReader& reader, ModelConfig& config) {
  RopeScaling& s = config.rope_scaling;
  s.rope_type = "longrope";
  for (const auto& [name, factors] :
       {std::pair{kLongRopeTensors[0], &s.short_factor}, {kLongRopeTensors[1], &s.long_factor}}) {
    ASSIGN_OR_RETURN(std::vector<float> values,
                     ReadRopeFactors(file, reader, name, config.RotaryDim() / 2));
    factors->assign(values.begin(), values.end());
  }
  const std::string original_key = reader.Key("rope.scaling.original_context_length");
  ASSIGN_OR_RETURN(s.original_max_position_embeddings, reader.RequiredInt(original_key));
  if (s.original_max_position_embeddings <= 0) {
    return reader.Invalid(absl::StrFormat("key '%s': expected a positive context, found %d",
                                          original_key, s.original_max_position_embeddings));
  }
  s.factor = static_cast<double>(config.max_position_embeddings) /
             static_cast<double>(s.original_max_position_embeddings);
  ASSIGN_OR_RETURN(std::optional<double> attention_factor,
                   reader.OptionalFloat(reader.Key("rope.scaling.attn_factor")));
  s.attention_factor = attention_factor.value_or(
      LongRopeAttentionFactor(s.factor, s.original_max_position_embeddings));
  return absl::OkStatus();
}

absl::Status ReadRope(const GgufFile& file, const MetadataReader& reader, ModelConfig& config) {
  auto Key = [&reader](const char* name) { return reader.Key(name); };
  ASSIGN_OR_RETURN(std::optional<double> theta, reader.OptionalFloat(Key("rope.freq_base")));
  config.rope_theta = theta.value_or(config.rope_theta);
  ASSIGN_OR_RETURN(std::optional<std::string> type,
                   reader.OptionalString(Key("rope.scaling.type")));
  ASSIGN_OR_RETURN(std::optional<double> factor, reader.OptionalFloat(Key("rope.scaling.factor")));
  ASSIGN_OR_RETURN(std::optional<double> linear, reader.OptionalFloat(Key("rope.scale_linear")));
  if (type.has_value() && *type != "none") {
    return reader.Unsupported(absl::StrFormat(
        "key '%s': expected \"none\" (only llama3 scaling, stored as rope_freqs.weight, is "
        "supported), found \"%s\"",
        Key("rope.scaling.type"), *type));
  }
  if (!type.has_value() && factor.has_value() && *factor != 1.0) {
    return reader.Unsupported(absl::StrFormat(
        "key '%s' is %g without a scaling type: expected 1 (linear scaling is not supported)",
        Key("rope.scaling.factor"), *factor));
  }
  if (linear.has_value() && *linear != 1.0) {
    return reader.Unsupported(
        absl::StrFormat("key '%s': expected 1 (linear scaling is not supported), found %g",
                        Key("rope.scale_linear"), *linear));
  }

  const GgufTensor* freqs = file.FindTensor("rope_freqs.weight");
  if (file.FindTensor(kLongRopeTensors[0]) != nullptr ||
      file.FindTensor(kLongRopeTensors[1]) != nullptr) {
    if (freqs != nullptr) {
      return reader.Unsupported(absl::StrFormat(
          "tensor 'rope_freqs.weight': expected none beside LongRoPE's '%s' and '%s'",
          kLongRopeTensors[0], kLongRopeTensors[1]));
    }
    return ReadLongRope(file, reader, config);
  }
  if (freqs == nullptr) return absl::OkStatus();
  const int64_t count = config.head_dim / 2;
  if (freqs->shape != std::vector<int64_t>{count} || !CanDequantize(freqs->type)) {
    return reader.Invalid(absl::StrFormat(
        "tensor 'rope_freqs.weight': expected shape [%d] in F32, F16 or BF16, found %s [%s]", count,
        GgmlTypeName(freqs->type), absl::StrJoin(freqs->shape, ", ")));
  }
  std::vector<float> factors(static_cast<size_t>(count));
  RETURN_IF_ERROR(DequantizeRow(*freqs, 0, factors.data()));
  ASSIGN_OR_RETURN(std::optional<int64_t> original,
                   reader.OptionalInt(Key("rope.scaling.original_context_length")));
  absl::StatusOr<RopeScaling> scaling = FitLlama3RopeScaling(
      factors, config.rope_theta, config.head_dim, original.value_or(kDefaultOriginalContext));
  if (!scaling.ok()) {
    return absl::Status(
        scaling.status().code(),
        absl::StrCat(file.path(), ": tensor 'rope_freqs.weight': ", scaling.status().message()));
  }
  config.rope_scaling = *scaling;
  return absl::OkStatus();
}

// Gemma 3 as llama.cpp runs it (the converter writes neither the layer kinds nor the local rope
// base nor query_pre_attn_scalar): every sixth layer global, the others sliding-window layers with
// rope base 10000; queries scaled by 1 / sqrt(head_dim), or 1 / sqrt(hidden / heads) for the
// 62-layer 27B; the norms' stored weights are the scales (the converter added the 1).
absl::Status ReadGemma(const MetadataReader& reader, ModelConfig& config) {
  constexpr int64_t kPattern = 6, k27BLayers = 62;
  constexpr double kLocalRopeBase = 10000.0;
  if (config.sliding_window <= 0) {
    return reader.Missing(reader.Key("attention.sliding_window"), "a positive window");
  }
  ASSIGN_OR_RETURN(std::optional<double> attention_cap,
                   reader.OptionalFloat(reader.Key("attn_logit_softcapping")));
  if (attention_cap.has_value()) {
    return reader.Unsupported(
        absl::StrFormat("key '%s': attention score soft-capping is not supported, found %g",
                        reader.Key("attn_logit_softcapping"), *attention_cap));
  }
  ASSIGN_OR_RETURN(std::optional<double> cap,
                   reader.OptionalFloat(reader.Key("final_logit_softcapping")));
  config.final_logit_softcapping = cap.value_or(0.0);
  config.norm_weight_offset = 0.0;
  config.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
  config.rope_local_theta = kLocalRopeBase;
  config.query_pre_attn_scalar =
      config.num_hidden_layers == k27BLayers
          ? static_cast<double>(config.hidden_size / config.num_attention_heads)
          : static_cast<double>(config.head_dim);
  config.layer_sliding.clear();
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    config.layer_sliding.push_back((i + 1) % kPattern != 0);
  }
  return absl::OkStatus();
}

absl::Status ReadTokenIds(const MetadataReader& reader, ModelConfig& config) {
  auto read_id = [&](const char* name) -> absl::StatusOr<int64_t> {
    const std::string key = absl::StrCat("tokenizer.ggml.", name);
    ASSIGN_OR_RETURN(std::optional<int64_t> id, reader.OptionalInt(key));
    if (!id.has_value()) return -1;
    if (*id < 0 || *id >= config.vocab_size) {
      return reader.Invalid(absl::StrFormat("key '%s': expected a token id below %d, found %d", key,
                                            config.vocab_size, *id));
    }
    return *id;
  };
  ASSIGN_OR_RETURN(config.bos_token_id, read_id("bos_token_id"));
  ASSIGN_OR_RETURN(config.eos_token_id, read_id("eos_token_id"));
  config.eos_token_ids.clear();
  if (config.eos_token_id < 0) return absl::OkStatus();
  config.eos_token_ids.push_back(config.eos_token_id);
  for (const char* name : {"eot_token_id", "eom_token_id"}) {
    ASSIGN_OR_RETURN(int64_t id, read_id(name));
    if (id >= 0 && std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) ==
                       config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(id);
    }
  }
  return absl::OkStatus();
}

bool IsMatrix(const GgufTensor& tensor) {
  return tensor.shape.size() == 2 && tensor.name.find("norm") == std::string::npos &&
         tensor.name.rfind("rope_", 0) != 0;
}

DType StorageDType(const GgufFile& file) {
  bool all_f32 = true, all_f16_or_f32 = true;
  for (const GgufTensor& tensor : file.tensors()) {
    if (!IsMatrix(tensor)) continue;
    all_f32 = all_f32 && tensor.type == GgmlType::kF32;
    all_f16_or_f32 =
        all_f16_or_f32 && (tensor.type == GgmlType::kF32 || tensor.type == GgmlType::kF16);
  }
  if (all_f32) return DType::kF32;
  if (all_f16_or_f32) return DType::kF16;
  return DType::kBF16;
}

}  // namespace

absl::StatusOr<ModelConfig> GgufLlamaConfig(const GgufFile& file) {
  MetadataReader reader(file);
  ASSIGN_OR_RETURN(std::optional<std::string> architecture,
                   reader.OptionalString(kArchitectureKey));
  if (!architecture.has_value()) {
    return reader.Missing(kArchitectureKey,
                          absl::StrCat("one of ", SupportedGgufArchitectures()).c_str());
  }
  reader.set_prefix(*architecture);
  // 0 (llama.cpp's converter writes it for a Phi-3 without a window) or absent: none.
  ASSIGN_OR_RETURN(std::optional<int64_t> window,
                   reader.OptionalInt(reader.Key("attention.sliding_window")));
  if (window.value_or(0) < 0) {
    return reader.Invalid(absl::StrFormat("key '%s': expected a window of 0 or more, found %d",
                                          reader.Key("attention.sliding_window"), *window));
  }
  const ModelFamily* family = FindModelFamilyByGgufArchitecture(*architecture, window.value_or(0));
  if (family == nullptr) {
    return reader.Unsupported(
        absl::StrFormat("key '%s': architecture \"%s\" is not supported, expected one of %s",
                        kArchitectureKey, *architecture, SupportedGgufArchitectures()));
  }
  ModelConfig config;
  config.architecture = family->architecture;
  config.attention_bias = family->attention_bias;
  config.qk_norm = family->qk_norm;
  config.fused_projections = family->fused_projections;
  config.sliding_window = window.value_or(0);
  config.activation = family->activation;
  config.sandwich_norms = family->sandwich_norms;
  RETURN_IF_ERROR(ReadShape(reader, config));
  if (family->gemma_attention) RETURN_IF_ERROR(ReadGemma(reader, config));

  const GgufTensor* embeddings = file.FindTensor("token_embd.weight");
  if (embeddings == nullptr) {
    return reader.Invalid(
        "missing tensor 'token_embd.weight' (the embeddings, which give the vocabulary size)");
  }
  if (embeddings->shape.size() != 2) {
    return reader.Invalid(
        absl::StrFormat("tensor 'token_embd.weight': expected 2 dimensions [vocab, %d], found [%s]",
                        config.hidden_size, absl::StrJoin(embeddings->shape, ", ")));
  }
  config.vocab_size = embeddings->shape[0];
  ASSIGN_OR_RETURN(std::optional<int64_t> vocab, reader.OptionalInt(reader.Key("vocab_size")));
  if (vocab.has_value() && *vocab != config.vocab_size) {
    return reader.Invalid(
        absl::StrFormat("key '%s': expected %d, the rows of tensor 'token_embd.weight', found %d",
                        reader.Key("vocab_size"), config.vocab_size, *vocab));
  }
  config.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  config.torch_dtype = StorageDType(file);
  RETURN_IF_ERROR(ReadRope(file, reader, config));
  RETURN_IF_ERROR(ReadTokenIds(reader, config));

  absl::Status status = config.Validate();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(file.path(), ": ", status.message(),
                                                    " (from the ", reader.prefix(), "* metadata)"));
  }
  return config;
}

}  // namespace convoy
