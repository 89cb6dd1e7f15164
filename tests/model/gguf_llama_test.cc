// A Llama from a GGUF file through ModelWeights::Load: the config from metadata, names and
// layouts as the executors expect them, and errors that name the key or tensor.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "address_space.h"
#include "common/half.h"
#include "gguf_test_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_file.h"
#include "model/gguf_llama_config.h"
#include "model/gguf_llama_tensors.h"
#include "model/model_weights.h"
#include "model/tensor_rows.h"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"

namespace convoy {
namespace {

using ::convoy::testing::GgufBuilder;
using ::convoy::testing::LimitAddressSpaceGrowth;
using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::convoy::testing::WriteBytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string LlamaFixture(const std::string& name) {
  return TestSourceDir() + "/tests/fixtures/gguf/llama/" + name + ".gguf";
}

// A small Llama in F32: hidden 64, 4 heads of 16 over 2 KV heads, intermediate 96, 2 layers,
// vocabulary 40. Element (r, c) of each tensor is `tag` * 1000 + r + c / 128, so a value names
// its tensor and row.
constexpr int64_t kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kIntermediate = 96,
                  kLayers = 2, kVocab = 40;

std::vector<float> Tagged(int tag, int64_t rows, int64_t cols) {
  std::vector<float> values;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      values.push_back(static_cast<float>(tag * 1000 + r) + static_cast<float>(c) / 128.0f);
    }
  }
  return values;
}

// `arch` "llama", or "qwen2" (with tag t + 11..13 QKV biases) or "qwen3" (with tag t + 14, 15
// per-head Q/K norms), or "phi3" (Q, K and V fused as attn_qkv with tag t + 1, gate and up as
// ffn_up with tag t + 7), under that architecture's keys.
GgufBuilder SyntheticModel(const std::string& arch) {
  GgufBuilder b;
  const std::string k = arch + ".";
  b.String("general.architecture", arch)
      .U32(k + "context_length", 256)
      .U32(k + "embedding_length", kHidden)
      .U32(k + "block_count", kLayers)
      .U32(k + "feed_forward_length", kIntermediate)
      .U32(k + "attention.head_count", kHeads)
      .U32(k + "attention.head_count_kv", kKvHeads)
      .F32(k + "attention.layer_norm_rms_epsilon", 1e-5f)
      .F32(k + "rope.freq_base", 500000.0f)
      .U32(k + "rope.dimension_count", kHeadDim)
      .U32("tokenizer.ggml.bos_token_id", 3)
      .U32("tokenizer.ggml.eos_token_id", 4);
  auto add = [&](const std::string& name, int tag, int64_t rows, int64_t cols) {
    if (rows == 1) {
      b.F32Tensor(name, {static_cast<uint64_t>(cols)}, Tagged(tag, 1, cols));
    } else {
      b.F32Tensor(name, {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)},
                  Tagged(tag, rows, cols));
    }
  };
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    const int t = 10 * static_cast<int>(i + 1);
    if (arch == "qwen2") {
      add(p + "attn_q.bias", t + 11, 1, kHeads * kHeadDim);
      add(p + "attn_k.bias", t + 12, 1, kKvHeads * kHeadDim);
      add(p + "attn_v.bias", t + 13, 1, kKvHeads * kHeadDim);
    }
    if (arch == "qwen3") {
      add(p + "attn_q_norm.weight", t + 14, 1, kHeadDim);
      add(p + "attn_k_norm.weight", t + 15, 1, kHeadDim);
    }
  }
  add("token_embd.weight", 1, kVocab, kHidden);
  add("output_norm.weight", 2, 1, kHidden);
  add("output.weight", 3, kVocab, kHidden);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    const int t = 10 * static_cast<int>(i + 1);
    add(p + "attn_norm.weight", t + 0, 1, kHidden);
    if (arch == "phi3") {
      add(p + "attn_qkv.weight", t + 1, (kHeads + 2 * kKvHeads) * kHeadDim, kHidden);
    } else {
      add(p + "attn_q.weight", t + 1, kHeads * kHeadDim, kHidden);
      add(p + "attn_k.weight", t + 2, kKvHeads * kHeadDim, kHidden);
      add(p + "attn_v.weight", t + 3, kKvHeads * kHeadDim, kHidden);
    }
    add(p + "attn_output.weight", t + 4, kHidden, kHeads * kHeadDim);
    add(p + "ffn_norm.weight", t + 5, 1, kHidden);
    if (arch == "phi3") {
      add(p + "ffn_up.weight", t + 7, 2 * kIntermediate, kHidden);
    } else {
      add(p + "ffn_gate.weight", t + 6, kIntermediate, kHidden);
      add(p + "ffn_up.weight", t + 7, kIntermediate, kHidden);
    }
    add(p + "ffn_down.weight", t + 8, kHidden, kIntermediate);
  }
  return b;
}

GgufBuilder SyntheticLlama() { return SyntheticModel("llama"); }

absl::StatusOr<std::unique_ptr<ModelWeights>> LoadBytes(const TestDir& dir,
                                                        const std::string& bytes) {
  WriteBytes(dir.Join("m.gguf"), bytes);
  return ModelWeights::Load(dir.Join("m.gguf"));
}

// Element `index` of the view (flat, row-major), whatever its storage: its row read as fp32.
float At(const TensorView& view, int64_t index) {
  const int64_t length = ViewRowLength(view);
  std::vector<float> row(length);
  ViewRowsToFloat(view, index / length, 1, row.data());
  return row[index % length];
}

// The Hugging Face row that GGUF row `row` came from, as llama.cpp's converter permutes:
// Hugging Face (head, half, pair) was written as (head, pair, half).
int64_t HfRowOf(int64_t gguf_row) {
  const int64_t head = gguf_row / kHeadDim, within = gguf_row % kHeadDim;
  return head * kHeadDim + (within % 2) * (kHeadDim / 2) + within / 2;
}

TEST(GgufLlamaTest, FixtureConfigs) {
  auto tiny = ModelWeights::Load(LlamaFixture("tiny_llama"));
  ASSERT_OK(tiny);
  const ModelConfig& c = (*tiny)->config();
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 320);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_EQ(c.rms_norm_eps, static_cast<double>(1e-5f));
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.rope_type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kBF16);  // quantized
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ((*tiny)->dir(), LlamaFixture("tiny_llama"));
  ASSERT_NE((*tiny)->gguf_file(), nullptr);
  EXPECT_EQ((*tiny)->gguf_file()->FindValue("tokenizer.ggml.tokens")->count, 320u);
  // F16 stays F16 and quantized blocks stay quantized, pointing into the mapping (attn_q and
  // attn_k are reordered copies of the file's bytes).
  const LayerWeights& l0 = (*tiny)->layers()[0];
  const GgufFile& file = *(*tiny)->gguf_file();
  EXPECT_EQ(l0.v_proj.dtype, DType::kF16);
  EXPECT_EQ(l0.v_proj.data, file.FindTensor("blk.0.attn_v.weight")->data);
  EXPECT_EQ(l0.q_proj.dtype, DType::kQuantized);
  EXPECT_EQ(l0.q_proj.quant_type, file.FindTensor("blk.0.attn_q.weight")->type);
  EXPECT_EQ(l0.q_proj.num_bytes, file.FindTensor("blk.0.attn_q.weight")->num_bytes);
  EXPECT_EQ(l0.q_proj.shape, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(l0.k_proj.shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(l0.q_proj.name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_NE((*tiny)->lm_head().data, (*tiny)->embed_tokens().data);

  auto tied = ModelWeights::Load(LlamaFixture("tied_llama3"));
  ASSERT_OK(tied);
  const ModelConfig& t = (*tied)->config();
  EXPECT_TRUE(t.tie_word_embeddings);
  EXPECT_EQ((*tied)->lm_head().data, (*tied)->embed_tokens().data);
  EXPECT_EQ(t.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(t.rope_scaling.factor, 8.0);
  EXPECT_EQ(t.eos_token_ids, (std::vector<int64_t>{2, 5}));  // eos, then eot
  EXPECT_EQ((*tied)->layers()[1].k_proj.dtype, DType::kBF16);
  EXPECT_EQ((*tied)->layers()[0].o_proj.dtype, DType::kF32);
}

TEST(GgufLlamaTest, NamesShapesAndRowPermutation) {
  TestDir dir;
  auto weights = LoadBytes(dir, SyntheticLlama().Build());
  ASSERT_OK(weights);
  const ModelConfig& c = (*weights)->config();
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.bos_token_id, 3);
  EXPECT_EQ(c.torch_dtype, DType::kF32);
  const auto& layers = (*weights)->layers();
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(At((*weights)->embed_tokens(), 5 * kHidden), 1005.0f);
  EXPECT_EQ(At((*weights)->norm(), 0), 2000.0f);
  EXPECT_EQ(At((*weights)->lm_head(), 7 * kHidden + 1), 3007.0f + 1.0f / 128);
  for (int64_t i = 0; i < kLayers; ++i) {
    const LayerWeights& l = layers[i];
    const float t = 10.0f * static_cast<float>(i + 1);
    EXPECT_EQ(At(l.input_layernorm, 3), 1000 * t + 3.0f / 128);
    EXPECT_EQ(At(l.post_attention_layernorm, 0), 1000 * (t + 5));
    EXPECT_EQ(l.down_proj.shape, (std::vector<int64_t>{kHidden, kIntermediate}));
    EXPECT_EQ(At(l.down_proj, 9 * kIntermediate + 95), 1000 * (t + 8) + 9 + 95.0f / 128);
    EXPECT_EQ(At(l.v_proj, 17 * kHidden), 1000 * (t + 3) + 17);  // not permuted
    EXPECT_EQ(At(l.o_proj, 17 * kHeads * kHeadDim), 1000 * (t + 4) + 17);
    // Q and K: HF row HfRowOf(g) holds GGUF row g, the whole row.
    for (int64_t g = 0; g < kHeads * kHeadDim; ++g) {
      EXPECT_EQ(At(l.q_proj, HfRowOf(g) * kHidden), 1000 * (t + 1) + static_cast<float>(g));
      EXPECT_EQ(At(l.q_proj, HfRowOf(g) * kHidden + 63), 1000 * (t + 1) + g + 63.0f / 128);
    }
    for (int64_t g = 0; g < kKvHeads * kHeadDim; ++g) {
      EXPECT_EQ(At(l.k_proj, HfRowOf(g) * kHidden + 1), 1000 * (t + 2) + g + 1.0f / 128);
    }
  }
  EXPECT_EQ(GgufLlamaTensorName("model.layers.11.mlp.down_proj.weight"), "blk.11.ffn_down.weight");
  EXPECT_EQ(GgufLlamaTensorName("model.layers.x.mlp.down_proj.weight"), "");
  EXPECT_EQ(GgufLlamaTensorName("lm_head.weight"), "output.weight");
}

// The permutation is undone the same way whatever the stored type: rows move whole, in F16 and in
// quantized blocks, which stay quantized (the file's bytes, rows reordered).
TEST(GgufLlamaTest, PermutationInF16AndQ8_0) {
  GgufBuilder b = SyntheticLlama();
  const int64_t q_rows = kHeads * kHeadDim, k_rows = kKvHeads * kHeadDim;
  std::string f16(q_rows * kHidden * 2, '\0');
  for (int64_t r = 0; r < q_rows; ++r) {
    for (int64_t c = 0; c < kHidden; ++c) {
      const uint16_t bits = FloatToFP16(static_cast<float>(r) + static_cast<float>(c) / 16);
      std::memcpy(f16.data() + 2 * (r * kHidden + c), &bits, 2);
    }
  }
  // Q8_0 blocks of 32: scale 1 (fp16 0x3c00), quants = row index.
  std::string q8;
  for (int64_t r = 0; r < k_rows; ++r) {
    for (int64_t block = 0; block < kHidden / 32; ++block) {
      q8 += GgufBuilder::Le(0x3c00, 2) + std::string(32, static_cast<char>(r));
    }
  }
  b.RemoveTensor("blk.0.attn_q.weight")
      .Tensor("blk.0.attn_q.weight", 1, {q_rows, kHidden}, f16)
      .RemoveTensor("blk.0.attn_k.weight")
      .Tensor("blk.0.attn_k.weight", 8, {k_rows, kHidden}, q8);
  TestDir dir;
  auto weights = LoadBytes(dir, b.Build());
  ASSERT_OK(weights);
  const LayerWeights& l = (*weights)->layers()[0];
  ASSERT_EQ(l.q_proj.dtype, DType::kF16);
  ASSERT_EQ(l.k_proj.dtype, DType::kQuantized);
  ASSERT_EQ(l.k_proj.quant_type, GgmlType::kQ8_0);
  ASSERT_EQ(l.k_proj.num_bytes, q8.size());
  // Hugging Face row HfRowOf(g) holds GGUF row g's blocks byte for byte.
  const size_t row_bytes = q8.size() / k_rows;
  for (int64_t g = 0; g < k_rows; ++g) {
    EXPECT_EQ(
        std::memcmp(l.k_proj.data + HfRowOf(g) * row_bytes, q8.data() + g * row_bytes, row_bytes),
        0)
        << "row " << g;
  }
  for (int64_t g = 0; g < q_rows; ++g) {
    EXPECT_EQ(At(l.q_proj, HfRowOf(g) * kHidden + 3), static_cast<float>(g) + 3.0f / 16);
  }
  for (int64_t g = 0; g < k_rows; ++g) {
    EXPECT_EQ(At(l.k_proj, HfRowOf(g) * kHidden + 40), static_cast<float>(g));
  }
  EXPECT_EQ((*weights)->config().torch_dtype, DType::kBF16);
}

TEST(GgufLlamaTest, TiedWhenOutputIsAbsent) {
  TestDir dir;
  auto weights = LoadBytes(dir, SyntheticLlama().RemoveTensor("output.weight").Build());
  ASSERT_OK(weights);
  EXPECT_TRUE((*weights)->config().tie_word_embeddings);
  EXPECT_EQ((*weights)->lm_head().data, (*weights)->embed_tokens().data);
}

TEST(GgufLlamaTest, MissingRequiredKeys) {
  TestDir dir;
  for (const char* key : {"general.architecture", "llama.context_length", "llama.embedding_length",
                          "llama.block_count", "llama.feed_forward_length",
                          "llama.attention.head_count", "llama.attention.layer_norm_rms_epsilon"}) {
    EXPECT_THAT(LoadBytes(dir, SyntheticLlama().Remove(key).Build()),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(dir.Join("m.gguf")),
                               HasSubstr(absl::StrCat("missing required key '", key, "'")))))
        << key;
  }
  // Optional keys take their defaults.
  auto defaults = LoadBytes(dir, SyntheticLlama()
                                     .Remove("llama.rope.freq_base")
                                     .Remove("llama.rope.dimension_count")
                                     .Remove("tokenizer.ggml.bos_token_id")
                                     .Build());
  ASSERT_OK(defaults);
  EXPECT_EQ((*defaults)->config().rope_theta, 10000.0);
  EXPECT_EQ((*defaults)->config().bos_token_id, -1);
  // Without head_count_kv, every head has its own K and V: the K tensor no longer fits.
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().Remove("llama.attention.head_count_kv").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'blk.0.attn_k.weight' "
                                 "(model.layers.0.self_attn.k_proj.weight) has shape [32, 64], "
                                 "expected [64, 64]")));
}

TEST(GgufLlamaTest, WrongKeysAreNamed) {
  TestDir dir;
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("llama.block_count", "two").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'llama.block_count': expected an integer, found string "
                                 "\"two\"")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("general.architecture", "gpt2").Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("key 'general.architecture': architecture \"gpt2\" is not "
                                 "supported, expected one of \"llama\", \"qwen2\", \"qwen3\", "
                                 "\"phi3\", \"gemma3\"")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().U32("llama.vocab_size", 41).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'llama.vocab_size': expected 40, the rows of tensor "
                                 "'token_embd.weight', found 41")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().U32("llama.rope.dimension_count", 8).Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("key 'llama.rope.dimension_count': expected the head size 16")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("llama.rope.scaling.type", "yarn").Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("key 'llama.rope.scaling.type': expected \"none\"")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().U32("llama.expert_count", 8).Build()),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("llama.expert_count")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().U32("tokenizer.ggml.eos_token_id", 40).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'tokenizer.ggml.eos_token_id': expected a token id below "
                                 "40, found 40")));
  EXPECT_THAT(
      LoadBytes(dir, SyntheticLlama().U32("llama.attention.head_count", 0).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("llama.attention.head_count")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().U32("llama.block_count", 0).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_hidden_layers' must be positive")));
}

TEST(GgufLlamaTest, WrongTensorsAreNamed) {
  TestDir dir;
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().RemoveTensor("blk.1.ffn_up.weight").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing tensor 'blk.1.ffn_up.weight' "
                                 "(model.layers.1.mlp.up_proj.weight, expected shape [96, 64])")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().RemoveTensor("token_embd.weight").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing tensor 'token_embd.weight'")));
  // Transposed: GGUF dims in the wrong order.
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama()
                                 .RemoveTensor("blk.0.ffn_down.weight")
                                 .F32Tensor("blk.0.ffn_down.weight", {kIntermediate, kHidden},
                                            Tagged(0, kIntermediate, kHidden))
                                 .Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'blk.0.ffn_down.weight' "
                                 "(model.layers.0.mlp.down_proj.weight) has shape [96, 64], "
                                 "expected [64, 96]")));
  // Types without a dequantizer, in shapes that fit: IQ4_NL (32 values in 18 bytes) and I8.
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama()
                                 .RemoveTensor("blk.1.attn_v.weight")
                                 .Tensor("blk.1.attn_v.weight", 20, {kKvHeads * kHeadDim, kHidden},
                                         std::string(kKvHeads * kHeadDim * 2 * 18, '\0'))
                                 .Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("tensor 'blk.1.attn_v.weight' "
                                 "(model.layers.1.self_attn.v_proj.weight): type IQ4_NL is not "
                                 "supported")));
  EXPECT_THAT(
      LoadBytes(dir, SyntheticLlama()
                         .RemoveTensor("blk.0.ffn_norm.weight")
                         .Tensor("blk.0.ffn_norm.weight", 24, {kHidden}, std::string(kHidden, '\0'))
                         .Build()),
      StatusIs(absl::StatusCode::kUnimplemented,
               HasSubstr("tensor 'blk.0.ffn_norm.weight' "
                         "(model.layers.0.post_attention_layernorm.weight): type I8 is "
                         "not supported")));
  EXPECT_THAT(
      LoadBytes(dir, SyntheticLlama()
                         .F32Tensor("blk.0.attn_q.bias", {kHidden}, std::vector<float>(kHidden))
                         .Build()),
      StatusIs(absl::StatusCode::kUnimplemented,
               HasSubstr("tensor 'blk.0.attn_q.bias' is not part of LlamaForCausalLM")));
}

// Qwen's Q and K rows are stored as Hugging Face has them (llama.cpp's converter permutes only
// Llama's: Qwen uses NEOX-style rope, which is the executors' rotate-half), with their family's
// extra tensors.
TEST(GgufLlamaTest, QwenFamiliesKeepTheirRowsAndExtraTensors) {
  TestDir dir;
  for (const std::string arch : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    auto weights = LoadBytes(dir, SyntheticModel(arch).Build());
    ASSERT_OK(weights);
    const ModelConfig& c = (*weights)->config();
    EXPECT_EQ(c.architecture, arch == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM");
    EXPECT_EQ(c.attention_bias, arch == "qwen2");
    EXPECT_EQ(c.qk_norm, arch == "qwen3");
    EXPECT_EQ(c.rope_theta, 500000.0);
    for (int64_t i = 0; i < kLayers; ++i) {
      const LayerWeights& l = (*weights)->layers()[i];
      const float t = 10.0f * static_cast<float>(i + 1);
      for (int64_t r = 0; r < kHeads * kHeadDim; ++r) {
        EXPECT_EQ(At(l.q_proj, r * kHidden), 1000 * (t + 1) + static_cast<float>(r));
      }
      for (int64_t r = 0; r < kKvHeads * kHeadDim; ++r) {
        EXPECT_EQ(At(l.k_proj, r * kHidden + 1), 1000 * (t + 2) + r + 1.0f / 128);
      }
      if (arch == "qwen2") {
        EXPECT_EQ(l.q_bias.shape, (std::vector<int64_t>{kHeads * kHeadDim}));
        EXPECT_EQ(At(l.q_bias, 5), 1000 * (t + 11) + 5.0f / 128);
        EXPECT_EQ(At(l.k_bias, 3), 1000 * (t + 12) + 3.0f / 128);
        EXPECT_EQ(At(l.v_bias, 31), 1000 * (t + 13) + 31.0f / 128);
        EXPECT_EQ(l.q_norm.data, nullptr);
      } else {
        EXPECT_EQ(l.q_norm.shape, (std::vector<int64_t>{kHeadDim}));
        EXPECT_EQ(At(l.q_norm, 7), 1000 * (t + 14) + 7.0f / 128);
        EXPECT_EQ(At(l.k_norm, 15), 1000 * (t + 15) + 15.0f / 128);
        EXPECT_EQ(l.q_bias.data, nullptr);
      }
    }
  }
  EXPECT_EQ(GgufLlamaTensorName("model.layers.2.self_attn.v_proj.bias"), "blk.2.attn_v.bias");
  EXPECT_EQ(GgufLlamaTensorName("model.layers.0.self_attn.k_norm.weight"),
            "blk.0.attn_k_norm.weight");
}

// A file whose architecture and tensors disagree is refused naming the tensor: a tensor the
// family needs that is missing, or a bias or per-head norm it does not have.
TEST(GgufLlamaTest, FamilyTensorsThatDisagreeWithTheArchitectureAreNamed) {
  TestDir dir;
  EXPECT_THAT(LoadBytes(dir, SyntheticModel("qwen2").RemoveTensor("blk.1.attn_q.bias").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing tensor 'blk.1.attn_q.bias' "
                                 "(model.layers.1.self_attn.q_proj.bias, expected shape [64])")));
  EXPECT_THAT(
      LoadBytes(dir, SyntheticModel("qwen3").RemoveTensor("blk.0.attn_k_norm.weight").Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("missing tensor 'blk.0.attn_k_norm.weight' "
                         "(model.layers.0.self_attn.k_norm.weight, expected shape [16])")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama()
                                 .F32Tensor("blk.1.attn_q_norm.weight", {kHeadDim},
                                            std::vector<float>(kHeadDim))
                                 .Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("tensor 'blk.1.attn_q_norm.weight' is not part of "
                                 "LlamaForCausalLM")));
  EXPECT_THAT(LoadBytes(dir, SyntheticModel("qwen3")
                                 .F32Tensor("blk.0.attn_v.bias", {kKvHeads * kHeadDim},
                                            std::vector<float>(kKvHeads * kHeadDim))
                                 .Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("tensor 'blk.0.attn_v.bias' is not part of Qwen3ForCausalLM")));
  // A family's keys are its own: a qwen2 file with llama's keys lacks them.
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("general.architecture", "qwen2").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing required key 'qwen2.context_length'")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("general.architecture", "gemma2").Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("\"gemma2\" is not supported"),
                             HasSubstr("\"llama\", \"qwen2\", \"qwen3\", \"phi3\", "
                                       "\"gemma3\""))));
}

// llama.cpp's converter writes Mistral as "llama"; a llama file that sets a sliding window is
// Mistral, with that window. Phi-3's window is its own key's.
TEST(GgufLlamaTest, ASlidingWindowIsMistralsOrPhi3s) {
  TestDir dir;
  auto mistral = LoadBytes(dir, SyntheticLlama().U32("llama.attention.sliding_window", 12).Build());
  ASSERT_OK(mistral);
  EXPECT_EQ((*mistral)->config().architecture, "MistralForCausalLM");
  EXPECT_EQ((*mistral)->config().sliding_window, 12);
  auto llama = LoadBytes(dir, SyntheticLlama().U32("llama.attention.sliding_window", 0).Build());
  ASSERT_OK(llama);
  EXPECT_EQ((*llama)->config().architecture, "LlamaForCausalLM");
  EXPECT_EQ((*llama)->config().sliding_window, 0);
  // Mistral's Q and K rows are permuted as Llama's are, and put back.
  const LayerWeights& l = (*mistral)->layers()[0];
  for (int64_t r = 0; r < kHeads * kHeadDim; ++r) {
    EXPECT_EQ(At(l.q_proj, HfRowOf(r) * kHidden), 1000 * 11 + static_cast<float>(r));
  }
  auto phi3 =
      LoadBytes(dir, SyntheticModel("phi3").U32("phi3.attention.sliding_window", 2047).Build());
  ASSERT_OK(phi3);
  EXPECT_EQ((*phi3)->config().architecture, "Phi3ForCausalLM");
  EXPECT_EQ((*phi3)->config().sliding_window, 2047);
  EXPECT_THAT(
      LoadBytes(dir, SyntheticModel("qwen2").U32("qwen2.attention.sliding_window", 8).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("field 'sliding_window' must be 0 (none) for Qwen2ForCausalLM")));
}

// Phi-3 stores Q, K and V as one matrix (attn_qkv) and gate and up as another (ffn_up, gate rows
// first): the views are their rows, unpermuted (NEOX rope).
TEST(GgufLlamaTest, Phi3FusedProjectionsAreSplitIntoViews) {
  TestDir dir;
  auto weights =
      LoadBytes(dir, SyntheticModel("phi3").U32("phi3.attention.sliding_window", 0).Build());
  ASSERT_OK(weights);
  const ModelConfig& c = (*weights)->config();
  EXPECT_EQ(c.architecture, "Phi3ForCausalLM");
  EXPECT_TRUE(c.fused_projections);
  EXPECT_EQ(c.sliding_window, 0);
  for (int64_t i = 0; i < kLayers; ++i) {
    const LayerWeights& l = (*weights)->layers()[i];
    const float t = 10.0f * static_cast<float>(i + 1);
    const int64_t q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim;
    ASSERT_EQ(l.q_proj.shape, (std::vector<int64_t>{q, kHidden}));
    ASSERT_EQ(l.k_proj.shape, (std::vector<int64_t>{kv, kHidden}));
    ASSERT_EQ(l.v_proj.shape, (std::vector<int64_t>{kv, kHidden}));
    ASSERT_EQ(l.gate_proj.shape, (std::vector<int64_t>{kIntermediate, kHidden}));
    ASSERT_EQ(l.up_proj.shape, (std::vector<int64_t>{kIntermediate, kHidden}));
    for (int64_t r = 0; r < q; ++r) {
      EXPECT_EQ(At(l.q_proj, r * kHidden), 1000 * (t + 1) + static_cast<float>(r));
    }
    for (int64_t r = 0; r < kv; ++r) {
      EXPECT_EQ(At(l.k_proj, r * kHidden + 1), 1000 * (t + 1) + (q + r) + 1.0f / 128);
      EXPECT_EQ(At(l.v_proj, r * kHidden), 1000 * (t + 1) + static_cast<float>(q + kv + r));
    }
    for (int64_t r = 0; r < kIntermediate; ++r) {
      EXPECT_EQ(At(l.gate_proj, r * kHidden), 1000 * (t + 7) + static_cast<float>(r));
      EXPECT_EQ(At(l.up_proj, r * kHidden), 1000 * (t + 7) + static_cast<float>(kIntermediate + r));
    }
  }
  EXPECT_EQ(GgufLlamaTensorName("model.layers.1.self_attn.qkv_proj.weight"),
            "blk.1.attn_qkv.weight");
  EXPECT_EQ(GgufLlamaTensorName("model.layers.0.mlp.gate_up_proj.weight"), "blk.0.ffn_up.weight");
  // The fused tensors are what a phi3 file must have; unfused ones are not read.
  EXPECT_THAT(LoadBytes(dir, SyntheticModel("phi3").RemoveTensor("blk.1.attn_qkv.weight").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing tensor 'blk.1.attn_qkv.weight' "
                                 "(model.layers.1.self_attn.qkv_proj.weight, expected shape "
                                 "[128, 64])")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLlama().String("general.architecture", "phi3").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing required key 'phi3.context_length'")));
}

// Phi-3's LongRoPE as llama.cpp's converter writes it: the factors as tensors beside
// phi3.rope.scaling.original_context_length and phi3.rope.scaling.attn_factor.
GgufBuilder SyntheticLongRope() {
  std::vector<float> short_factors, long_factors;
  for (int64_t i = 0; i < kHeadDim / 2; ++i) {
    short_factors.push_back(1.0f + 0.125f * static_cast<float>(i));
    long_factors.push_back(2.0f + static_cast<float>(i));
  }
  return SyntheticModel("phi3")
      .U32("phi3.attention.sliding_window", 0)
      .U32("phi3.rope.scaling.original_context_length", 64)
      .F32("phi3.rope.scaling.attn_factor", 1.5f)
      .F32Tensor("rope_factors_short.weight", {kHeadDim / 2}, short_factors)
      .F32Tensor("rope_factors_long.weight", {kHeadDim / 2}, long_factors);
}

TEST(GgufLlamaTest, Phi3LongRope) {
  TestDir dir;
  auto weights = LoadBytes(dir, SyntheticLongRope().Build());
  ASSERT_OK(weights);
  const ModelConfig& c = (*weights)->config();
  const RopeScaling& s = c.rope_scaling;
  EXPECT_EQ(s.rope_type, "longrope");
  EXPECT_EQ(s.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(s.factor, 4.0);  // context_length 256 over 64
  EXPECT_DOUBLE_EQ(s.attention_factor, 1.5);
  ASSERT_EQ(s.short_factor.size(), static_cast<size_t>(kHeadDim / 2));
  EXPECT_DOUBLE_EQ(s.short_factor[3], 1.375);
  EXPECT_DOUBLE_EQ(s.long_factor[3], 5.0);
  EXPECT_EQ(c.LongRopeFactors(), s.long_factor);
  // Without attn_factor: transformers' sqrt(1 + ln 4 / ln 64).
  weights = LoadBytes(dir, SyntheticLongRope().Remove("phi3.rope.scaling.attn_factor").Build());
  ASSERT_OK(weights);
  EXPECT_DOUBLE_EQ((*weights)->config().rope_scaling.attention_factor,
                   std::sqrt(1.0 + std::log(4.0) / std::log(64.0)));
}

// Phi-4-mini's partial rotary embeddings: rope.dimension_count below the head size, LongRoPE's
// factors one per rotary pair.
TEST(GgufLlamaTest, Phi3PartialRotary) {
  TestDir dir;
  GgufBuilder b = SyntheticLongRope();
  b.U32("phi3.rope.dimension_count", 8)
      .RemoveTensor("rope_factors_short.weight")
      .RemoveTensor("rope_factors_long.weight")
      .F32Tensor("rope_factors_short.weight", {4}, {1, 1, 1, 1})
      .F32Tensor("rope_factors_long.weight", {4}, {1, 2, 3, 4});
  auto weights = LoadBytes(dir, b.Build());
  ASSERT_OK(weights);
  EXPECT_EQ((*weights)->config().rotary_dim, 8);
  EXPECT_EQ((*weights)->config().LongRopeFactors(), (std::vector<double>{1, 2, 3, 4}));
  // Head-sized factors for fewer rotary pairs are refused, naming the tensor.
  EXPECT_THAT(LoadBytes(dir, SyntheticLongRope().U32("phi3.rope.dimension_count", 8).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'rope_factors_short.weight': expected shape [4]")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLongRope().U32("phi3.rope.dimension_count", 7).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'phi3.rope.dimension_count': expected an even number of "
                                 "dimensions, at most the head size 16, found 7")));
}

TEST(GgufLlamaTest, Phi3LongRopeErrorsNameTheKeyOrTensor) {
  TestDir dir;
  EXPECT_THAT(LoadBytes(dir, SyntheticLongRope().RemoveTensor("rope_factors_long.weight").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'rope_factors_long.weight': expected shape [8] "
                                 "(a factor per rotary pair) in F32, F16 or BF16, found none")));
  EXPECT_THAT(LoadBytes(dir, SyntheticLongRope()
                                 .RemoveTensor("rope_factors_short.weight")
                                 .F32Tensor("rope_factors_short.weight", {4}, {1, 1, 1, 1})
                                 .Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'rope_factors_short.weight': expected shape [8] "
                                 "(a factor per rotary pair) in F32, F16 or BF16, found F32 [4]")));
  EXPECT_THAT(
      LoadBytes(
          dir, SyntheticLongRope()
                   .RemoveTensor("rope_factors_short.weight")
                   .F32Tensor("rope_factors_short.weight", {kHeadDim / 2}, {1, 1, 1, 0, 1, 1, 1, 1})
                   .Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("field 'rope_scaling.short_factor' must hold positive numbers, found 0")));
  EXPECT_THAT(
      LoadBytes(dir,
                SyntheticLongRope().Remove("phi3.rope.scaling.original_context_length").Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("missing required key 'phi3.rope.scaling.original_context_length'")));
  EXPECT_THAT(
      LoadBytes(dir,
                SyntheticLongRope().U32("phi3.rope.scaling.original_context_length", 0).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 'phi3.rope.scaling.original_context_length': expected a "
                         "positive context, found 0")));
  EXPECT_THAT(
      LoadBytes(dir, SyntheticLongRope().F32("phi3.rope.scaling.attn_factor", -1.0f).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("field 'rope_scaling.attention_factor' must be a positive number")));
  // Another family's file refuses the factors.
  GgufBuilder llama = SyntheticLlama();
  llama.F32Tensor("rope_factors_short.weight", {kHeadDim / 2}, std::vector<float>(8, 1.0f))
      .F32Tensor("rope_factors_long.weight", {kHeadDim / 2}, std::vector<float>(8, 2.0f))
      .U32("llama.rope.scaling.original_context_length", 64);
  EXPECT_THAT(LoadBytes(dir, llama.Build()),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("LongRoPE scaling is supported for \"Phi3ForCausalLM\" only")));
}

// Found by gguf_fuzzer (an out-of-memory): a block_count of 2^24 layers, the most a config may
// have, in a file with two layers' tensors. The load walks the expected tensors one at a time and
// stops at the first missing one, so it costs what the file holds, not what the count claims
// (it built 151 million tensor names first, about 17 GB). In a child process whose address space
// may grow by 512 MiB at most.
TEST(GgufLlamaDeathTest, ALayerCountBeyondTheFileIsRefusedAtItsFirstMissingTensor) {
  TestDir dir;
  const std::string bytes = SyntheticLlama().U32("llama.block_count", 1 << 24).Build();
  EXPECT_EXIT(
      {
        if (!LimitAddressSpaceGrowth(size_t{512} << 20)) std::exit(2);
        absl::StatusOr<std::unique_ptr<ModelWeights>> weights = LoadBytes(dir, bytes);
        std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
        std::exit(absl::IsInvalidArgument(weights.status()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "missing tensor 'blk.2.attn_norm.weight'");
}

TEST(GgufLlamaTest, NotAGgufFile) {
  TestDir dir;
  WriteBytes(dir.Join("config.json"), "{}");
  EXPECT_THAT(ModelWeights::Load(dir.Join("config.json")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("not a GGUF file"),
                             HasSubstr("a model is a directory with config.json, or a GGUF "
                                       "file"))));
}

// Random corruption of the metadata and tensor descriptions: a model or an error, never a crash.
TEST(GgufLlamaTest, RandomCorruptionNeverCrashes) {
  const std::string bytes = SyntheticLlama().Build();
  TestDir dir;
  WriteBytes(dir.Join("clean.gguf"), bytes);
  auto file = GgufFile::Open(dir.Join("clean.gguf"));
  ASSERT_OK(file);
  const size_t header_end = (*file)->data_offset();
  std::mt19937_64 rng(7);
  int loaded = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::string corrupt = bytes;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 3); ++i) {
      const size_t at = rng() % header_end;
      corrupt[at] = static_cast<char>(corrupt[at] ^ (1 << (rng() % 8)));
    }
    auto weights = LoadBytes(dir, corrupt);
    if (weights.ok()) {
      ++loaded;
    } else {
      EXPECT_FALSE(weights.status().message().empty());
    }
  }
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace convoy
