// Runs the convoy-mkmodel binary and loads what it wrote.
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "model/test_dir.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::ReadBytes;
using ::convoy::testing::TestDir;

// The exit code of `convoy-mkmodel args`, its output in `dir`/output.txt.
int RunMkmodel(const TestDir& dir, const std::string& args) {
  const std::string command =
      std::string(CONVOY_MKMODEL_PATH) + " " + args + " > " + dir.Join("output.txt") + " 2>&1";
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(MkmodelTest, TinyPresetIsTheDefault) {
  TestDir dir;
  const std::string out = dir.Join("model");
  ASSERT_EQ(RunMkmodel(dir, "--out " + out), 0) << ReadBytes(dir.Join("output.txt"));
  EXPECT_THAT(ReadBytes(dir.Join("output.txt")), ::testing::HasSubstr("869504 parameters"));
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(out);
  ASSERT_OK(weights);
  const ModelConfig& config = (*weights)->config();
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_EQ(config.hidden_size, 128);
  EXPECT_EQ(config.intermediate_size, 352);
  EXPECT_EQ(config.num_hidden_layers, 4);
  EXPECT_EQ(config.num_attention_heads, 4);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.max_position_embeddings, 2048);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_EQ(config.torch_dtype, DType::kF32);
}

TEST(MkmodelTest, FlagsOverrideThePreset) {
  TestDir dir;
  const std::string out = dir.Join("model");
  // Llama 3.2's architecture at a toy size, both flag spellings.
  ASSERT_EQ(RunMkmodel(dir, "--out=" + out +
                                " --preset llama-3.2-1b --vocab-size 256 --hidden_size=64 "
                                "--intermediate-size 96 --layers 2 --heads 8 --kv-heads=2 "
                                "--dtype bf16 --shards 2 --seed 5"),
            0)
      << ReadBytes(dir.Join("output.txt"));
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(out);
  ASSERT_OK(weights);
  const ModelConfig& config = (*weights)->config();
  EXPECT_EQ(config.vocab_size, 256);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.num_hidden_layers, 2);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.head_dim, 8);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.rope_theta, 500000.0);
  EXPECT_EQ(config.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(config.rope_scaling.factor, 32.0);
  EXPECT_EQ(config.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(config.max_position_embeddings, 131072);
  EXPECT_EQ(config.torch_dtype, DType::kBF16);
  EXPECT_EQ((*weights)->embed_tokens().dtype, DType::kBF16);
  EXPECT_EQ((*weights)->lm_head().data, (*weights)->embed_tokens().data);
  EXPECT_EQ((*weights)->embed_tokens().file, out + "/model-00001-of-00002.safetensors");

  ASSERT_EQ(RunMkmodel(dir, "--out " + out +
                                " --preset llama-3.1-8b --vocab-size 256 --hidden-size 64 "
                                "--intermediate-size 96 --layers 1 --notie-embeddings "
                                "--rope-theta 1000 --head-dim 16 --max-position 4096"),
            0)
      << ReadBytes(dir.Join("output.txt"));
  weights = ModelWeights::Load(out);
  ASSERT_OK(weights);
  EXPECT_FALSE((*weights)->config().tie_word_embeddings);
  EXPECT_EQ((*weights)->config().head_dim, 16);
  EXPECT_EQ((*weights)->config().rope_theta, 1000.0);
  EXPECT_EQ((*weights)->config().max_position_embeddings, 4096);
  EXPECT_EQ((*weights)->config().rope_scaling.factor, 8.0);
}

TEST(MkmodelTest, BadFlagsExitWithTwo) {
  TestDir dir;
  const std::string out = " --out " + dir.Join("model");
  for (const std::string& args :
       {std::string(""), out + " --bogus", out + " --layers", out + " --layers=abc",
        out + " --preset gpt2", out + " --dtype f8", out + " --kv-heads 3", out + " --shards 0",
        out + " stray", out + " --hidden-size 100 --heads 3"}) {
    EXPECT_EQ(RunMkmodel(dir, args), 2) << args;
    EXPECT_THAT(ReadBytes(dir.Join("output.txt")), ::testing::HasSubstr("convoy-mkmodel: "))
        << args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Join("model")));
}

}  // namespace
}  // namespace convoy
