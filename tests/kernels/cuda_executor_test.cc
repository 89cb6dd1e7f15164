// The CUDA executor against the CPU executor (fp32 weights, fp32 attention) on a small random
// Llama written to disk in bf16, so both read the same weights: logits within bf16 tolerance and
// the same greedy tokens, for batches mixing prompt lengths, chunked prefill and decode.
#include "executor/cuda/cuda_executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "executor/cpu/cpu_executor.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "kv/block_table.h"
#include "model/model_weights.h"
#include "model/safetensors.h"
#include "model/test_dir.h"
#include "status_matchers.h"
#include "step/logit_adjustments.h"
#include "step/token_constraint.h"
#include "test_paths.h"

namespace convoy {
namespace {

using testing::RelativeError;

ModelConfig SmallConfig() {
  ModelConfig c;
  c.vocab_size = 503;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling.rope_type = "llama3";
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.original_max_position_embeddings = 256;
  c.torch_dtype = DType::kBF16;
  return c;
}

TensorToWrite RandomTensor(const std::string& name, std::vector<int64_t> shape, float scale,
                           float offset, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<std::byte> bytes(n * 2);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = FloatToBF16(offset + dist(rng));
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  return {name, DType::kBF16, std::move(shape), std::move(bytes)};
}

// Writes config.json and model.safetensors with random bf16 weights into a fresh directory.
std::string WriteRandomModel(const ModelConfig& c) {
  const std::string dir =
      ::convoy::testing::ProcessDir("convoy_cuda_executor_test_model_" + c.architecture);
  std::ofstream(dir + "/config.json") << ModelConfigToJson(c);
  std::mt19937 rng(7);
  const int64_t h = c.hidden_size, in = c.intermediate_size;
  const float a_h = std::sqrt(3.0f / h), a_q = std::sqrt(3.0f / c.q_size()),
              a_in = std::sqrt(3.0f / in);
  std::vector<TensorToWrite> t;
  t.push_back(RandomTensor("model.embed_tokens.weight", {c.vocab_size, h}, 1.0f, 0.0f, rng));
  // Norms that scale by about 1: Gemma's checkpoints store them as offsets from 1.
  const float norm_mean = static_cast<float>(1.0 - c.norm_weight_offset);
  t.push_back(RandomTensor("model.norm.weight", {h}, 0.1f, norm_mean, rng));
  t.push_back(RandomTensor("lm_head.weight", {c.vocab_size, h}, a_h, 0.0f, rng));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back(RandomTensor(p + "input_layernorm.weight", {h}, 0.1f, norm_mean, rng));
    if (c.fused_projections) {  // Phi-3: Q, K, V in one matrix, the gate and up in another
      t.push_back(RandomTensor(p + "self_attn.qkv_proj.weight", {c.q_size() + 2 * c.kv_size(), h},
                               a_h, 0.0f, rng));
    } else {
      t.push_back(RandomTensor(p + "self_attn.q_proj.weight", {c.q_size(), h}, a_h, 0.0f, rng));
      t.push_back(RandomTensor(p + "self_attn.k_proj.weight", {c.kv_size(), h}, a_h, 0.0f, rng));
      t.push_back(RandomTensor(p + "self_attn.v_proj.weight", {c.kv_size(), h}, a_h, 0.0f, rng));
    }
    t.push_back(RandomTensor(p + "self_attn.o_proj.weight", {h, c.q_size()}, a_q, 0.0f, rng));
    t.push_back(RandomTensor(p + "post_attention_layernorm.weight", {h}, 0.1f, norm_mean, rng));
    if (c.sandwich_norms) {  // Gemma 3
      t.push_back(RandomTensor(p + "pre_feedforward_layernorm.weight", {h}, 0.1f, norm_mean, rng));
      t.push_back(RandomTensor(p + "post_feedforward_layernorm.weight", {h}, 0.1f, norm_mean, rng));
    }
    if (c.fused_projections) {
      t.push_back(RandomTensor(p + "mlp.gate_up_proj.weight", {2 * in, h}, a_h, 0.0f, rng));
    } else {
      t.push_back(RandomTensor(p + "mlp.gate_proj.weight", {in, h}, a_h, 0.0f, rng));
      t.push_back(RandomTensor(p + "mlp.up_proj.weight", {in, h}, a_h, 0.0f, rng));
    }
    t.push_back(RandomTensor(p + "mlp.down_proj.weight", {h, in}, a_in, 0.0f, rng));
    if (c.attention_bias) {  // Qwen2
      t.push_back(RandomTensor(p + "self_attn.q_proj.bias", {c.q_size()}, 0.5f, 0.0f, rng));
      t.push_back(RandomTensor(p + "self_attn.k_proj.bias", {c.kv_size()}, 0.5f, 0.0f, rng));
      t.push_back(RandomTensor(p + "self_attn.v_proj.bias", {c.kv_size()}, 0.5f, 0.0f, rng));
    }
    if (c.qk_norm) {  // Qwen3, Gemma 3
      t.push_back(RandomTensor(p + "self_attn.q_norm.weight", {c.head_dim}, 0.3f, norm_mean, rng));
      t.push_back(RandomTensor(p + "self_attn.k_norm.weight", {c.head_dim}, 0.3f, norm_mean, rng));
    }
  }
  EXPECT_OK(WriteSafetensors(dir + "/model.safetensors", t));
  return dir;
}

std::vector<BlockId> Blocks(int seq, int count) {
  std::vector<BlockId> blocks;
  for (int i = 0; i < count; ++i) blocks.push_back(seq * 64 + (i * 7) % 64);  // scattered
  return blocks;
}

StepRow Row(int seq, std::vector<int32_t> tokens, int32_t start, bool sample, bool logits) {
  StepRow row;
  row.seq_id = seq;
  row.token_ids = std::move(tokens);
  row.start_pos = start;
  row.block_table = Blocks(seq, 64);
  row.sample = sample;
  row.return_logits = logits;
  return row;
}

class CudaExecutorParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CONVOY_SKIP_WITHOUT_GPU();
    Load(SmallConfig());
  }

  // Both executors on one random model of `config`'s family and shape.
  void Load(const ModelConfig& config) {
    auto weights = ModelWeights::Load(WriteRandomModel(config));
    ASSERT_OK(weights);
    CpuExecutorOptions cpu_options;
    cpu_options.weight_format = CpuWeightFormat::kF32;
    cpu_options.block_size = 16;
    cpu_options.kv_cache_bytes = int64_t{300} * 2 * 3 * 2 * 16 * 64 * 4;  // 300 blocks
    auto cpu = CpuExecutor::Create(**weights, cpu_options);
    ASSERT_OK(cpu);
    cpu_ = std::move(*cpu);
    CudaExecutorOptions gpu_options;
    gpu_options.kv_cache_bytes = int64_t{300} * 2 * 3 * 2 * 16 * 64 * 2;
    gpu_options.max_tokens_per_step = 512;
    gpu_options.max_rows_per_step = 16;
    auto gpu = CudaExecutor::Create(**weights, gpu_options);
    ASSERT_OK(gpu);
    gpu_ = std::move(*gpu);
  }

  // Runs `plan` on both; compares logits where returned and sampled tokens.
  void RunBoth(const StepPlan& plan, StepResult* cpu_result, StepResult* gpu_result) {
    auto cpu = cpu_->Step(plan);
    ASSERT_OK(cpu);
    auto gpu = gpu_->Step(plan);
    ASSERT_OK(gpu);
    ASSERT_EQ(cpu->rows.size(), gpu->rows.size());
    for (size_t r = 0; r < plan.rows.size(); ++r) {
      if (plan.rows[r].return_logits) {
        const double err = RelativeError(gpu->rows[r].logits, cpu->rows[r].logits);
        worst_error_ = std::max(worst_error_, err);
        EXPECT_LT(err, 2e-2) << "row " << r;
      }
      if (plan.rows[r].sample) {
        ++compared_;
        if (gpu->rows[r].token == cpu->rows[r].token) ++agreed_;
        EXPECT_NEAR(gpu->rows[r].logprob, cpu->rows[r].logprob, 5e-2) << "row " << r;
      }
    }
    *cpu_result = std::move(*cpu);
    *gpu_result = std::move(*gpu);
  }

  // Two sequences' whole prompts (`a` and `b` tokens, from seeds `seed` and seed + 1) in one step,
  // then `steps` decode steps side by side (logits every other step), each through both.
  void PromptsThenDecode(int a, int b, int seed, int steps);

  void TearDown() override {
    if (compared_ > 0) {
      std::printf("GPU_CHECK parity logits_rel_err %.3e greedy_agree %d/%d\n", worst_error_,
                  agreed_, compared_);
    }
  }

  std::unique_ptr<CpuExecutor> cpu_;
  std::unique_ptr<CudaExecutor> gpu_;
  double worst_error_ = 0.0;
  int compared_ = 0, agreed_ = 0;
};

std::vector<int32_t> Tokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 503);
  return t;
}

void CudaExecutorParityTest::PromptsThenDecode(int a, int b, int seed, int steps) {
  StepPlan plan;
  plan.rows.push_back(Row(0, Tokens(a, seed), 0, true, true));
  plan.rows.push_back(Row(1, Tokens(b, seed + 1), 0, true, true));
  StepResult cpu, gpu;
  ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
  std::vector<int32_t> next = {cpu.rows[0].token, cpu.rows[1].token}, pos = {a, b};
  for (int step = 0; step < steps; ++step) {
    plan.rows.clear();
    for (int r = 0; r < 2; ++r) plan.rows.push_back(Row(r, {next[r]}, pos[r], true, step % 2));
    ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
    for (int r = 0; r < 2; ++r) {
      next[r] = cpu.rows[r].token;
      ++pos[r];
    }
  }
}

TEST_F(CudaExecutorParityTest, MixedPromptsChunkedPrefillThenGreedyDecode) {
  const std::vector<int32_t> long_prompt = Tokens(150, 3);
  StepPlan plan;
  plan.rows.push_back(Row(0, Tokens(37, 1), 0, true, true));
  plan.rows.push_back(Row(1, Tokens(5, 2), 0, true, true));
  plan.rows.push_back(Row(2, {long_prompt.begin(), long_prompt.begin() + 70}, 0, false, true));
  plan.rows.push_back(Row(3, {9}, 0, true, true));
  StepResult cpu, gpu;
  ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
  std::vector<int32_t> next(4), pos = {37, 5, 150, 1};
  for (int r : {0, 1, 3}) next[r] = cpu.rows[r].token;

  // The rest of row 2's prompt beside decode rows.
  plan.rows.clear();
  plan.rows.push_back(Row(0, {next[0]}, pos[0], true, true));
  plan.rows.push_back(Row(2, {long_prompt.begin() + 70, long_prompt.end()}, 70, true, true));
  plan.rows.push_back(Row(1, {next[1]}, pos[1], true, false));
  plan.rows.push_back(Row(3, {next[3]}, pos[3], true, false));
  ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
  pos = {38, 6, 150, 2};
  next[0] = cpu.rows[0].token;
  next[2] = cpu.rows[1].token;
  next[1] = cpu.rows[2].token;
  next[3] = cpu.rows[3].token;

  // Eight greedy decode steps; each executor feeds back its own tokens. The odd steps return
  // logits (the plain path), the even ones replay CUDA graphs.
  std::vector<int32_t> cpu_next = next, gpu_next = next;
  for (int step = 0; step < 8; ++step) {
    StepPlan cpu_plan, gpu_plan;
    for (int s = 0; s < 4; ++s) {
      cpu_plan.rows.push_back(Row(s, {cpu_next[s]}, pos[s], true, step % 2 == 1));
      gpu_plan.rows.push_back(Row(s, {gpu_next[s]}, pos[s], true, step % 2 == 1));
    }
    auto c = cpu_->Step(cpu_plan);
    ASSERT_OK(c);
    auto g = gpu_->Step(gpu_plan);
    ASSERT_OK(g);
    for (int s = 0; s < 4; ++s) {
      ++compared_;
      if (c->rows[s].token == g->rows[s].token) ++agreed_;
      EXPECT_EQ(c->rows[s].token, g->rows[s].token) << "step " << step << " seq " << s;
      if (step % 2 == 1 && cpu_next[s] == gpu_next[s]) {
        const double err = RelativeError(g->rows[s].logits, c->rows[s].logits);
        worst_error_ = std::max(worst_error_, err);
        EXPECT_LT(err, 2e-2);
      }
      cpu_next[s] = c->rows[s].token;
      gpu_next[s] = g->rows[s].token;
      ++pos[s];
    }
  }
}

TEST_F(CudaExecutorParityTest, RejectsPlansBeyondCapacity) {
  StepPlan plan;
  plan.rows.push_back(Row(0, Tokens(600, 5), 0, true, false));
  EXPECT_THAT(gpu_->Step(plan),
              testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                ::testing::HasSubstr("step of 600 tokens, 1 rows, 1 logits rows "
                                                     "exceeds the CUDA executor's capacity (512")));
  // The executor still serves.
  plan.rows[0].token_ids.resize(20);
  EXPECT_OK(gpu_->Step(plan));
}

// Allows a fixed set of tokens at every position.
class AllowSet : public TokenConstraint {
 public:
  explicit AllowSet(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  void FillNextTokenMask(uint32_t* bits, int32_t vocab_size) override {
    for (int32_t t : tokens_) {
      if (t < vocab_size) bits[t >> 5] |= 1u << (t & 31);
    }
  }
  absl::Status AcceptToken(int32_t) override { return absl::OkStatus(); }
  bool IsTerminated() const override { return false; }

 private:
  std::vector<int32_t> tokens_;
};

// Structured output's allowed tokens, logit_bias, the penalties and min_p give the CPU executor's
// tokens, in a prompt step and in decode steps replayed from a CUDA graph; a constraint that
// allows one token forces it at every step.
TEST_F(CudaExecutorParityTest, AllowedTokensAndAdjustmentsGiveTheCpuExecutorsTokens) {
  std::vector<int32_t> third;
  for (int32_t t = 0; t < 503; t += 3) third.push_back(t);
  auto forced =
      std::make_shared<TokenMask>(std::make_unique<AllowSet>(std::vector<int32_t>{42}), 503);
  auto thirds = std::make_shared<TokenMask>(std::make_unique<AllowSet>(third), 503);
  SamplingParams penalized;
  penalized.repetition_penalty = 1.3f;
  penalized.presence_penalty = 0.5f;
  penalized.frequency_penalty = 0.25f;
  penalized.min_p = 0.05f;
  penalized.temperature = 0.8f;
  penalized.seed = 77;
  const std::vector<int32_t> prompt = Tokens(20, 9);
  auto adjust = LogitAdjustments::Make(penalized, {{17, 5.0f}, {250, -100.0f}}, prompt);
  ASSERT_NE(adjust, nullptr);
  auto biased = LogitAdjustments::Make(SamplingParams{}, {{17, 100.0f}}, prompt);
  ASSERT_NE(biased, nullptr);
  std::vector<int32_t> pos(4, 20), next(4);
  int seeded_agree = 0;
  for (int step = 0; step < 6; ++step) {
    StepPlan plan;
    for (int r = 0; r < 4; ++r) {
      StepRow row =
          step == 0 ? Row(r, prompt, 0, true, false) : Row(r, {next[r]}, pos[r], true, false);
      row.sample_index = step;
      if (r == 0) row.allowed_tokens = forced;
      if (r == 1) {
        row.allowed_tokens = thirds;
        row.logit_adjustments = adjust;
        row.sampling = penalized;
      }
      if (r == 2) row.logit_adjustments = biased;
      if (r == 3) row.sampling.min_p = 0.3f, row.sampling.temperature = 0.7f;
      plan.rows.push_back(std::move(row));
    }
    StepResult cpu, gpu;
    ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
    EXPECT_EQ(gpu.rows[0].token, 42) << "step " << step;
    EXPECT_EQ(gpu.rows[1].token % 3, 0) << "step " << step;
    EXPECT_EQ(gpu.rows[2].token, 17) << "step " << step;
    // The forced rows must agree; the seeded ones draw from bf16 logits on the GPU and fp32 on
    // the CPU, which can move a draw that falls near a boundary (counted below).
    EXPECT_EQ(cpu.rows[0].token, 42);
    EXPECT_EQ(cpu.rows[2].token, 17);
    for (int r : {1, 3}) seeded_agree += gpu.rows[r].token == cpu.rows[r].token ? 1 : 0;
    for (int r = 0; r < 4; ++r) {
      next[r] = cpu.rows[r].token;
      pos[r] = step == 0 ? 20 : pos[r] + 1;
    }
    adjust->CountOutput(next[1]);
    biased->CountOutput(next[2]);
  }
  std::printf("GPU_CHECK constrained_seeded_agree %d/12\n", seeded_agree);
  EXPECT_GE(seeded_agree, 10);
  // A row that returns its logits cannot also be rewritten by the sampling kernel.
  StepPlan plan;
  plan.rows.push_back(Row(0, prompt, 0, true, true));
  plan.rows.back().allowed_tokens = thirds;
  EXPECT_THAT(gpu_->CheckRow(plan.rows.back()),
              testing::StatusIs(absl::StatusCode::kUnimplemented,
                                ::testing::HasSubstr("does not return logits of a row")));
}

// The families' departures from Llama on SmallConfig's shape, with head sizes the kernels take.
// Qwen2's QKV biases or Qwen3's per-head Q/K norms.
ModelConfig QwenConfig(const std::string& architecture) {
  ModelConfig config = SmallConfig();
  config.architecture = architecture;
  config.attention_bias = architecture == "Qwen2ForCausalLM";
  config.qk_norm = architecture == "Qwen3ForCausalLM";
  config.rope_theta = 1000000.0;
  config.rope_scaling = RopeScaling();
  config.head_dim = 128;  // both head sizes the kernels take: 64 in the Llama tests
  config.num_attention_heads = 4;
  return config;
}

// Mistral's or Phi-3's (fused projections) sliding window.
ModelConfig WindowConfig(const std::string& architecture, int64_t window, int64_t head_dim = 64) {
  ModelConfig config = SmallConfig();
  config.head_dim = head_dim;
  config.architecture = architecture;
  config.fused_projections = architecture == "Phi3ForCausalLM";
  config.sliding_window = window;
  config.rope_theta = 10000.0;
  config.rope_scaling = RopeScaling();
  return config;
}

// Phi-3 with LongRoPE (its long factors, since the context served is past the original) and, as
// Phi-4-mini, a partial rotary embedding when rotary_dim is set.
ModelConfig LongRopeConfig(int64_t rotary_dim) {
  ModelConfig config = SmallConfig();
  config.architecture = "Phi3ForCausalLM";
  config.fused_projections = true;
  config.rotary_dim = rotary_dim;
  config.rope_theta = 10000.0;
  config.rope_scaling = RopeScaling();
  config.rope_scaling.rope_type = "longrope";
  config.rope_scaling.original_max_position_embeddings = 64;
  for (int64_t i = 0; i < config.RotaryDim() / 2; ++i) {
    config.rope_scaling.short_factor.push_back(1.0 + 0.05 * static_cast<double>(i));
    config.rope_scaling.long_factor.push_back(1.0 + 0.8 * static_cast<double>(i));
  }
  config.rope_scaling.attention_factor = 1.19;
  return config;
}

// Gemma 3 (its checkpoints' head_dim is 256, whose prefill goes through the decode kernel): GeGLU,
// the norms around attention and MLP, norms stored as offsets from 1 (the per-head Q/K norms too),
// embeddings times sqrt(hidden), scores scaled by query_pre_attn_scalar, sliding layers with their
// own rope base beside global ones, logits soft-capped.
ModelConfig Gemma3Config(int64_t head_dim) {
  ModelConfig config = SmallConfig();
  config.architecture = "Gemma3ForCausalLM";
  config.qk_norm = true;
  config.activation = Activation::kGeluTanh;
  config.sandwich_norms = true;
  config.norm_weight_offset = 1.0;
  config.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
  config.head_dim = head_dim;
  config.num_attention_heads = 4;
  config.query_pre_attn_scalar = 96.0;
  config.sliding_window = 40;
  config.layer_sliding = {true, false, true};
  config.rope_theta = 1000000.0;
  config.rope_local_theta = 10000.0;
  config.rope_scaling = RopeScaling();
  config.final_logit_softcapping = 30.0;
  return config;
}

// Every model the parity tests below load.
std::vector<ModelConfig> ParityConfigs() {
  return {QwenConfig("Qwen2ForCausalLM"),
          QwenConfig("Qwen3ForCausalLM"),
          WindowConfig("MistralForCausalLM", 40),
          WindowConfig("Phi3ForCausalLM", 40),
          WindowConfig("Phi3ForCausalLM", 40, 96),
          LongRopeConfig(0),
          LongRopeConfig(48),
          Gemma3Config(128),
          Gemma3Config(256)};
}

// Qwen2's QKV biases and Qwen3's per-head Q/K norms (the rotary kernel applies them) give the CPU
// executor's logits and greedy tokens, through prompts, chunked prefill and graph-replayed decode.
TEST_F(CudaExecutorParityTest, QwenFamiliesGiveTheCpuExecutorsLogitsAndTokens) {
  for (const char* architecture : {"Qwen2ForCausalLM", "Qwen3ForCausalLM"}) {
    SCOPED_TRACE(architecture);
    ASSERT_NO_FATAL_FAILURE(Load(QwenConfig(architecture)));
    ASSERT_NO_FATAL_FAILURE(PromptsThenDecode(90, 9, 21, 6));
  }
  EXPECT_GE(agreed_, compared_ * 9 / 10);
}

// Mistral's sliding window (the blocks before it given back, as the scheduler gives them back) and
// Phi-3's fused QKV and gate/up projections with its window give the CPU executor's logits and
// greedy tokens: a prompt longer than the window in two chunks, the second beside a short one, then
// decode steps (graph-replayed) that each give back what the window left behind.
TEST_F(CudaExecutorParityTest, SlidingWindowAndFusedProjectionsGiveTheCpuExecutorsLogitsAndTokens) {
  constexpr int kWindow = 40;
  // What the scheduler does: the blocks wholly before the window of the row's first token go back.
  auto windowed = [](StepRow row) {
    const int64_t before = BlocksBeforeWindow(row.start_pos, kWindow, 16);
    for (int64_t b = 0; b < before; ++b) row.block_table[b] = kNoBlock;
    return row;
  };
  // Phi-3-mini's head_dim, 96, whose prompts go through the decode kernel.
  for (const auto& [architecture, head_dim] :
       {std::pair<std::string, int64_t>{"MistralForCausalLM", 64},
        {"Phi3ForCausalLM", 64},
        {"Phi3ForCausalLM", 96}}) {
    SCOPED_TRACE(architecture + " head_dim " + std::to_string(head_dim));
    ASSERT_NO_FATAL_FAILURE(Load(WindowConfig(architecture, kWindow, head_dim)));
    const std::vector<int32_t> prompt = Tokens(150, 23);
    StepPlan plan;
    plan.rows.push_back(Row(0, {prompt.begin(), prompt.begin() + 70}, 0, false, true));
    plan.rows.push_back(Row(1, Tokens(9, 24), 0, true, true));
    StepResult cpu, gpu;
    ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
    std::vector<int32_t> next = {-1, cpu.rows[1].token}, pos = {150, 9};
    plan.rows.clear();
    plan.rows.push_back(windowed(Row(0, {prompt.begin() + 70, prompt.end()}, 70, true, true)));
    plan.rows.push_back(Row(1, {next[1]}, pos[1], true, true));
    ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
    next = {cpu.rows[0].token, cpu.rows[1].token};
    ++pos[1];
    for (int step = 0; step < 8; ++step) {
      plan.rows.clear();
      for (int r = 0; r < 2; ++r) {
        plan.rows.push_back(windowed(Row(r, {next[r]}, pos[r], true, step % 2)));
      }
      ASSERT_NO_FATAL_FAILURE(RunBoth(plan, &cpu, &gpu));
      for (int r = 0; r < 2; ++r) {
        next[r] = cpu.rows[r].token;
        ++pos[r];
      }
    }
  }
  EXPECT_GE(agreed_, compared_ * 9 / 10);
}

// LongRoPE, over every dimension and over 48 of 64 (Phi-4-mini's partial rotary embedding): the
// frequencies and the cos/sin factor are model/rope_frequencies.h's on both executors.
TEST_F(CudaExecutorParityTest, LongRopeAndPartialRotaryGiveTheCpuExecutorsLogitsAndTokens) {
  for (const int rotary_dim : {0, 48}) {
    SCOPED_TRACE(rotary_dim);
    ASSERT_NO_FATAL_FAILURE(Load(LongRopeConfig(rotary_dim)));
    ASSERT_NO_FATAL_FAILURE(PromptsThenDecode(100, 7, 25, 6));
  }
  EXPECT_GE(agreed_, compared_ * 9 / 10);
}

TEST_F(CudaExecutorParityTest, Gemma3GivesTheCpuExecutorsLogitsAndTokens) {
  for (const int64_t head_dim : {128, 256}) {
    SCOPED_TRACE(head_dim);
    ASSERT_NO_FATAL_FAILURE(Load(Gemma3Config(head_dim)));
    ASSERT_NO_FATAL_FAILURE(PromptsThenDecode(90, 9, 27, 6));
  }
  EXPECT_GE(agreed_, compared_ * 9 / 10);
}

// Steps of 1 to 4 tokens take the GEMV's fusions (the norms into the following products, the
// residual adds into the o and down products, the gate into the gate/up product) and give the
// unfused steps' logits, log-probabilities and tokens bit for bit, in every family. Gemma 3's
// sandwich norms keep their norm launches and fuse only the gate.
TEST(CudaExecutorFusion, SmallStepsGiveTheUnfusedStepsBitsInEveryFamily) {
  CONVOY_SKIP_WITHOUT_GPU();
  std::vector<ModelConfig> configs = ParityConfigs();
  configs.insert(configs.begin(), SmallConfig());
  for (const ModelConfig& config : configs) {
    SCOPED_TRACE(config.architecture + " head_dim " + std::to_string(config.head_dim));
    auto weights = ModelWeights::Load(WriteRandomModel(config));
    ASSERT_OK(weights);
    std::unique_ptr<CudaExecutor> executors[2];  // unfused, fused
    for (int fuse = 0; fuse < 2; ++fuse) {
      CudaExecutorOptions options;
      options.kv_cache_bytes = int64_t{256} << 20;
      options.max_tokens_per_step = 512;
      options.max_rows_per_step = 16;
      options.fuse_small_batch = fuse == 1;
      auto executor = CudaExecutor::Create(**weights, options);
      ASSERT_OK(executor);
      executors[fuse] = std::move(*executor);
    }
    EXPECT_FALSE(executors[0]->FusionFor(1).gate);
    for (int64_t t = 1; t <= 4; ++t) {
      EXPECT_TRUE(executors[1]->FusionFor(t).gate) << t;
      EXPECT_EQ(executors[1]->FusionFor(t).norms, !config.sandwich_norms) << t;
    }
    EXPECT_FALSE(executors[1]->FusionFor(5).gate);

    // Runs `plan` on both; returns the unfused step's tokens by row.
    auto run_both = [&](const StepPlan& plan, const std::string& what) {
      auto unfused = executors[0]->Step(plan);
      auto fused = executors[1]->Step(plan);
      std::vector<int32_t> tokens;
      EXPECT_TRUE(unfused.ok() && fused.ok()) << what;
      if (!unfused.ok() || !fused.ok()) return tokens;
      for (size_t r = 0; r < plan.rows.size(); ++r) {
        const RowResult& a = unfused->rows[r];
        const RowResult& b = fused->rows[r];
        EXPECT_EQ(a.token, b.token) << what << " row " << r;
        EXPECT_EQ(a.logprob, b.logprob) << what << " row " << r;
        EXPECT_EQ(a.logits, b.logits) << what << " row " << r;
        tokens.push_back(a.token);
      }
      return tokens;
    };
    StepPlan plan;
    const int lengths[4] = {20, 9, 33, 5};
    std::vector<int32_t> next, pos;
    for (int s = 0; s < 4; ++s) {
      plan.rows.push_back(Row(s, Tokens(lengths[s], 40 + s), 0, true, true));
      pos.push_back(lengths[s]);
    }
    next = run_both(plan, "prompts");
    ASSERT_EQ(next.size(), 4u);
    // Decode steps of 4, 3, 2 and 1 rows with logits, then 4 and 2 without (graph replays).
    const int rows_per_step[] = {4, 3, 2, 1, 4, 2};
    for (int step = 0; step < 6; ++step) {
      plan.rows.clear();
      for (int s = 0; s < rows_per_step[step]; ++s) {
        plan.rows.push_back(Row(s, {next[s]}, pos[s], true, step < 4));
      }
      const std::vector<int32_t> sampled = run_both(plan, "decode step " + std::to_string(step));
      ASSERT_EQ(sampled.size(), plan.rows.size());
      for (size_t s = 0; s < sampled.size(); ++s) {
        next[s] = sampled[s];
        ++pos[s];
      }
    }
    // Three tokens from two rows: a two-token chunk beside a decode token.
    plan.rows.clear();
    plan.rows.push_back(Row(3, {next[3], 17}, pos[3], true, true));
    plan.rows.push_back(Row(0, {next[0]}, pos[0], true, true));
    run_both(plan, "chunk beside decode");
  }
}

// The parity tests' models are what their configs say and run on the CPU executor (checked without
// a GPU, so that a GPU session does not find a broken fixture).
TEST(CudaExecutorParityModels, LoadAndRunOnTheCpu) {
  for (const ModelConfig& config : ParityConfigs()) {
    SCOPED_TRACE(config.architecture);
    auto weights = ModelWeights::Load(WriteRandomModel(config));
    ASSERT_OK(weights);
    const ModelConfig& loaded = (*weights)->config();
    EXPECT_EQ(loaded.RotaryDim(), config.RotaryDim());
    EXPECT_EQ(loaded.sliding_window, config.sliding_window);
    EXPECT_EQ(loaded.layer_sliding, config.layer_sliding);
    EXPECT_EQ(loaded.fused_projections, config.fused_projections);
    EXPECT_EQ(loaded.sandwich_norms, config.sandwich_norms);
    EXPECT_EQ(loaded.norm_weight_offset, config.norm_weight_offset);
    EXPECT_EQ(loaded.embedding_scale, config.embedding_scale);
    EXPECT_EQ(loaded.query_pre_attn_scalar, config.query_pre_attn_scalar);
    EXPECT_EQ(loaded.final_logit_softcapping, config.final_logit_softcapping);
    EXPECT_EQ(loaded.LongRopeFactors().size(), config.LongRopeFactors().size());
    CpuExecutorOptions options;
    options.weight_format = CpuWeightFormat::kF32;
    options.block_size = 16;
    options.kv_cache_bytes = int64_t{1} << 24;
    auto cpu = CpuExecutor::Create(**weights, options);
    ASSERT_OK(cpu);
    StepPlan plan;
    plan.rows.push_back(Row(0, Tokens(50, 3), 0, true, false));
    auto result = (*cpu)->Step(plan);
    ASSERT_OK(result);
    EXPECT_TRUE(result->rows[0].status.ok()) << result->rows[0].status;
  }
}

// Every family runs on the CUDA kernels; what they refuse, by name before anything is uploaded, is
// a shape they do not take (no device is touched first, so this holds without a GPU too).
TEST(CudaExecutorFamilies, RefusesOnlyShapesTheKernelsDoNotTake) {
  CudaExecutorOptions options;
  options.kv_cache_bytes = int64_t{1} << 20;
  for (const ModelConfig& config : ParityConfigs()) {
    SCOPED_TRACE(config.architecture);
    // Without a GPU it fails for want of a device: never as something the kernels do not run.
    EXPECT_NE(CudaExecutor::CreateRandom(config, options, 1).status().code(),
              absl::StatusCode::kUnimplemented);
  }
  // A head_dim the kernels do not take: refused naming it and the family, from a file and at
  // random.
  const ModelConfig config = WindowConfig("Phi3ForCausalLM", 40, 80);
  auto weights = ModelWeights::Load(WriteRandomModel(config));
  ASSERT_OK(weights);
  for (const absl::Status& status : {CudaExecutor::Create(**weights, options).status(),
                                     CudaExecutor::CreateRandom(config, options, 1).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(status.message().find("head_dim 64, 96, 128 and 256, not 80 (Phi3ForCausalLM)"),
              std::string::npos)
        << status;
  }
}

TEST(CudaDeviceAvailable, AgreesWithTheRuntimeAndLeavesNoError) {
  // Without a driver the runtime's query fails: that means "no GPU", not a crash or an error.
  // (The runtime then reports its failed initialisation on every call, which nothing can clear;
  // where a GPU is usable, no error may be left behind.)
  int count = 0;
  const bool runtime_says = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  EXPECT_EQ(CudaDeviceAvailable(), runtime_says);
  if (runtime_says) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  EXPECT_EQ(CudaDeviceAvailable(), runtime_says) << "the answer does not change between calls";
}

}  // namespace
}  // namespace convoy
