#include "model/model_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/test_dir.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// TinyLlama-1.1B-Chat-v1.0's config.json, as published.
constexpr char kTinyLlamaConfig[] = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5632,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0",
  "use_cache": true,
  "vocab_size": 32000
})";

// Llama-3.2-1B's config.json, as published.
constexpr char kLlama32Config[] = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

// Qwen2.5-0.5B-Instruct's config.json, as published.
constexpr char kQwen25Config[] = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Qwen3-0.6B's config.json, as published.
constexpr char kQwen3Config[] = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// google/gemma-3-1b-it's config.json.
constexpr char kGemma3Config[] = R"({
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "eos_token_id": [1, 106],
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152,
  "initializer_range": 0.02,
  "intermediate_size": 6912,
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 26,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": 512,
  "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0",
  "use_cache": true,
  "vocab_size": 262144
})";

// mistralai/Mistral-7B-v0.1's config.json.
constexpr char kMistralConfig[] = R"({
  "architectures": ["MistralForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// microsoft/Phi-3-mini-4k-instruct's config.json (auto_map left out).
constexpr char kPhi3Config[] = R"({
  "architectures": ["Phi3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "embd_pdrop": 0.0,
  "eos_token_id": 32000,
  "hidden_act": "silu",
  "hidden_size": 3072,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 4096,
  "model_type": "phi3",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "original_max_position_embeddings": 4096,
  "pad_token_id": 32000,
  "resid_pdrop": 0.0,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "sliding_window": 2047,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.2",
  "use_cache": true,
  "vocab_size": 32064
})";

Json Minimal() {
  return Json{{"architectures", {"LlamaForCausalLM"}},
              {"vocab_size", 1000},
              {"hidden_size", 256},
              {"intermediate_size", 512},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 8}};
}

TEST(ModelConfigTest, MinimalConfigTakesDefaults) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(Minimal().dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->vocab_size, 1000);
  EXPECT_EQ(config->num_key_value_heads, 8);  // = num_attention_heads
  EXPECT_EQ(config->head_dim, 32);            // = hidden_size / num_attention_heads
  EXPECT_EQ(config->q_size(), 256);
  EXPECT_EQ(config->kv_size(), 256);
  EXPECT_EQ(config->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_EQ(config->rope_scaling.rope_type, "default");
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->torch_dtype, DType::kF32);
  EXPECT_EQ(config->bos_token_id, 1);
  EXPECT_EQ(config->eos_token_id, 2);
}

TEST(ModelConfigTest, ModelTypeLlamaWithoutArchitectures) {
  Json json = Minimal();
  json.erase("architectures");
  json["model_type"] = "llama";
  EXPECT_OK(ParseModelConfig(json.dump(), "config.json"));
  json["model_type"] = "mistral";
  absl::StatusOr<ModelConfig> mistral = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(mistral);
  EXPECT_EQ(mistral->architecture, "MistralForCausalLM");
  json["model_type"] = "gpt2";
  EXPECT_THAT(ParseModelConfig(json.dump(), "config.json"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("'model_type'"), HasSubstr("gpt2"))));
}

TEST(ModelConfigTest, Qwen2HasQkvBiases) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kQwen25Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(config->attention_bias);
  EXPECT_FALSE(config->qk_norm);
  EXPECT_EQ(config->family()->name, std::string("qwen2"));
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->NumParameters(), 494032768);  // "0.49B", biases counted
}

TEST(ModelConfigTest, Qwen3HasPerHeadNormsAndItsOwnHeadDim) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kQwen3Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "Qwen3ForCausalLM");
  EXPECT_FALSE(config->attention_bias);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->head_dim, 128);  // not hidden_size / num_attention_heads = 64
  EXPECT_EQ(config->q_size(), 2048);
  // "0.6B"; 0.44B without the embeddings.
  EXPECT_EQ(config->NumParameters(), 596049920);
  EXPECT_EQ(config->NumParameters() - config->vocab_size * config->hidden_size, 440467456);
}

// Mistral 7B v0.1's window of 4096 positions; v0.2 and later have none (null).
TEST(ModelConfigTest, MistralHasASlidingWindow) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kMistralConfig, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "MistralForCausalLM");
  EXPECT_EQ(config->sliding_window, 4096);
  EXPECT_FALSE(config->fused_projections);
  EXPECT_EQ(config->NumParameters(), 7241732096);  // "7.24B"
  const Json again = Json::parse(ModelConfigToJson(*config));
  EXPECT_EQ(again["model_type"], "mistral");
  EXPECT_EQ(again["sliding_window"], 4096);
  Json json = Json::parse(kMistralConfig);
  json["sliding_window"] = nullptr;
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->sliding_window, 0);
  json["sliding_window"] = 0;
  EXPECT_THAT(ParseModelConfig(json.dump(), "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'sliding_window' must be a positive number of positions "
                                 "or null, found 0")));
  // Llama has no window: a config that carries one anyway is read as transformers reads it,
  // without.
  json = Json::parse(kTinyLlamaConfig);
  json["sliding_window"] = 64;
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->sliding_window, 0);
  ModelConfig wrong = *config;
  wrong.sliding_window = 64;
  EXPECT_THAT(wrong.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'sliding_window' must be 0 (none) for LlamaForCausalLM")));
}

TEST(ModelConfigTest, Gemma3Text) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kGemma3Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(config->activation, Activation::kGeluTanh);
  EXPECT_TRUE(config->sandwich_norms);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->norm_weight_offset, 1.0);
  EXPECT_DOUBLE_EQ(config->embedding_scale, std::sqrt(1152.0));
  EXPECT_EQ(config->query_pre_attn_scalar, 256);
  EXPECT_EQ(config->sliding_window, 512);
  EXPECT_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->rope_local_theta, 1e4);
  EXPECT_EQ(config->final_logit_softcapping, 0);
  EXPECT_TRUE(config->tie_word_embeddings);  // transformers' default for Gemma 3
  ASSERT_EQ(config->layer_sliding.size(), 26u);
  for (int64_t i = 0; i < 26; ++i) EXPECT_EQ(config->LayerSliding(i), (i + 1) % 6 != 0) << i;
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(config->NumParameters(), 999885952);  // "1B"
  // What transformers 5 writes: the layer kinds and each kind's rope base.
  const Json again = Json::parse(ModelConfigToJson(*config));
  EXPECT_EQ(again["hidden_activation"], "gelu_pytorch_tanh");
  absl::StatusOr<ModelConfig> reread = ParseModelConfig(again.dump(), "again.json");
  ASSERT_OK(reread);
  EXPECT_EQ(reread->layer_sliding, config->layer_sliding);
  Json v5 = Json::parse(kGemma3Config);
  v5.erase("rope_theta");
  v5.erase("rope_local_base_freq");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 2e6}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 5e3}}}};
  reread = ParseModelConfig(v5.dump(), "config.json");
  ASSERT_OK(reread);
  EXPECT_EQ(reread->rope_theta, 2e6);
  EXPECT_EQ(reread->rope_local_theta, 5e3);
  // Gemma 3 4B's linear scaling of the global layers, and Gemma 2's score capping, are refused.
  v5["rope_parameters"]["full_attention"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  EXPECT_THAT(ParseModelConfig(v5.dump(), "config.json"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("field 'rope_parameters.full_attention.rope_type' must be "
                                 "\"default\"")));
  Json capped = Json::parse(kGemma3Config);
  capped["attn_logit_softcapping"] = 50.0;
  EXPECT_THAT(ParseModelConfig(capped.dump(), "config.json"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("'attn_logit_softcapping'")));
  capped = Json::parse(kGemma3Config);
  capped["hidden_activation"] = "silu";
  EXPECT_THAT(ParseModelConfig(capped.dump(), "config.json"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("field 'hidden_activation' must be \"gelu_pytorch_tanh\" for "
                                 "Gemma3ForCausalLM, found \"silu\"")));
}

TEST(ModelConfigTest, Phi3HasFusedProjections) {
  Json json = Json::parse(kPhi3Config);
  json["sliding_window"] = nullptr;
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "Phi3ForCausalLM");
  EXPECT_TRUE(config->fused_projections);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->qk_norm);
  EXPECT_EQ(config->sliding_window, 0);
  EXPECT_EQ(config->head_dim, 96);
  EXPECT_EQ(config->NumParameters(), 3821079552);  // "3.8B"
  const Json again = Json::parse(ModelConfigToJson(*config));
  EXPECT_EQ(again["model_type"], "phi3");
  EXPECT_TRUE(again["sliding_window"].is_null());
  config = ParseModelConfig(kPhi3Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->sliding_window, 2047);
}

// n factors: 1, 1 + step, 1 + 2 step, ...
Json Factors(int n, double step) {
  Json factors = Json::array();
  for (int i = 0; i < n; ++i) factors.push_back(1.0 + step * i);
  return factors;
}

// Phi-3-mini-128k's config.json shape: Phi-3-mini-4k's with a context of 131072 and LongRoPE
// (transformers 4's spelling: "rope_scaling", original_max_position_embeddings at the top level).
Json Phi3LongRopeConfig() {
  Json json = Json::parse(kPhi3Config);
  json["sliding_window"] = 262144;
  json["max_position_embeddings"] = 131072;
  json["rope_scaling"] = {
      {"type", "longrope"}, {"short_factor", Factors(48, 0.01)}, {"long_factor", Factors(48, 1.0)}};
  return json;
}

// transformers' default attention factor for a context of 131072 over 4096: sqrt(1 + ln 32 /
// ln 4096).
const double kPhi3AttentionFactor = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));

TEST(ModelConfigTest, Phi3LongRope) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(Phi3LongRopeConfig().dump(), "config.json");
  ASSERT_OK(config);
  const RopeScaling& s = config->rope_scaling;
  EXPECT_EQ(s.rope_type, "longrope");
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(s.factor, 32.0);
  EXPECT_DOUBLE_EQ(s.attention_factor, kPhi3AttentionFactor);
  EXPECT_NEAR(s.attention_factor, 1.1902, 1e-4);
  ASSERT_EQ(s.short_factor.size(), 48u);
  EXPECT_DOUBLE_EQ(s.short_factor[47], 1.47);
  EXPECT_DOUBLE_EQ(s.long_factor[47], 48.0);
  // A context past the original one runs the long factors at every position.
  EXPECT_EQ(config->LongRopeFactors(), s.long_factor);

  // Written back and read again, as transformers would.
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*config), "again.json");
  ASSERT_OK(again);
  EXPECT_EQ(again->rope_scaling.short_factor, s.short_factor);
  EXPECT_EQ(again->rope_scaling.long_factor, s.long_factor);
  EXPECT_EQ(again->rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(again->rope_scaling.attention_factor, s.attention_factor);

  // Phi-3-mini-128k's older spelling "su"; an explicit attention_factor and factor.
  Json json = Phi3LongRopeConfig();
  json["rope_scaling"]["type"] = "su";
  json["rope_scaling"]["attention_factor"] = 1.25;
  json["rope_scaling"]["short_mscale"] = 1.1;  // ignored, as transformers' Phi-3 does
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->rope_scaling.rope_type, "longrope");
  EXPECT_DOUBLE_EQ(config->rope_scaling.attention_factor, 1.25);
  json["rope_scaling"].erase("attention_factor");
  json["rope_scaling"]["factor"] = 16.0;
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_DOUBLE_EQ(config->rope_scaling.attention_factor,
                   std::sqrt(1.0 + std::log(16.0) / std::log(4096.0)));

  // transformers 5's spelling: "rope_parameters", rope_theta and the original context inside it
  // (the top-level field, where present, wins as in transformers).
  json = Phi3LongRopeConfig();
  json["rope_parameters"] = json["rope_scaling"];
  json["rope_parameters"]["rope_type"] = "longrope";
  json["rope_parameters"]["rope_theta"] = 250000.0;
  json["rope_parameters"]["original_max_position_embeddings"] = 2048;
  json.erase("rope_scaling");
  json.erase("original_max_position_embeddings");
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(config->rope_theta, 250000.0);
  json["original_max_position_embeddings"] = 4096;
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 4096);

  // A context no longer than the original one runs the short factors, with no attention factor.
  json = Phi3LongRopeConfig();
  json["max_position_embeddings"] = 4096;
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->LongRopeFactors(), config->rope_scaling.short_factor);
  EXPECT_DOUBLE_EQ(config->rope_scaling.attention_factor, 1.0);
}

TEST(ModelConfigTest, Phi3LongRopeErrorsNameTheField) {
  auto parse = [](const Json& json) { return ParseModelConfig(json.dump(), "config.json"); };
  Json json = Phi3LongRopeConfig();
  json["rope_scaling"]["short_factor"] = Factors(2, 1.0);
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'rope_scaling.short_factor' must hold one "
                                              "factor per rotary pair, 48, found 2")));
  json = Phi3LongRopeConfig();
  json["rope_scaling"]["long_factor"][5] = -1.0;
  EXPECT_THAT(parse(json),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'rope_scaling.long_factor' must be a list of "
                                 "positive numbers, found [1.0,2.0,3.0,4.0,5.0,-1.0")));
  json["rope_scaling"]["long_factor"] = "long";
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'rope_scaling.long_factor' must be a list of "
                                              "positive numbers, found \"long\"")));
  json["rope_scaling"].erase("long_factor");
  EXPECT_THAT(parse(json),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'rope_scaling.long_factor' is required, found none")));
  json = Phi3LongRopeConfig();
  json["original_max_position_embeddings"] = 0;
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'original_max_position_embeddings' must be "
                                              "positive, found 0")));
  json.erase("original_max_position_embeddings");
  EXPECT_THAT(parse(json),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'rope_scaling.original_max_position_embeddings' "
                                 "is required, found none")));
  json = Phi3LongRopeConfig();
  json["rope_scaling"]["attention_factor"] = 0.0;
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'rope_scaling.attention_factor' must be a "
                                              "positive number, found 0")));
  // Another family refuses LongRoPE: its executors would not run it.
  json = Phi3LongRopeConfig();
  json["architectures"] = {"LlamaForCausalLM"};
  json["model_type"] = "llama";
  json.erase("sliding_window");
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kUnimplemented,
                                    HasSubstr("LongRoPE scaling is supported for "
                                              "\"Phi3ForCausalLM\" only, found LlamaForCausalLM")));
}

// Phi-4-mini's config.json shape: partial rotary embeddings (96 of 128 dimensions) with
// LongRoPE (48 factors each).
Json Phi4MiniConfig() {
  Json json = Phi3LongRopeConfig();
  json["hidden_size"] = 3072;
  json["num_attention_heads"] = 24;
  json["num_key_value_heads"] = 8;
  json["sliding_window"] = 262144;
  json["partial_rotary_factor"] = 0.75;
  json["tie_word_embeddings"] = true;
  return json;
}

TEST(ModelConfigTest, Phi4MiniPartialRotary) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(Phi4MiniConfig().dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->rotary_dim, 96);
  EXPECT_EQ(config->RotaryDim(), 96);
  EXPECT_EQ(config->LongRopeFactors().size(), 48u);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*config), "again.json");
  ASSERT_OK(again);
  EXPECT_EQ(again->rotary_dim, 96);
  // rope_scaling's factor comes before the top level's, as in transformers.
  Json json = Phi4MiniConfig();
  json["rope_scaling"]["partial_rotary_factor"] = 0.5;
  json["rope_scaling"]["short_factor"] = Factors(32, 0.01);
  json["rope_scaling"]["long_factor"] = Factors(32, 1.0);
  config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->RotaryDim(), 64);
  // Full rotary embeddings: RotaryDim() is head_dim.
  config = ParseModelConfig(kPhi3Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->RotaryDim(), 96);
}

TEST(ModelConfigTest, PartialRotaryErrorsNameTheField) {
  auto parse = [](const Json& json) { return ParseModelConfig(json.dump(), "config.json"); };
  Json json = Phi4MiniConfig();
  json["partial_rotary_factor"] = 1.5;
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'partial_rotary_factor' must be in (0, 1], "
                                              "found 1.5")));
  json["partial_rotary_factor"] = 0.001;
  EXPECT_THAT(parse(json),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'partial_rotary_factor' must turn at least one pair")));
  json["partial_rotary_factor"] = 0.75;
  json["rope_scaling"]["long_factor"] = Factors(64, 1.0);  // head_dim / 2, not 96 / 2
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'rope_scaling.long_factor' must hold one "
                                              "factor per rotary pair, 48, found 64")));
  json = Phi4MiniConfig();
  json["rope_scaling"] = nullptr;
  json["head_dim"] = 120;
  json["partial_rotary_factor"] = 0.025;  // 3 dimensions: odd
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("field 'partial_rotary_factor' must turn an even "
                                              "number of dimensions, at most head_dim 120, "
                                              "found 3")));
  // Other families refuse them naming the field, wherever it is.
  json = Json::parse(kMistralConfig);
  json["partial_rotary_factor"] = 0.75;
  EXPECT_THAT(parse(json), StatusIs(absl::StatusCode::kUnimplemented,
                                    HasSubstr("field 'partial_rotary_factor' must be 1 (partial "
                                              "rotary embeddings are not supported), found 0.75")));
  json.erase("partial_rotary_factor");
  json["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
  EXPECT_THAT(parse(json),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("field 'rope_parameters.partial_rotary_factor' must be 1")));
}

TEST(ModelConfigTest, FamilyByModelTypeAndTheListOfFamilies) {
  Json json = Json::parse(kQwen3Config);
  json.erase("architectures");
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(SupportedFamilyNames(),
            "\"llama\", \"qwen2\", \"qwen3\", \"phi3\", \"mistral\", \"gemma3_text\"");
  EXPECT_EQ(SupportedArchitectures(),
            "\"LlamaForCausalLM\", \"Qwen2ForCausalLM\", \"Qwen3ForCausalLM\", "
            "\"Phi3ForCausalLM\", \"MistralForCausalLM\", \"Gemma3ForCausalLM\"");
  EXPECT_EQ(SupportedGgufArchitectures(), "\"llama\", \"qwen2\", \"qwen3\", \"phi3\", \"gemma3\"");
  for (const ModelFamily& family : ModelFamilies()) {
    EXPECT_EQ(FindModelFamilyByName(family.name), &family);
    EXPECT_EQ(FindModelFamilyByArchitecture(family.architecture), &family);
  }
  EXPECT_EQ(FindModelFamilyByName("gemma3"), nullptr);
}

// ModelConfigToJson writes what the family's transformers config reads back.
TEST(ModelConfigTest, ToJsonKeepsTheFamily) {
  for (const char* text : {kQwen25Config, kQwen3Config}) {
    absl::StatusOr<ModelConfig> config = ParseModelConfig(text, "config.json");
    ASSERT_OK(config);
    const Json json = Json::parse(ModelConfigToJson(*config));
    EXPECT_EQ(json["architectures"], Json::array({config->architecture}));
    EXPECT_EQ(json["model_type"], config->family()->name);
    absl::StatusOr<ModelConfig> again = ParseModelConfig(json.dump(), "again.json");
    ASSERT_OK(again);
    EXPECT_EQ(again->architecture, config->architecture);
    EXPECT_EQ(again->qk_norm, config->qk_norm);
    EXPECT_EQ(again->attention_bias, config->attention_bias);
    EXPECT_EQ(again->head_dim, config->head_dim);
  }
}

TEST(ModelConfigTest, ValidateRefusesAFamilyThatDisagreesWithItsArchitecture) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kQwen3Config, "config.json");
  ASSERT_OK(config);
  ModelConfig wrong = *config;
  wrong.qk_norm = false;
  EXPECT_THAT(wrong.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("disagree with Qwen3ForCausalLM")));
  wrong = *config;
  wrong.architecture = "GemmaForCausalLM";
  EXPECT_THAT(wrong.Validate(), StatusIs(absl::StatusCode::kUnimplemented,
                                         AllOf(HasSubstr("\"GemmaForCausalLM\" is not supported"),
                                               HasSubstr("\"Qwen2ForCausalLM\""))));
}

TEST(ModelConfigTest, TinyLlamaGroupedQueryAttention) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kTinyLlamaConfig, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->num_attention_heads, 32);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->kv_size(), 256);
  EXPECT_EQ(config->torch_dtype, DType::kBF16);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-5);
  EXPECT_EQ(config->NumParameters(), 1100048384);  // "1.1B"
}

TEST(ModelConfigTest, Llama3RopeScalingAndEosList) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kLlama32Config, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->rope_scaling.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(config->rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_EQ(config->eos_token_id, 128001);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(128001, 128008, 128009));
  // Llama 3.2 1B has 1.24B parameters with the embeddings counted once.
  EXPECT_EQ(config->NumParameters(), 1235814400);
}

TEST(ModelConfigTest, OlderRopeScalingTypeSpelling) {
  Json json = Json::parse(kLlama32Config);
  json["rope_scaling"].erase("rope_type");
  json["rope_scaling"]["type"] = "llama3";
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->rope_scaling.rope_type, "llama3");
}

// transformers 5 writes "dtype" and puts rope_theta and the scaling into "rope_parameters".
TEST(ModelConfigTest, Transformers5RopeParameters) {
  constexpr char kConfig[] = R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
    "vocab_size": 112, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                        "original_max_position_embeddings": 64, "rope_theta": 500000.0,
                        "rope_type": "llama3"}})";
  auto config = ParseModelConfig(kConfig, "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->torch_dtype, DType::kBF16);
  EXPECT_EQ(config->rope_theta, 500000.0);
  EXPECT_EQ(config->rope_scaling.rope_type, "llama3");
  EXPECT_EQ(config->rope_scaling.factor, 8.0);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 64);

  constexpr char kDefault[] = R"({
    "architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "rope_parameters": {"rope_theta": 1234.0, "rope_type": "default"}})";
  auto plain = ParseModelConfig(kDefault, "config.json");
  ASSERT_OK(plain);
  EXPECT_EQ(plain->rope_theta, 1234.0);
  EXPECT_EQ(plain->rope_scaling.rope_type, "default");

  constexpr char kBad[] = R"({
    "architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "rope_parameters": {"rope_theta": 1234.0, "rope_type": "yarn"}})";
  EXPECT_THAT(ParseModelConfig(kBad, "config.json"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("rope_parameters.rope_type"), HasSubstr("yarn"))));
}

TEST(ModelConfigTest, NullTokenIds) {
  Json json = Minimal();
  json["bos_token_id"] = nullptr;
  json["eos_token_id"] = nullptr;
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "config.json");
  ASSERT_OK(config);
  EXPECT_EQ(config->bos_token_id, -1);
  EXPECT_EQ(config->eos_token_id, -1);
}

struct BadConfigCase {
  std::string description;
  Json (*make)();
  absl::StatusCode code;
  std::vector<std::string> substrings;  // each must appear in the message
};

std::vector<BadConfigCase> BadConfigCases() {
  using absl::StatusCode;
  return {
      {"other architecture",
       [] {
         Json j = Minimal();
         j["architectures"] = {"GPT2LMHeadModel"};
         return j;
       },
       StatusCode::kUnimplemented,
       {"field 'architectures' must contain one of \"LlamaForCausalLM\", \"Qwen2ForCausalLM\", "
        "\"Qwen3ForCausalLM\", \"Phi3ForCausalLM\", \"MistralForCausalLM\", "
        "\"Gemma3ForCausalLM\", found [\"GPT2LMHeadModel\"]"}},
      {"sliding window",
       [] {
         Json j = Json::parse(kQwen25Config);
         j["use_sliding_window"] = true;
         return j;
       },
       StatusCode::kUnimplemented,
       {"'use_sliding_window'", "found true"}},
      {"sliding layers",
       [] {
         Json j = Json::parse(kQwen3Config);
         j["layer_types"] = {"full_attention", "sliding_attention"};
         return j;
       },
       StatusCode::kUnimplemented,
       {"'layer_types'", "\"sliding_attention\""}},
      {"qwen3 attention bias",
       [] {
         Json j = Json::parse(kQwen3Config);
         j["attention_bias"] = true;
         return j;
       },
       StatusCode::kUnimplemented,
       {"'attention_bias'", "Qwen3ForCausalLM has no attention biases"}},
      {"missing field",
       [] {
         Json j = Minimal();
         j.erase("hidden_size");
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'hidden_size'", "required", "found none"}},
      {"kv heads do not divide heads",
       [] {
         Json j = Json::parse(kTinyLlamaConfig);
         j["num_key_value_heads"] = 5;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"config.json: field 'num_key_value_heads' must divide num_attention_heads 32, found 5"}},
      {"string for an integer",
       [] {
         Json j = Minimal();
         j["vocab_size"] = "many";
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'vocab_size'", "integer", "\"many\""}},
      {"fractional integer",
       [] {
         Json j = Minimal();
         j["num_hidden_layers"] = 2.5;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'num_hidden_layers'", "integer", "2.5"}},
      {"zero size",
       [] {
         Json j = Minimal();
         j["intermediate_size"] = 0;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'intermediate_size'", "positive", "found 0"}},
      {"zero heads",
       [] {
         Json j = Minimal();
         j["num_attention_heads"] = 0;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'num_attention_heads'", "positive", "found 0"}},
      {"hidden not a multiple of heads",
       [] {
         Json j = Minimal();
         j["num_attention_heads"] = 7;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'hidden_size'", "num_attention_heads 7", "found 256"}},
      {"odd head_dim",
       [] {
         Json j = Minimal();
         j["head_dim"] = 31;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'head_dim'", "even", "found 31"}},
      {"other rope type",
       [] {
         Json j = Minimal();
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
         return j;
       },
       StatusCode::kUnimplemented,
       {"'rope_scaling.rope_type'", "llama3", "\"linear\""}},
      {"yarn with the older key",
       [] {
         Json j = Minimal();
         j["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
         return j;
       },
       StatusCode::kUnimplemented,
       {"'rope_scaling.type'", "\"yarn\""}},
      {"llama3 without factor",
       [] {
         Json j = Json::parse(kLlama32Config);
         j["rope_scaling"].erase("factor");
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'rope_scaling.factor'", "required"}},
      {"llama3 with high <= low",
       [] {
         Json j = Json::parse(kLlama32Config);
         j["rope_scaling"]["high_freq_factor"] = 0.5;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'rope_scaling.high_freq_factor'", "low_freq_factor 1", "found 0.5"}},
      {"rope_scaling not an object",
       [] {
         Json j = Minimal();
         j["rope_scaling"] = 2;
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'rope_scaling'", "found 2"}},
      {"unknown dtype",
       [] {
         Json j = Minimal();
         j["torch_dtype"] = "int8";
         return j;
       },
       StatusCode::kUnimplemented,
       {"'torch_dtype'", "bfloat16", "\"int8\""}},
      {"attention bias",
       [] {
         Json j = Minimal();
         j["attention_bias"] = true;
         return j;
       },
       StatusCode::kUnimplemented,
       {"'attention_bias'", "found true"}},
      {"mlp bias",
       [] {
         Json j = Minimal();
         j["mlp_bias"] = true;
         return j;
       },
       StatusCode::kUnimplemented,
       {"'mlp_bias'", "found true"}},
      {"other activation",
       [] {
         Json j = Minimal();
         j["hidden_act"] = "gelu";
         return j;
       },
       StatusCode::kUnimplemented,
       {"'hidden_act'", "silu", "\"gelu\""}},
      {"eos outside the vocabulary",
       [] {
         Json j = Minimal();
         j["eos_token_id"] = {2, 1000};
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'eos_token_id'", "vocab_size 1000", "found 1000"}},
      {"eos list of strings",
       [] {
         Json j = Minimal();
         j["eos_token_id"] = {"</s>"};
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'eos_token_id'", "\"</s>\""}},
      {"bias not a bool",
       [] {
         Json j = Minimal();
         j["tie_word_embeddings"] = "yes";
         return j;
       },
       StatusCode::kInvalidArgument,
       {"'tie_word_embeddings'", "\"yes\""}},
      {"not an object",
       [] {
         return Json::array({1, 2});
       },
       StatusCode::kInvalidArgument,
       {"JSON object", "array"}},
  };
}

TEST(ModelConfigTest, EachErrorNamesTheFileTheFieldAndTheValue) {
  for (const BadConfigCase& bad : BadConfigCases()) {
    SCOPED_TRACE(bad.description);
    absl::StatusOr<ModelConfig> config = ParseModelConfig(bad.make().dump(), "dir/config.json");
    EXPECT_THAT(config, StatusIs(bad.code, HasSubstr("dir/config.json: ")));
    for (const std::string& substring : bad.substrings) {
      EXPECT_THAT(config, StatusIs(bad.code, HasSubstr(substring)));
    }
  }
}

TEST(ModelConfigTest, MalformedJson) {
  EXPECT_THAT(ParseModelConfig("{\"vocab_size\": ", "x/config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("x/config.json"), HasSubstr("not valid JSON"))));
  EXPECT_THAT(ParseModelConfig("", "x/config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x/config.json")));
}

TEST(ModelConfigTest, ValidateNamesTheField) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kTinyLlamaConfig, "config.json");
  ASSERT_OK(config);
  ModelConfig bad = *config;
  bad.num_hidden_layers = -1;
  EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("'num_hidden_layers' must be positive")));
  bad = *config;
  bad.rope_scaling.rope_type = "dynamic";
  EXPECT_THAT(bad.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'rope_scaling.rope_type'"), HasSubstr("dynamic"))));
  bad = *config;
  bad.rms_norm_eps = 0;
  EXPECT_THAT(bad.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'rms_norm_eps'")));
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.rope_type, b.rope_scaling.rope_type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
}

TEST(ModelConfigTest, ToJsonRoundTrips) {
  for (const char* text : {kTinyLlamaConfig, kLlama32Config}) {
    absl::StatusOr<ModelConfig> config = ParseModelConfig(text, "config.json");
    ASSERT_OK(config);
    const std::string written = ModelConfigToJson(*config);
    absl::StatusOr<ModelConfig> reread = ParseModelConfig(written, "written.json");
    ASSERT_OK(reread);
    ExpectSameConfig(*config, *reread);
    EXPECT_EQ(ModelConfigToJson(*reread), written);
  }
}

TEST(ModelConfigTest, ToJsonHasWhatTransformersExpects) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kLlama32Config, "config.json");
  ASSERT_OK(config);
  Json json = Json::parse(ModelConfigToJson(*config));
  EXPECT_EQ(json["architectures"], Json({"LlamaForCausalLM"}));
  EXPECT_EQ(json["model_type"], "llama");
  EXPECT_EQ(json["hidden_act"], "silu");
  EXPECT_EQ(json["attention_bias"], false);
  EXPECT_EQ(json["mlp_bias"], false);
  EXPECT_EQ(json["torch_dtype"], "bfloat16");
  EXPECT_EQ(json["tie_word_embeddings"], true);
  EXPECT_EQ(json["eos_token_id"], Json({128001, 128008, 128009}));
  EXPECT_EQ(json["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(json["rope_scaling"]["factor"], 32.0);
  EXPECT_EQ(json["rope_scaling"]["original_max_position_embeddings"], 8192);
  for (const char* key : {"initializer_range", "use_cache", "bos_token_id", "rms_norm_eps",
                          "rope_theta", "num_key_value_heads", "head_dim"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  ModelConfig plain = *config;
  plain.rope_scaling = RopeScaling();
  EXPECT_TRUE(Json::parse(ModelConfigToJson(plain))["rope_scaling"].is_null());
}

TEST(ModelConfigTest, DTypeNamesAndSizes) {
  EXPECT_STREQ(DTypeName(DType::kF32), "F32");
  EXPECT_STREQ(DTypeName(DType::kF16), "F16");
  EXPECT_STREQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
}

TEST(ModelConfigTest, LoadModelConfigReadsTheFileAndNamesIt) {
  testing::TestDir dir;
  const std::string path = dir.Join("config.json");
  EXPECT_THAT(LoadModelConfig(path), StatusIs(absl::StatusCode::kNotFound, HasSubstr(path)));
  testing::WriteBytes(path, kTinyLlamaConfig);
  absl::StatusOr<ModelConfig> config = LoadModelConfig(path);
  ASSERT_OK(config);
  EXPECT_EQ(config->vocab_size, 32000);
  Json json = Json::parse(kTinyLlamaConfig);
  json["num_key_value_heads"] = 5;
  testing::WriteBytes(path, json.dump());
  EXPECT_THAT(LoadModelConfig(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ": field 'num_key_value_heads' must divide")));
}

}  // namespace
}  // namespace convoy

namespace convoy {
namespace {

// Phi-3.5-mini-instruct: config.json's eos is <|endoftext|> (32000); generation_config.json adds
// <|end|> (32007), which ends each turn, and <|assistant|> (32001).
TEST(MergeGenerationConfigTest, AddsTheIdsAfterConfigJsons) {
  ModelConfig config;
  config.vocab_size = 32064;
  config.eos_token_id = 32000;
  ASSERT_OK(MergeGenerationConfig(R"({"eos_token_id": [32007, 32001, 32000]})", "g.json", config));
  EXPECT_THAT(config.eos_token_ids, ElementsAre(32000, 32007, 32001));
  EXPECT_EQ(config.eos_token_id, 32000);
  ASSERT_OK(MergeGenerationConfig(R"({"eos_token_id": 5})", "g.json", config));
  EXPECT_THAT(config.eos_token_ids, ElementsAre(32000, 32007, 32001, 5));
  ASSERT_OK(
      MergeGenerationConfig(R"({"eos_token_id": null, "do_sample": true})", "g.json", config));
  EXPECT_THAT(config.eos_token_ids, ElementsAre(32000, 32007, 32001, 5));

  ModelConfig no_eos;  // config.json's eos_token_id null
  no_eos.vocab_size = 100;
  no_eos.eos_token_id = -1;
  ASSERT_OK(MergeGenerationConfig(R"({"eos_token_id": [9, 8]})", "g.json", no_eos));
  EXPECT_THAT(no_eos.eos_token_ids, ElementsAre(9, 8));
  EXPECT_EQ(no_eos.eos_token_id, 9);
}

TEST(MergeGenerationConfigTest, ErrorsNameTheFileAndField) {
  ModelConfig config;
  config.vocab_size = 100;
  for (const char* bad : {R"({"eos_token_id": "</s>"})", R"({"eos_token_id": [1, "2"]})",
                          R"({"eos_token_id": [1.5]})"}) {
    EXPECT_THAT(MergeGenerationConfig(bad, "m/generation_config.json", config),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("m/generation_config.json"),
                               HasSubstr("'eos_token_id' must be an integer or a list"))))
        << bad;
  }
  EXPECT_THAT(
      MergeGenerationConfig(R"({"eos_token_id": [100]})", "g.json", config),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("100 is not in [0, vocab_size 100)")));
  EXPECT_THAT(MergeGenerationConfig("[1]", "g.json", config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("g.json: not a JSON object")));
}

}  // namespace
}  // namespace convoy
