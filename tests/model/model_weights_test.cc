#include "model/model_weights.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/address_space.h"
#include "model/random_model.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::LimitAddressSpaceGrowth;
using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::convoy::testing::WriteBytes;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;

ModelConfig SmallConfig(bool tied) {
  ModelConfig config;
  config.vocab_size = 64;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 8;
  config.tie_word_embeddings = tied;
  return config;
}

RandomModelOptions Options(DType dtype, bool tied, int shards) {
  RandomModelOptions options;
  options.config = SmallConfig(tied);
  options.seed = 3;
  options.dtype = dtype;
  options.num_shards = shards;
  return options;
}

float ValueAt(const TensorView& view, int64_t i) {
  if (view.dtype == DType::kF32) {
    float value;
    std::memcpy(&value, view.data + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, view.data + 2 * i, 2);
  return view.dtype == DType::kBF16 ? BF16ToFloat(bits) : FP16ToFloat(bits);
}

// Every tensor in the order of LlamaTensorShapes, from the loaded weights.
std::vector<const TensorView*> AllViews(const ModelWeights& weights) {
  std::vector<const TensorView*> views = {&weights.embed_tokens()};
  for (const LayerWeights& layer : weights.layers()) {
    for (const TensorView* view :
         {&layer.input_layernorm, &layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj,
          &layer.post_attention_layernorm, &layer.gate_proj, &layer.up_proj, &layer.down_proj}) {
      views.push_back(view);
    }
  }
  views.push_back(&weights.norm());
  if (!weights.config().tie_word_embeddings) views.push_back(&weights.lm_head());
  return views;
}

using LoadParam = std::tuple<DType, bool, int>;  // dtype, tied, shards

class ModelWeightsLoadTest : public ::testing::TestWithParam<LoadParam> {};

TEST_P(ModelWeightsLoadTest, LoadsEveryTensorWithItsShape) {
  const auto [dtype, tied, shards] = GetParam();
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(dtype, tied, shards)));
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(dir.path());
  ASSERT_OK(weights);
  const ModelWeights& w = **weights;
  EXPECT_EQ(w.dir(), dir.path());
  EXPECT_EQ(w.config().torch_dtype, dtype);
  EXPECT_EQ(w.config().tie_word_embeddings, tied);
  ASSERT_EQ(w.layers().size(), 2u);

  const std::vector<TensorShape> expected = LlamaTensorShapes(w.config());
  const std::vector<const TensorView*> views = AllViews(w);
  ASSERT_EQ(views.size(), expected.size());
  std::map<std::string, int> files;
  for (size_t i = 0; i < views.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(views[i]->name, expected[i].name);
    EXPECT_EQ(views[i]->shape, expected[i].shape);
    EXPECT_EQ(views[i]->dtype, dtype);
    EXPECT_NE(views[i]->data, nullptr);
    EXPECT_EQ(views[i]->num_bytes,
              static_cast<size_t>(views[i]->NumElements()) * static_cast<size_t>(DTypeSize(dtype)));
    ++files[views[i]->file];
  }
  EXPECT_EQ(files.size(), static_cast<size_t>(shards));
  if (shards == 1) {
    EXPECT_THAT(files.begin()->first, EndsWith("/model.safetensors"));
  } else {
    EXPECT_THAT(files.begin()->first, EndsWith("/model-00001-of-00003.safetensors"));
  }

  EXPECT_EQ(w.layers()[1].k_proj.shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(w.layers()[1].o_proj.shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(w.layers()[0].down_proj.shape, (std::vector<int64_t>{32, 48}));
  if (tied) {
    EXPECT_EQ(w.lm_head().data, w.embed_tokens().data);
    EXPECT_EQ(w.lm_head().name, "model.embed_tokens.weight");
  } else {
    EXPECT_NE(w.lm_head().data, w.embed_tokens().data);
    EXPECT_EQ(w.lm_head().name, "lm_head.weight");
    EXPECT_EQ(w.lm_head().shape, (std::vector<int64_t>{64, 32}));
  }
  // Norm weights are near 1, so the views point at the right bytes in the right dtype.
  EXPECT_NEAR(ValueAt(w.norm(), 0), 1.0f, 0.6f);
  EXPECT_NEAR(ValueAt(w.layers()[1].post_attention_layernorm, 31), 1.0f, 0.6f);
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, ModelWeightsLoadTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16),
                                            ::testing::Bool(), ::testing::Values(1, 3)),
                         [](const ::testing::TestParamInfo<LoadParam>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_tied_" : "_untied_") +
                                  std::to_string(std::get<2>(info.param)) + "shards";
                         });

TEST(ModelWeightsTest, HalfDtypesHoldTheRoundedF32Values) {
  TestDir f32_dir, half_dir;
  ASSERT_OK(WriteRandomModel(f32_dir.path(), Options(DType::kF32, false, 1)));
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    ASSERT_OK(WriteRandomModel(half_dir.path(), Options(dtype, false, 3)));
    absl::StatusOr<std::unique_ptr<ModelWeights>> f32 = ModelWeights::Load(f32_dir.path());
    absl::StatusOr<std::unique_ptr<ModelWeights>> half = ModelWeights::Load(half_dir.path());
    ASSERT_OK(f32);
    ASSERT_OK(half);
    const std::vector<const TensorView*> a = AllViews(**f32), b = AllViews(**half);
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < a.size(); ++t) {
      for (int64_t i = 0; i < a[t]->NumElements(); ++i) {
        float f;
        std::memcpy(&f, a[t]->data + 4 * i, 4);
        uint16_t bits;
        std::memcpy(&bits, b[t]->data + 2 * i, 2);
        const uint16_t expected = dtype == DType::kBF16 ? FloatToBF16(f) : FloatToFP16(f);
        ASSERT_EQ(bits, expected) << a[t]->name << "[" << i << "]";
      }
    }
  }
}

// Rewrites `path` with `edit` applied to its tensors (copies of their bytes).
void RewriteSafetensors(const std::string& path,
                        void (*edit)(std::vector<TensorToWrite>& tensors)) {
  std::vector<TensorToWrite> tensors;
  {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_OK(file);
    for (const auto& [name, view] : (*file)->tensors()) {
      tensors.push_back({name, view.dtype, view.shape,
                         std::vector<std::byte>(view.data, view.data + view.num_bytes)});
    }
  }
  edit(tensors);
  ASSERT_OK(WriteSafetensors(path, tensors));
}

TEST(ModelWeightsTest, TiedConfigIgnoresAPresentLmHead) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kF32, false, 1)));
  ModelConfig tied = SmallConfig(true);
  WriteBytes(dir.Join("config.json"), ModelConfigToJson(tied));
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(dir.path());
  ASSERT_OK(weights);
  EXPECT_EQ((*weights)->lm_head().data, (*weights)->embed_tokens().data);
}

TEST(ModelWeightsTest, GenerationConfigAddsItsEndOfSequenceIds) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kF32, false, 1)));
  const int64_t eos = SmallConfig(false).eos_token_id;
  WriteBytes(dir.Join("generation_config.json"),
             "{\"eos_token_id\": [7, " + std::to_string(eos) + ", 5]}");
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(dir.path());
  ASSERT_OK(weights);
  EXPECT_EQ((*weights)->config().eos_token_ids, (std::vector<int64_t>{eos, 7, 5}));
  WriteBytes(dir.Join("generation_config.json"), "{\"eos_token_id\": \"</s>\"}");
  EXPECT_THAT(ModelWeights::Load(dir.path()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("generation_config.json"), HasSubstr("eos_token_id"))));
}

TEST(ModelWeightsTest, MissingTensorNamesFileTensorAndShape) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kBF16, false, 1)));
  RewriteSafetensors(dir.Join("model.safetensors"), [](std::vector<TensorToWrite>& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) {
      return t.name == "model.layers.1.mlp.up_proj.weight";
    });
  });
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(dir.Join("model.safetensors")),
                             HasSubstr("missing tensor 'model.layers.1.mlp.up_proj.weight'"),
                             HasSubstr("[48, 32]"))));
}

// As GgufLlamaDeathTest's finding, from a config.json: num_hidden_layers 2^24 over two layers of
// weights is refused at the first missing tensor, with no list of every expected tensor built
// first. In a child process whose address space may grow by 512 MiB at most.
TEST(ModelWeightsDeathTest, ALayerCountBeyondTheWeightsIsRefusedAtItsFirstMissingTensor) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kBF16, false, 1)));
  ModelConfig config = SmallConfig(false);
  config.num_hidden_layers = 1 << 24;
  WriteBytes(dir.Join("config.json"), ModelConfigToJson(config));
  EXPECT_EXIT(
      {
        if (!LimitAddressSpaceGrowth(size_t{512} << 20)) std::exit(2);
        absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(dir.path());
        std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
        std::exit(absl::IsNotFound(weights.status()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "missing tensor 'model.layers.2.input_layernorm.weight'");
}

TEST(ModelWeightsTest, UntiedModelWithoutLmHead) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kF32, true, 1)));
  WriteBytes(dir.Join("config.json"), ModelConfigToJson(SmallConfig(false)));
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("'lm_head.weight'"), HasSubstr("[64, 32]"))));
}

TEST(ModelWeightsTest, WrongShapeNamesFileTensorExpectedAndFound) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kF16, false, 1)));
  RewriteSafetensors(dir.Join("model.safetensors"), [](std::vector<TensorToWrite>& tensors) {
    for (TensorToWrite& t : tensors) {
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {32, 16};
    }
  });
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(dir.Join("model.safetensors")),
                             HasSubstr("'model.layers.0.self_attn.k_proj.weight'"),
                             HasSubstr("has shape [32, 16], expected [16, 32]"))));
}

TEST(ModelWeightsTest, ShardedErrors) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), Options(DType::kF32, false, 3)));
  const std::string index_path = dir.Join("model.safetensors.index.json");
  const std::string good_index = ReadBytes(index_path);
  nlohmann::json index = nlohmann::json::parse(good_index);

  // A tensor that the index does not list.
  nlohmann::json edited = index;
  edited["weight_map"].erase("model.norm.weight");
  WriteBytes(index_path, edited.dump());
  EXPECT_THAT(
      ModelWeights::Load(dir.path()),
      StatusIs(absl::StatusCode::kNotFound,
               AllOf(HasSubstr(index_path), HasSubstr("'model.norm.weight'"), HasSubstr("[32]"))));

  // The index places a tensor in a shard that lacks it.
  edited = index;
  edited["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
  WriteBytes(index_path, edited.dump());
  EXPECT_THAT(
      ModelWeights::Load(dir.path()),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("model-00001-of-00003.safetensors"),
                                                  HasSubstr("'model.norm.weight'"))));

  // A shard file that is missing.
  edited = index;
  edited["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  WriteBytes(index_path, edited.dump());
  EXPECT_THAT(
      ModelWeights::Load(dir.path()),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("model-00009-of-00009.safetensors"),
                                                  HasSubstr("'model.norm.weight'"))));

  // A malformed index.
  WriteBytes(index_path, "{\"weight_map\": [1, 2]}");
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(index_path), HasSubstr("weight_map"))));
  WriteBytes(index_path, "{");
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(index_path), HasSubstr("not valid JSON"))));

  WriteBytes(index_path, good_index);
  EXPECT_OK(ModelWeights::Load(dir.path()));
}

TEST(ModelWeightsTest, MissingFiles) {
  TestDir dir;
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(dir.Join("config.json"))));
  WriteBytes(dir.Join("config.json"), ModelConfigToJson(SmallConfig(false)));
  EXPECT_THAT(ModelWeights::Load(dir.path()),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(dir.path()), HasSubstr("model.safetensors"),
                             HasSubstr("model.safetensors.index.json"))));
  WriteBytes(dir.Join("model.safetensors"), "garbage");
  EXPECT_THAT(ModelWeights::Load(dir.path()), StatusIs(absl::StatusCode::kInvalidArgument,
                                                       HasSubstr(dir.Join("model.safetensors"))));
}

}  // namespace
}  // namespace convoy
