#include "model/gguf_llama_tensors.h"

#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "convoy/status_macros.h"
#include "model/gguf_dequantize.h"
#include "model/model_weights.h"

namespace convoy {
namespace {

struct NamePair {
  const char* hf;
  const char* gguf;
};

constexpr NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// Under "model.layers.N." and "blk.N.".
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    // Phi-3: llama.cpp stores the fused gate | up rows as ffn_up.
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

// Under "model.layers.N." and "blk.N.", for a family with sandwich norms (Gemma 3), before
// kLayerNames.
constexpr NamePair kSandwichLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The GGUF row that holds Hugging Face row `row` of a projection with `heads` heads of
// `head_dim` rows. llama.cpp's converter reorders each head's rows from (half, pair) to
// (pair, half), so that a rotated pair sits in adjacent rows.
int64_t PermutedRow(int64_t row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = row / head_dim;
  const int64_t within = row % head_dim;
  return head * head_dim + 2 * (within % half) + within / half;
}

}  // namespace

std::string GgufLlamaTensorName(const std::string& hf_name, bool sandwich_norms) {
  for (const NamePair& pair : kGlobalNames) {
    if (hf_name == pair.hf) return pair.gguf;
  }
  constexpr absl::string_view kLayerPrefix = "model.layers.";
  if (!absl::StartsWith(hf_name, kLayerPrefix)) return "";
  const absl::string_view rest = absl::string_view(hf_name).substr(kLayerPrefix.size());
  const size_t dot = rest.find('.');
  int64_t layer;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer) ||
      layer < 0) {
    return "";
  }
  if (sandwich_norms) {
    for (const NamePair& pair : kSandwichLayerNames) {
      if (rest.substr(dot + 1) == pair.hf) return absl::StrCat("blk.", layer, ".", pair.gguf);
    }
  }
  for (const NamePair& pair : kLayerNames) {
    if (rest.substr(dot + 1) == pair.hf) return absl::StrCat("blk.", layer, ".", pair.gguf);
  }
  return "";
}

absl::StatusOr<std::unique_ptr<GgufLlamaTensors>> GgufLlamaTensors::Load(
    std::unique_ptr<GgufFile> file, const ModelConfig& config) {
  std::unique_ptr<GgufLlamaTensors> tensors(new GgufLlamaTensors());
  tensors->file_ = std::move(file);
  // A bias or a per-head norm that the family does not have would change every answer if it
  // were ignored: refuse it.
  for (const GgufTensor& tensor : tensors->file_->tensors()) {
    const bool qkv_bias = absl::EndsWith(tensor.name, ".attn_q.bias") ||
                          absl::EndsWith(tensor.name, ".attn_k.bias") ||
                          absl::EndsWith(tensor.name, ".attn_v.bias");
    const bool qk_norm = absl::EndsWith(tensor.name, ".attn_q_norm.weight") ||
                         absl::EndsWith(tensor.name, ".attn_k_norm.weight");
    if ((absl::EndsWith(tensor.name, ".bias") && !(qkv_bias && config.attention_bias)) ||
        (qk_norm && !config.qk_norm)) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: tensor '%s' is not part of %s (attention_bias %s, qk_norm %s)",
          tensors->file_->path(), tensor.name, config.architecture,
          config.attention_bias ? "true" : "false", config.qk_norm ? "true" : "false"));
    }
  }
  const ModelFamily* family = config.family();
  const bool permuted = family != nullptr && family->gguf_permuted_qk;
  // One expected tensor at a time (not LlamaTensorShapes' whole list): the first one missing
  // ends the load, so a block_count far beyond the file's tensors costs nothing.
  for (int64_t i = 0; i < LlamaTensorCount(config); ++i) {
    const TensorShape expected = LlamaTensorShape(config, i);
    int64_t rotary_heads = 0;
    if (permuted && absl::EndsWith(expected.name, "q_proj.weight")) {
      rotary_heads = config.num_attention_heads;
    }
    if (permuted && absl::EndsWith(expected.name, "k_proj.weight")) {
      rotary_heads = config.num_key_value_heads;
    }
    absl::Status status;
    try {
      status =
          tensors->AddTensor(expected.name, expected.shape, rotary_heads, config.sandwich_norms);
    } catch (const std::bad_alloc&) {
      status = absl::ResourceExhaustedError(
          absl::StrFormat("%s: no memory for tensor %s", tensors->file_->path(), expected.name));
    }
    RETURN_IF_ERROR(status);
  }
  return tensors;
}

absl::Status GgufLlamaTensors::AddTensor(const std::string& hf_name,
                                         const std::vector<int64_t>& expected_shape,
                                         int64_t rotary_heads, bool sandwich_norms) {
  const std::string gguf_name = GgufLlamaTensorName(hf_name, sandwich_norms);
  const GgufTensor* tensor = file_->FindTensor(gguf_name);
  const std::string& path = file_->path();
  if (tensor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: missing tensor '%s' (%s, expected shape %s)", path, gguf_name, hf_name,
                        ShapeString(expected_shape)));
  }
  if (tensor->shape != expected_shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor '%s' (%s) has shape %s, expected %s (shapes outermost first; GGUF lists "
        "them innermost first)",
        path, gguf_name, hf_name, ShapeString(tensor->shape), ShapeString(expected_shape)));
  }
  if (!CanDequantize(tensor->type)) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: tensor '%s' (%s): type %s is not supported, expected %s", path,
                        gguf_name, hf_name, GgmlTypeName(tensor->type), kDequantizableTypeNames));
  }
  TensorView view;
  view.name = hf_name;
  view.shape = tensor->shape;
  view.file = path;
  const int64_t row_length = tensor->RowLength();
  const int64_t rows = row_length == 0 ? 0 : tensor->NumElements() / row_length;
  const int64_t head_dim = rotary_heads > 0 ? rows / rotary_heads : 0;
  // The GGUF row that holds row r of the view.
  auto source_row = [&](int64_t r) { return rotary_heads > 0 ? PermutedRow(r, head_dim) : r; };

  switch (tensor->type) {
    case GgmlType::kF32:
      view.dtype = DType::kF32;
      break;
    case GgmlType::kF16:
      view.dtype = DType::kF16;
      break;
    case GgmlType::kBF16:
      view.dtype = DType::kBF16;
      break;
    default:
      view.dtype = DType::kQuantized;
      view.quant_type = tensor->type;
  }
  view.num_bytes = tensor->num_bytes;
  if (rotary_heads == 0) {
    view.data = tensor->data;
  } else {
    // Rows move whole, in their own storage (a row is whole blocks).
    const size_t row_bytes = tensor->num_bytes / static_cast<size_t>(rows);
    std::vector<std::byte>& out = row_buffers_.emplace_back(tensor->num_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out.data() + r * row_bytes, tensor->data + source_row(r) * row_bytes, row_bytes);
    }
    view.data = out.data();
  }
  views_[hf_name] = std::move(view);
  return absl::OkStatus();
}

}  // namespace convoy
