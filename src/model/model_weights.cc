#include "model/model_weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/file_util.h"
#include "model/gguf_file.h"
#include "model/gguf_llama_config.h"
#include "model/gguf_llama_tensors.h"
#include "model/tensor_rows.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Where each tensor lives: the tensor name -> its view in one of the opened files.
using TensorIndex = std::map<std::string, const TensorView*>;

// Opens the shards listed in the index file, each once, and checks that each holds the tensors
// the index says it does.
absl::Status OpenShards(const std::string& dir,
                        std::vector<std::unique_ptr<SafetensorsFile>>& files, TensorIndex& index) {
  const std::string index_path = JoinPath(dir, kIndexFile);
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not valid JSON: ", e.what()));
  }
  auto weight_map = json.is_object() ? json.find("weight_map") : json.end();
  if (!json.is_object() || weight_map == json.end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": expected an object with a 'weight_map' object of tensor name -> file"));
  }
  std::map<std::string, const SafetensorsFile*> opened;
  for (const auto& [name, shard_json] : weight_map->items()) {
    if (!shard_json.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map: tensor '", name,
                                                     "': expected a file name, found ",
                                                     shard_json.dump()));
    }
    const std::string shard = shard_json.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map: tensor '", name,
                       "': expected a file name in the model directory, found \"", shard, "\""));
    }
    auto it = opened.find(shard);
    if (it == opened.end()) {
      absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
          SafetensorsFile::Open(JoinPath(dir, shard));
      if (!file.ok()) {
        return absl::Status(file.status().code(),
                            absl::StrCat(file.status().message(), " (listed in ", index_path,
                                         " for tensor '", name, "')"));
      }
      files.push_back(std::move(file).value());
      it = opened.emplace(shard, files.back().get()).first;
    }
    const auto& tensors = it->second->tensors();
    auto tensor = tensors.find(name);
    if (tensor == tensors.end()) {
      return absl::NotFoundError(absl::StrCat(it->second->path(), ": missing tensor '", name,
                                              "', which ", index_path, " places there"));
    }
    index[name] = &tensor->second;
  }
  return absl::OkStatus();
}

// A layer's tensors under "model.layers.N.", in order, and the size of each dimension.
enum class Size { kHidden, kQ, kKv, kIntermediate, kHeadDim, kQkv, kGateUp };
// kSeparate: only when the family does not store the projections fused; kFused: only when it
// does.
enum class Needs { kAll, kAttentionBias, kQkNorm, kSeparate, kFused, kSandwich };
struct LayerTensor {
  const char* name;
  TensorView LayerWeights::*view;
  std::vector<Size> shape;
  Needs needs;
};

const std::vector<LayerTensor>& LayerTensors() {
  using L = LayerWeights;
  static const std::vector<LayerTensor> kTensors = {
      {"input_layernorm.weight", &L::input_layernorm, {Size::kHidden}, Needs::kAll},
      {"self_attn.qkv_proj.weight", &L::qkv_proj, {Size::kQkv, Size::kHidden}, Needs::kFused},
      {"self_attn.q_proj.weight", &L::q_proj, {Size::kQ, Size::kHidden}, Needs::kSeparate},
      {"self_attn.q_proj.bias", &L::q_bias, {Size::kQ}, Needs::kAttentionBias},
      {"self_attn.k_proj.weight", &L::k_proj, {Size::kKv, Size::kHidden}, Needs::kSeparate},
      {"self_attn.k_proj.bias", &L::k_bias, {Size::kKv}, Needs::kAttentionBias},
      {"self_attn.v_proj.weight", &L::v_proj, {Size::kKv, Size::kHidden}, Needs::kSeparate},
      {"self_attn.v_proj.bias", &L::v_bias, {Size::kKv}, Needs::kAttentionBias},
      {"self_attn.q_norm.weight", &L::q_norm, {Size::kHeadDim}, Needs::kQkNorm},
      {"self_attn.k_norm.weight", &L::k_norm, {Size::kHeadDim}, Needs::kQkNorm},
      {"self_attn.o_proj.weight", &L::o_proj, {Size::kHidden, Size::kQ}, Needs::kAll},
      {"post_attention_layernorm.weight",
       &L::post_attention_layernorm,
       {Size::kHidden},
       Needs::kAll},
      {"pre_feedforward_layernorm.weight",
       &L::pre_feedforward_layernorm,
       {Size::kHidden},
       Needs::kSandwich},
      {"post_feedforward_layernorm.weight",
       &L::post_feedforward_layernorm,
       {Size::kHidden},
       Needs::kSandwich},
      {"mlp.gate_up_proj.weight", &L::gate_up_proj, {Size::kGateUp, Size::kHidden}, Needs::kFused},
      {"mlp.gate_proj.weight",
       &L::gate_proj,
       {Size::kIntermediate, Size::kHidden},
       Needs::kSeparate},
      {"mlp.up_proj.weight", &L::up_proj, {Size::kIntermediate, Size::kHidden}, Needs::kSeparate},
      {"mlp.down_proj.weight", &L::down_proj, {Size::kHidden, Size::kIntermediate}, Needs::kAll},
  };
  return kTensors;
}

bool Has(const ModelConfig& config, Needs needs) {
  switch (needs) {
    case Needs::kAttentionBias:
      return config.attention_bias;
    case Needs::kQkNorm:
      return config.qk_norm;
    case Needs::kSeparate:
      return !config.fused_projections;
    case Needs::kFused:
      return config.fused_projections;
    case Needs::kSandwich:
      return config.sandwich_norms;
    case Needs::kAll:
      break;
  }
  return true;
}

// The layer tensors this config's family has, in LayerTensors() order.
std::vector<const LayerTensor*> FamilyLayerTensors(const ModelConfig& config) {
  std::vector<const LayerTensor*> tensors;
  for (const LayerTensor& tensor : LayerTensors()) {
    if (Has(config, tensor.needs)) tensors.push_back(&tensor);
  }
  return tensors;
}

int64_t Dimension(const ModelConfig& config, Size size) {
  switch (size) {
    case Size::kHidden:
      return config.hidden_size;
    case Size::kQ:
      return config.q_size();
    case Size::kKv:
      return config.kv_size();
    case Size::kIntermediate:
      return config.intermediate_size;
    case Size::kHeadDim:
      return config.head_dim;
    case Size::kQkv:
      return config.q_size() + 2 * config.kv_size();
    case Size::kGateUp:
      return 2 * config.intermediate_size;
  }
  return 0;
}

// Rows first .. first + count - 1 of a 2-D view, in its storage (each row whole, blocks and all).
TensorView RowSlice(const TensorView& view, const char* name, int64_t first, int64_t count) {
  TensorView slice = view;
  slice.name = absl::StrCat(view.name, " (", name, ")");
  const int64_t row_bytes = ViewRowBytes(view);
  slice.shape = {count, view.shape[1]};
  slice.data = view.data + first * row_bytes;
  slice.num_bytes = static_cast<size_t>(count * row_bytes);
  return slice;
}

}  // namespace

int64_t LlamaTensorCount(const ModelConfig& config) {
  // The embeddings, the layers, the final norm and lm_head unless tied.
  const int64_t per_layer = static_cast<int64_t>(FamilyLayerTensors(config).size());
  return 1 + per_layer * config.num_hidden_layers + 1 + (config.tie_word_embeddings ? 0 : 1);
}

TensorShape LlamaTensorShape(const ModelConfig& config, int64_t index) {
  const int64_t hidden = config.hidden_size;
  if (index == 0) return {"model.embed_tokens.weight", {config.vocab_size, hidden}};
  const std::vector<const LayerTensor*> layer_tensors = FamilyLayerTensors(config);
  const int64_t per_layer = static_cast<int64_t>(layer_tensors.size());
  const int64_t layer = (index - 1) / per_layer;
  if (layer >= config.num_hidden_layers) {
    if (index == 1 + per_layer * config.num_hidden_layers) {
      return {"model.norm.weight", {hidden}};
    }
    return {"lm_head.weight", {config.vocab_size, hidden}};
  }
  const LayerTensor& tensor = *layer_tensors[(index - 1) % per_layer];
  TensorShape shape{absl::StrCat("model.layers.", layer, ".", tensor.name), {}};
  for (Size size : tensor.shape) shape.shape.push_back(Dimension(config, size));
  return shape;
}

std::vector<TensorShape> LlamaTensorShapes(const ModelConfig& config) {
  std::vector<TensorShape> shapes;
  for (int64_t i = 0; i < LlamaTensorCount(config); ++i) {
    shapes.push_back(LlamaTensorShape(config, i));
  }
  return shapes;
}

ModelWeights::ModelWeights() = default;
ModelWeights::~ModelWeights() = default;

const GgufFile* ModelWeights::gguf_file() const {
  return gguf_ == nullptr ? nullptr : &gguf_->file();
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) return LoadGguf(path);

  const std::string& dir = path;
  std::unique_ptr<ModelWeights> weights(new ModelWeights());
  weights->dir_ = dir;
  ASSIGN_OR_RETURN(weights->config_, LoadModelConfig(JoinPath(dir, "config.json")));
  if (const std::string generation = JoinPath(dir, "generation_config.json");
      PathExists(generation)) {
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(generation));
    RETURN_IF_ERROR(MergeGenerationConfig(text, generation, weights->config_));
  }

  TensorIndex index;
  std::string where;  // names the file(s) searched, for "missing tensor" errors
  const std::string single_path = JoinPath(dir, kSingleFile);
  if (PathExists(single_path)) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(single_path));
    for (const auto& [name, view] : file->tensors()) index[name] = &view;
    weights->files_.push_back(std::move(file));
    where = single_path;
  } else if (PathExists(JoinPath(dir, kIndexFile))) {
    RETURN_IF_ERROR(OpenShards(dir, weights->files_, index));
    where = JoinPath(dir, kIndexFile);
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir, ": expected ", kSingleFile, " or ", kIndexFile, ", found neither"));
  }
  RETURN_IF_ERROR(weights->AssignViews(index, where));
  return weights;
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::LoadGguf(const std::string& path) {
  std::unique_ptr<ModelWeights> weights(new ModelWeights());
  weights->dir_ = path;
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok() && absl::StrContains(file.status().message(), "not a GGUF file")) {
    return absl::Status(file.status().code(),
                        absl::StrCat(file.status().message(),
                                     " (a model is a directory with config.json, or a GGUF file)"));
  }
  RETURN_IF_ERROR(file.status());
  ASSIGN_OR_RETURN(weights->config_, GgufLlamaConfig(**file));
  ASSIGN_OR_RETURN(weights->gguf_,
                   GgufLlamaTensors::Load(std::move(file).value(), weights->config_));
  TensorIndex index;
  for (const auto& [name, view] : weights->gguf_->views()) index[name] = &view;
  RETURN_IF_ERROR(weights->AssignViews(index, path));
  return weights;
}

absl::Status ModelWeights::AssignViews(const TensorIndex& index, const std::string& where) {
  // Views in LlamaTensorShapes order, made one at a time: the first missing tensor ends the walk
  // before a layer count the weights do not hold costs anything.
  std::vector<TensorView> views;
  for (int64_t i = 0; i < LlamaTensorCount(config_); ++i) {
    const TensorShape expected = LlamaTensorShape(config_, i);
    auto it = index.find(expected.name);
    if (it == index.end()) {
      return absl::NotFoundError(absl::StrFormat("%s: missing tensor '%s' (expected shape %s)",
                                                 where, expected.name,
                                                 ShapeString(expected.shape)));
    }
    const TensorView& view = *it->second;
    if (view.shape != expected.shape) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s' has shape %s, expected %s", view.file, expected.name,
                          ShapeString(view.shape), ShapeString(expected.shape)));
    }
    views.push_back(view);
  }

  // A bias or a per-head norm that the family does not have would change every answer if it
  // were ignored: refuse it.
  for (const auto& [tensor_name, view] : index) {
    // A named reference: clang 14 cannot capture a structured binding.
    const std::string& name = tensor_name;
    if ((absl::EndsWith(name, ".bias") || absl::EndsWith(name, "q_norm.weight") ||
         absl::EndsWith(name, "k_norm.weight")) &&
        std::none_of(views.begin(), views.end(),
                     [&name](const TensorView& v) { return v.name == name; })) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: tensor '%s' is not part of %s (config says attention_bias %s, qk_norm %s)",
          view->file, name, config_.architecture, config_.attention_bias ? "true" : "false",
          config_.qk_norm ? "true" : "false"));
    }
  }

  size_t next = 0;
  embed_tokens_ = views[next++];
  layers_.resize(static_cast<size_t>(config_.num_hidden_layers));
  const std::vector<const LayerTensor*> layer_tensors = FamilyLayerTensors(config_);
  for (LayerWeights& layer : layers_) {
    for (const LayerTensor* tensor : layer_tensors) layer.*(tensor->view) = views[next++];
    if (config_.fused_projections) {
      // Rows q | k | v, and gate | up (Phi-3's order, which llama.cpp's converter keeps).
      const int64_t q = config_.q_size(), kv = config_.kv_size();
      const int64_t inter = config_.intermediate_size;
      layer.q_proj = RowSlice(layer.qkv_proj, "q", 0, q);
      layer.k_proj = RowSlice(layer.qkv_proj, "k", q, kv);
      layer.v_proj = RowSlice(layer.qkv_proj, "v", q + kv, kv);
      layer.gate_proj = RowSlice(layer.gate_up_proj, "gate", 0, inter);
      layer.up_proj = RowSlice(layer.gate_up_proj, "up", inter, inter);
    }
  }
  norm_ = views[next++];
  lm_head_ = config_.tie_word_embeddings ? embed_tokens_ : views[next++];
  return absl::OkStatus();
}

}  // namespace convoy
