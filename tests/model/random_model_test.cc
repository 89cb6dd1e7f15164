#include "model/random_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "model/safetensors.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestDir;
using ::testing::HasSubstr;

RandomModelOptions TinyOptions() {
  RandomModelOptions options;
  options.config.vocab_size = 512;
  options.config.hidden_size = 128;
  options.config.intermediate_size = 352;
  options.config.num_hidden_layers = 4;
  options.config.num_attention_heads = 4;
  options.config.num_key_value_heads = 2;
  options.config.head_dim = 32;
  options.seed = 0;
  return options;
}

// Tensor name -> bytes, over every safetensors file in `dir`.
std::map<std::string, std::string> TensorBytesByName(const std::string& dir) {
  std::map<std::string, std::string> tensors;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::Open(entry.path().string());
    EXPECT_OK(file);
    if (!file.ok()) continue;
    for (const auto& [name, view] : (*file)->tensors()) {
      EXPECT_EQ(tensors.count(name), 0u) << name << " in two files";
      tensors[name] = std::string(reinterpret_cast<const char*>(view.data), view.num_bytes);
    }
  }
  return tensors;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

TEST(RandomModelTest, SameOptionsGiveIdenticalBytes) {
  TestDir a, b;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    RandomModelOptions options = TinyOptions();
    options.dtype = dtype;
    options.seed = 17;
    ASSERT_OK(WriteRandomModel(a.path(), options));
    ASSERT_OK(WriteRandomModel(b.path(), options));
    for (const char* file : {"config.json", "model.safetensors"}) {
      const std::string bytes = ReadBytes(a.Join(file));
      EXPECT_FALSE(bytes.empty());
      EXPECT_TRUE(bytes == ReadBytes(b.Join(file))) << file << " differs";
    }
  }
}

TEST(RandomModelTest, OtherSeedGivesOtherWeights) {
  TestDir a, b;
  RandomModelOptions options = TinyOptions();
  ASSERT_OK(WriteRandomModel(a.path(), options));
  options.seed = 1;
  ASSERT_OK(WriteRandomModel(b.path(), options));
  EXPECT_EQ(ReadBytes(a.Join("config.json")), ReadBytes(b.Join("config.json")));
  const auto tensors_a = TensorBytesByName(a.path());
  const auto tensors_b = TensorBytesByName(b.path());
  ASSERT_EQ(tensors_a.size(), tensors_b.size());
  for (const auto& [name, bytes] : tensors_a) {
    EXPECT_NE(bytes, tensors_b.at(name)) << name;
  }
}

TEST(RandomModelTest, ShardingDoesNotChangeTheValues) {
  TestDir one, three;
  RandomModelOptions options = TinyOptions();
  options.dtype = DType::kBF16;
  ASSERT_OK(WriteRandomModel(one.path(), options));
  options.num_shards = 3;
  ASSERT_OK(WriteRandomModel(three.path(), options));

  EXPECT_FALSE(std::filesystem::exists(three.Join("model.safetensors")));
  const auto index = nlohmann::json::parse(ReadBytes(three.Join("model.safetensors.index.json")));
  std::set<std::string> shard_files;
  for (const auto& [name, file] : index["weight_map"].items()) shard_files.insert(file);
  EXPECT_EQ(shard_files, (std::set<std::string>{"model-00001-of-00003.safetensors",
                                                "model-00002-of-00003.safetensors",
                                                "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(index["metadata"]["total_size"], options.config.NumParameters() * 2);

  const auto tensors_one = TensorBytesByName(one.path());
  const auto tensors_three = TensorBytesByName(three.path());
  EXPECT_EQ(tensors_one.size(), LlamaTensorShapes(options.config).size());
  EXPECT_EQ(index["weight_map"].size(), tensors_one.size());
  EXPECT_TRUE(tensors_one == tensors_three);
}

TEST(RandomModelTest, ShardsAreBalancedAndNonEmpty) {
  TestDir dir;
  RandomModelOptions options = TinyOptions();
  options.num_shards = 5;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  int64_t total = 0, largest = 0;
  for (int i = 1; i <= 5; ++i) {
    const std::string path = dir.Join("model-0000" + std::to_string(i) + "-of-00005.safetensors");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_OK(file);
    EXPECT_FALSE((*file)->tensors().empty());
    const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
    total += size;
    largest = std::max(largest, size);
  }
  // The largest tensor (the embeddings, 256 KiB in f32) bounds how uneven the split can be.
  EXPECT_LE(largest, total / 5 + 512 * 128 * 4);
}

TEST(RandomModelTest, RewritingSwitchesLayouts) {
  TestDir dir;
  RandomModelOptions options = TinyOptions();
  options.num_shards = 2;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  options.num_shards = 1;
  options.seed = 9;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("model.safetensors.index.json")));
  options.num_shards = 2;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("model.safetensors")));
  EXPECT_OK(ModelWeights::Load(dir.path()));
}

TEST(RandomModelTest, TiedModelHasNoLmHead) {
  TestDir dir;
  RandomModelOptions options = TinyOptions();
  options.config.tie_word_embeddings = true;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  const auto tensors = TensorBytesByName(dir.path());
  EXPECT_EQ(tensors.count("lm_head.weight"), 0u);
  EXPECT_EQ(tensors.count("model.embed_tokens.weight"), 1u);
}

TEST(RandomModelTest, ConfigRecordsTheDtype) {
  TestDir dir;
  RandomModelOptions options = TinyOptions();
  options.dtype = DType::kF16;
  ASSERT_OK(WriteRandomModel(dir.path(), options));
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir.Join("config.json"));
  ASSERT_OK(config);
  EXPECT_EQ(config->torch_dtype, DType::kF16);
  EXPECT_EQ(config->num_key_value_heads, 2);
}

double Mean(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double StdDev(const std::vector<float>& values) {
  const double mean = Mean(values);
  double sum = 0;
  for (float v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size()));
}

TEST(RandomModelTest, ScalesKeepActivationsOrderOne) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), TinyOptions()));
  const auto tensors = TensorBytesByName(dir.path());
  const std::vector<float> embed = Floats(tensors.at("model.embed_tokens.weight"));
  EXPECT_NEAR(Mean(embed), 0.0, 0.02);
  EXPECT_NEAR(StdDev(embed), 1.0, 0.02);
  const std::vector<float> q = Floats(tensors.at("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_NEAR(StdDev(q), 1.0 / std::sqrt(128.0), 0.05 / std::sqrt(128.0));
  const std::vector<float> down = Floats(tensors.at("model.layers.2.mlp.down_proj.weight"));
  EXPECT_NEAR(StdDev(down), 1.0 / std::sqrt(352.0), 0.05 / std::sqrt(352.0));
  const std::vector<float> lm_head = Floats(tensors.at("lm_head.weight"));
  EXPECT_NEAR(StdDev(lm_head), 1.0 / std::sqrt(128.0), 0.05 / std::sqrt(128.0));
  std::vector<float> norms;
  for (const auto& [name, bytes] : tensors) {
    if (name.find("norm") == std::string::npos) continue;
    const std::vector<float> values = Floats(bytes);
    norms.insert(norms.end(), values.begin(), values.end());
  }
  ASSERT_EQ(norms.size(), 9u * 128u);
  EXPECT_NEAR(Mean(norms), 1.0, 0.01);
  EXPECT_NEAR(StdDev(norms), 0.1, 0.01);
  // A normal sample has tails: some values past 3 sigma, none absurd.
  int beyond_three = 0;
  for (float v : embed) {
    beyond_three += std::abs(v) > 3;
    EXPECT_LT(std::abs(v), 7.0f);
  }
  EXPECT_GT(beyond_three, 0);
  EXPECT_LT(beyond_three, static_cast<int>(embed.size()) / 100);
}

// Pins the generator: these values must be the same on every machine and in every later version,
// or models that other tests and reference outputs were made from change under them.
TEST(RandomModelTest, GoldenValues) {
  TestDir dir;
  ASSERT_OK(WriteRandomModel(dir.path(), TinyOptions()));
  const auto tensors = TensorBytesByName(dir.path());
  const std::vector<float> embed = Floats(tensors.at("model.embed_tokens.weight"));
  const std::vector<float> norm = Floats(tensors.at("model.norm.weight"));
  const uint32_t expected_embed[4] = {0xbf931d70, 0x3ee7fe24, 0x3d8c65c7, 0x3fe298e7};
  const uint32_t expected_norm[2] = {0x3f44a769, 0x3f79f7cc};
  for (int i = 0; i < 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &embed[static_cast<size_t>(i)], 4);
    EXPECT_EQ(bits, expected_embed[i]) << "embed[" << i << "] = " << embed[static_cast<size_t>(i)];
  }
  for (int i = 0; i < 2; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &norm[static_cast<size_t>(i)], 4);
    EXPECT_EQ(bits, expected_norm[i]) << "norm[" << i << "] = " << norm[static_cast<size_t>(i)];
  }
}

TEST(RandomModelTest, RejectsBadOptions) {
  TestDir dir;
  RandomModelOptions options = TinyOptions();
  options.num_shards = 0;
  EXPECT_THAT(WriteRandomModel(dir.path(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_shards")));
  options.num_shards = 1000;
  EXPECT_THAT(WriteRandomModel(dir.path(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_shards")));
  options = TinyOptions();
  options.config.num_key_value_heads = 3;
  EXPECT_THAT(WriteRandomModel(dir.path(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'num_key_value_heads'")));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("config.json")));
}

}  // namespace
}  // namespace convoy
