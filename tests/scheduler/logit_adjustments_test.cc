// logit_bias and the presence, frequency and repetition penalties (step/logit_adjustments.h), and
// min_p, through the engine loop, the scheduler and the CPU executor on a random model. Each
// request's tokens are checked against a replay: the model's logits for the request's whole
// sequence so far, adjusted by this file's own statement of OpenAI's and Hugging Face's rules,
// then the choice. A count that lags one token, a penalty applied to the wrong tokens, or counts
// lost across preemption and recomputation all change the tokens.
#include "step/logit_adjustments.h"

#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "executor/cpu/cpu_executor.h"
#include "executor/sampler.h"
#include "gtest/gtest.h"
#include "model/model_weights.h"
#include "model/random_model.h"
#include "serve_engine.h"
#include "test_models.h"
#include "tiny_cpu_executor.h"

namespace convoy::testing {
namespace {

constexpr int32_t kBlockSize = 4;
constexpr int32_t kVocab = 320;  // TinyModelConfig's

TEST(LogitAdjustmentsTest, AppliesTheBiasThenTheRepetitionThenFrequencyAndPresence) {
  SamplingParams params;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  params.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {1, 1, 4};
  std::shared_ptr<LogitAdjustments> adjust =
      LogitAdjustments::Make(params, {{0, 1.0f}, {2, -3.0f}}, prompt);
  ASSERT_NE(adjust, nullptr);
  adjust->CountOutput(2);
  adjust->CountOutput(3);
  adjust->CountOutput(2);
  std::vector<float> logits = {1.0f, 4.0f, 1.0f, -1.0f, -2.0f, 6.0f};
  adjust->Apply(logits.data(), static_cast<int32_t>(logits.size()));
  // 0: bias only, 1.0 + 1.0. 1: in the prompt, 4 / 2. 2: bias, then 1 - 3 = -2 is in the output:
  // -2 * 2 = -4, then generated twice: -4 - 0.25 * 2 - 0.5. 3: generated once: -1 * 2 - 0.25 - 0.5.
  // 4: in the prompt, -2 * 2. 5: untouched.
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 2.0f, -5.0f, -2.75f, -4.0f, 6.0f}));
}

// The merged entries (one per token changed, for the GPU sampler) give Apply's bits, on random
// logits of both signs with every adjustment at once and each alone.
TEST(LogitAdjustmentsTest, MergedEntriesGiveApplysBits) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> logit(-8.0f, 8.0f);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  for (int round = 0; round < 40; ++round) {
    SamplingParams params;
    const int which = round % 4;  // 0: everything, 1: bias, 2: repetition, 3: presence+frequency
    if (which == 0 || which == 3) {
      params.presence_penalty = logit(rng) / 4.0f;
      params.frequency_penalty = logit(rng) / 4.0f;
    }
    if (which == 0 || which == 2) params.repetition_penalty = 1.0f + (1 + round % 7) * 0.15f;
    std::vector<LogitBias> biases;
    if (which <= 1) {
      std::set<int32_t> bias_tokens;
      while (bias_tokens.size() < 12) bias_tokens.insert(token(rng));
      for (int32_t t : bias_tokens) biases.push_back({t, logit(rng) * 10.0f});
    }
    std::vector<int32_t> prompt(20);
    for (int32_t& t : prompt) t = token(rng);
    std::shared_ptr<LogitAdjustments> adjust = LogitAdjustments::Make(params, biases, prompt);
    ASSERT_NE(adjust, nullptr);
    for (int i = 0; i < 30; ++i) adjust->CountOutput(token(rng) % 64);  // repeats certain
    std::vector<float> logits(kVocab);
    for (float& x : logits) x = logit(rng);
    std::vector<float> want = logits;
    adjust->Apply(want.data(), kVocab);
    std::vector<MergedLogitAdjustment> merged;
    adjust->Merge(kVocab, &merged);
    std::vector<float> got = logits;
    for (size_t i = 0; i < merged.size(); ++i) {
      if (i > 0) {
        ASSERT_LT(merged[i - 1].token, merged[i].token);
      }
      got[merged[i].token] = merged[i].Adjusted(logits[merged[i].token]);
    }
    for (int32_t i = 0; i < kVocab; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "round " << round << " token " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

TEST(LogitAdjustmentsTest, NothingToAdjustMakesNone) {
  EXPECT_EQ(LogitAdjustments::Make(SamplingParams{}, {}, std::vector<int32_t>{1, 2}), nullptr);
  SamplingParams min_p_only;
  min_p_only.min_p = 0.2f;  // a cut of the sampler's, not an adjustment
  EXPECT_EQ(LogitAdjustments::Make(min_p_only, {}, std::vector<int32_t>{1}), nullptr);
}

// The rules again, written plainly: the reference the engine's tokens are checked against.
std::vector<float> ReferenceAdjusted(std::vector<float> logits, const std::vector<int32_t>& prompt,
                                     const std::vector<int32_t>& output, const SamplingParams& p,
                                     const std::vector<LogitBias>& biases) {
  for (const LogitBias& b : biases) logits[b.token] += b.bias;
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  if (p.repetition_penalty != 1.0f) {
    for (int32_t t : seen) {
      logits[t] =
          logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  std::map<int32_t, int> counts;
  for (int32_t t : output) ++counts[t];
  for (const auto& [t, c] : counts) {
    logits[t] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
  }
  return logits;
}

const ModelWeights& Weights() {
  static const ModelWeights* weights =
      LoadRandomModel("logit_adjustments", TinyModelConfig()).release();
  return *weights;
}

// The model's logits after the last of `tokens`, computed from scratch in one row.
std::vector<float> LastLogits(CpuExecutor& executor, const std::vector<int32_t>& tokens) {
  StepPlan plan;
  StepRow& row = plan.rows.emplace_back();
  row.seq_id = 1;
  row.token_ids = tokens;
  const int32_t blocks = (static_cast<int32_t>(tokens.size()) + kBlockSize - 1) / kBlockSize;
  for (int32_t b = 0; b < blocks; ++b) row.block_table.push_back(b);
  row.return_logits = true;
  absl::StatusOr<StepResult> result = executor.Step(plan);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const std::vector<float>& all = result->rows[0].logits;
  return std::vector<float>(all.end() - kVocab, all.end());
}

struct Case {
  SamplingParams sampling;
  std::vector<LogitBias> biases;
};

Request MakeRequest(RequestId id, const Case& c) {
  Request request;
  request.id = id;
  for (int i = 0; i < 3 + (id * 17) % 40; ++i) {
    request.prompt_tokens.push_back((id * 131 + i * 29) % kVocab);
  }
  request.max_tokens = 32;
  request.sampling = c.sampling;
  request.logit_adjustments = LogitAdjustments::Make(c.sampling, c.biases, request.prompt_tokens);
  return request;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](float temperature, float presence, float frequency, float repetition, float min_p,
                 std::vector<LogitBias> biases) {
    Case c;
    c.sampling.temperature = temperature;
    c.sampling.seed = 1000 + cases.size();
    c.sampling.presence_penalty = presence;
    c.sampling.frequency_penalty = frequency;
    c.sampling.repetition_penalty = repetition;
    c.sampling.min_p = min_p;
    c.biases = std::move(biases);
    cases.push_back(std::move(c));
  };
  add(0.0f, 1.5f, 0.0f, 1.0f, 0.0f, {});
  add(0.0f, 0.0f, 0.8f, 1.0f, 0.0f, {});
  add(0.0f, 0.0f, 0.0f, 1.3f, 0.0f, {});
  add(0.0f, -1.0f, 0.0f, 1.0f, 0.0f, {});  // negative: repeat more
  add(0.0f, 0.0f, 0.0f, 1.0f, 0.0f, {{17, 100.0f}});
  add(0.0f, 0.5f, 0.5f, 1.2f, 0.0f, {{3, 2.0f}, {250, -100.0f}});
  add(1.0f, 1.0f, 0.3f, 1.0f, 0.0f, {});
  add(0.8f, 0.0f, 0.0f, 1.5f, 0.05f, {});
  add(1.2f, 0.0f, 1.0f, 1.0f, 0.2f, {{40, 3.0f}});
  add(1.0f, 0.0f, 0.0f, 1.0f, 0.0f, {{99, 100.0f}});
  add(0.7f, 2.0f, 2.0f, 1.1f, 0.0f, {});
  add(0.0f, 0.0f, 0.0f, 0.7f, 0.0f, {});  // below 1: favours repeats
  return cases;
}

TEST(LogitAdjustmentsTest, TokensMatchAReplayOfTheRulesAcrossPreemption) {
  // Twelve requests on a cache of 40 blocks (160 tokens) for up to 12 x ~75: preemption and
  // recomputation happen, and the counts must survive them.
  std::unique_ptr<CpuExecutor> executor = MakeTinyCpuExecutor(Weights(), 40, kBlockSize);
  std::unique_ptr<CpuExecutor> reference = MakeTinyCpuExecutor(Weights(), 512, kBlockSize);
  ASSERT_NE(executor, nullptr);
  ASSERT_NE(reference, nullptr);
  const std::vector<Case> cases = Cases();
  std::vector<Request> requests;
  for (size_t i = 0; i < cases.size(); ++i) requests.push_back(MakeRequest(i + 1, cases[i]));
  const std::vector<Request> sent = requests;
  Served served = Serve(*executor, std::move(requests));
  ASSERT_EQ(served.finals.size(), cases.size());
  EXPECT_GT(served.preemptions, 0);

  int changed = 0;  // requests whose adjustments changed a token
  for (size_t i = 0; i < cases.size(); ++i) {
    const RequestId id = i + 1;
    const Case& c = cases[i];
    const std::vector<int32_t>& got = served.tokens[id];
    ASSERT_TRUE(served.finals.at(id).status.ok()) << id << ": " << served.finals.at(id).status;
    ASSERT_EQ(got.size(), 32u) << id;
    std::vector<int32_t> sequence = sent[i].prompt_tokens;
    std::vector<int32_t> output;
    bool differs = false;
    std::vector<std::pair<float, int32_t>> scratch;
    for (size_t t = 0; t < got.size(); ++t) {
      const std::vector<float> raw = LastLogits(*reference, sequence);
      ASSERT_EQ(raw.size(), static_cast<size_t>(kVocab));
      const std::vector<float> adjusted =
          ReferenceAdjusted(raw, sent[i].prompt_tokens, output, c.sampling, c.biases);
      // The choice from the adjusted logits: min_p and the seeded rule stay the sampler's.
      SamplingParams rule = c.sampling;
      rule.presence_penalty = rule.frequency_penalty = 0.0f;
      rule.repetition_penalty = 1.0f;
      const SampledToken want =
          SampleToken(adjusted.data(), kVocab, rule, static_cast<int64_t>(t), &scratch);
      const SampledToken plain =
          SampleToken(raw.data(), kVocab, rule, static_cast<int64_t>(t), &scratch);
      differs = differs || plain.token != want.token;
      ASSERT_EQ(got[t], want.token) << "request " << id << ", token " << t;
      // The logprob reported is the model's own, not the adjusted distribution's.
      double z = 0.0;
      const float max_logit = *std::max_element(raw.begin(), raw.end());
      for (float x : raw) z += std::exp(static_cast<double>(x - max_logit));
      const double logprob = raw[got[t]] - max_logit - std::log(z);
      EXPECT_NEAR(served.logprobs[id][t], logprob, 1e-4) << "request " << id << ", token " << t;
      sequence.push_back(got[t]);
      output.push_back(got[t]);
    }
    if (differs) ++changed;
    for (const LogitBias& b : c.biases) {
      if (b.bias == 100.0f) {  // all but forced
        EXPECT_EQ(std::count(got.begin(), got.end(), b.token), 32) << id;
      }
      if (b.bias == -100.0f) {
        EXPECT_EQ(std::count(got.begin(), got.end(), b.token), 0) << id;
      }
    }
  }
  // The adjustments are not idle: most requests differ from the unadjusted choice somewhere.
  EXPECT_GE(changed, 8);
}

// Prompt scoring (echo with logprobs): each prompt token's logprob under the tokens before it, as
// the model's logits over the whole prompt in one row give it, whatever the prefill's chunking,
// the batch and preemption.
TEST(PromptScoresTest, EachPromptTokensLogprobMatchesTheWholePromptsLogits) {
  std::unique_ptr<CpuExecutor> executor = MakeTinyCpuExecutor(Weights(), 40, kBlockSize);
  std::unique_ptr<CpuExecutor> reference = MakeTinyCpuExecutor(Weights(), 512, kBlockSize);
  ASSERT_NE(executor, nullptr);
  ASSERT_NE(reference, nullptr);
  std::vector<Request> requests;
  for (RequestId id = 1; id <= 10; ++id) {
    Request request = MakeRequest(id, Case{});
    request.score_prompt = id % 2 == 1;
    request.use_prefix_cache = false;
    requests.push_back(std::move(request));
  }
  const std::vector<Request> sent = requests;
  // Chunks of 8 tokens: prompts of up to 42 tokens are scored over several steps.
  Served served = Serve(*executor, std::move(requests), /*max_batch_size=*/16,
                        /*prefill_chunk_size=*/8);
  ASSERT_EQ(served.finals.size(), sent.size());
  EXPECT_GT(served.preemptions, 0);
  for (const Request& request : sent) {
    SCOPED_TRACE(request.id);
    ASSERT_TRUE(served.finals.at(request.id).status.ok());
    if (!request.score_prompt) {
      EXPECT_FALSE(served.prompt_logprobs.contains(request.id));
      continue;
    }
    const std::vector<float>& got = served.prompt_logprobs[request.id];
    const std::vector<int32_t>& prompt = request.prompt_tokens;
    ASSERT_EQ(got.size(), prompt.size());
    EXPECT_TRUE(std::isnan(got[0]));
    StepPlan plan;
    StepRow& row = plan.rows.emplace_back();
    row.seq_id = 1;
    row.token_ids = prompt;
    for (size_t b = 0; b * kBlockSize < prompt.size(); ++b) row.block_table.push_back(b);
    row.return_logits = true;
    absl::StatusOr<StepResult> whole = reference->Step(plan);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const std::vector<float>& logits = whole->rows[0].logits;
    for (size_t p = 1; p < prompt.size(); ++p) {
      const float* at = logits.data() + (p - 1) * kVocab;
      const float max_logit = *std::max_element(at, at + kVocab);
      double z = 0.0;
      for (int32_t v = 0; v < kVocab; ++v) z += std::exp(static_cast<double>(at[v] - max_logit));
      EXPECT_NEAR(got[p], at[prompt[p]] - max_logit - std::log(z), 1e-4) << "position " << p;
    }
  }
}

TEST(LogitAdjustmentsTest, MinPKeepsOnlyTokensNearTheMostLikely) {
  // p relative to the most likely: 1, e^-0.5 = 0.61, e^-1 = 0.37, e^-2 = 0.14.
  const std::vector<float> logits = {0.0f, -0.5f, -1.0f, -2.0f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.min_p = 0.5f;
  params.seed = 7;
  std::vector<std::pair<float, int32_t>> scratch;
  std::map<int32_t, int> seen;
  for (int64_t i = 0; i < 400; ++i)
    ++seen[SampleToken(logits.data(), 4, params, i, &scratch).token];
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_EQ(seen.size(), 2u);
  // At temperature 2 the ratios are their square roots: 0.78 and 0.61 pass 0.5, 0.37 not.
  params.temperature = 2.0f;
  seen.clear();
  for (int64_t i = 0; i < 400; ++i)
    ++seen[SampleToken(logits.data(), 4, params, i, &scratch).token];
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.count(3), 0u);
}

}  // namespace
}  // namespace convoy::testing
