// The sampling kernel against a CPU reference: greedy choice, logprobs, top logprobs, and the
// seeded draw restricted by top-k and top-p.
#include "kernels/sampling.cuh"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "executor/sampler.h"
#include "gtest/gtest.h"
#include "kernels/gpu_test_util.h"
#include "step/logit_adjustments.h"

namespace convoy {
namespace {

using testing::DeviceArray;
using testing::RandomFloats;
using testing::ReportError;

struct CpuSample {
  std::vector<double> logprobs;  // log softmax of the raw logits
  std::vector<int> order;        // most likely first, lowest id on ties
};

// Launches the sampling kernel once over `logits` (rows of `vocab`) and `rows`, and downloads its
// outputs into `out`; with `again`, launches it a second time over the same buffers into `again`.
void Sample(const std::vector<float>& logits, int vocab,
            const std::vector<kernels::SampleRow>& rows, std::vector<kernels::SampleOutput>* out,
            std::vector<kernels::SampleOutput>* again = nullptr) {
  DeviceArray<float> d_logits(logits);
  DeviceArray<kernels::SampleRow> d_rows(rows);
  DeviceArray<kernels::SampleOutput> d_out(rows.size());
  kernels::SamplingKernelParams p;
  p.logits = d_logits.get();
  p.vocab = vocab;
  p.rows = d_rows.get();
  p.out = d_out.get();
  p.num_rows = static_cast<int64_t>(rows.size());
  CUDA_ASSERT_OK(kernels::LaunchSampling(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  *out = d_out.Download();
  if (again == nullptr) return;
  CUDA_ASSERT_OK(kernels::LaunchSampling(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  *again = d_out.Download();
}

CpuSample Reference(const float* logits, int vocab) {
  CpuSample s;
  double max_logit = -INFINITY;
  for (int i = 0; i < vocab; ++i) max_logit = std::max<double>(max_logit, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max_logit);
  const double log_z = max_logit + std::log(sum);
  for (int i = 0; i < vocab; ++i) s.logprobs.push_back(logits[i] - log_z);
  s.order.resize(vocab);
  std::iota(s.order.begin(), s.order.end(), 0);
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](int a, int b) { return logits[a] > logits[b]; });
  return s;
}

TEST(SamplingKernel, GreedyLogprobsAndTopLogprobs) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int vocab = 32003, rows = 5;
  std::vector<float> logits = RandomFloats(int64_t{vocab} * rows, 31, 6.0f);
  logits[2 * vocab + 17] = logits[2 * vocab + 900] = 50.0f;  // a tie: lowest id wins
  std::vector<kernels::SampleRow> sample_rows(rows);
  for (int r = 0; r < rows; ++r) {
    sample_rows[r].logits_row = rows - 1 - r;  // rows read logits out of order
    sample_rows[r].num_top_logprobs = r * 4;
    sample_rows[r].top_k = r == 4 ? 1 : 0;
    sample_rows[r].temperature = r == 4 ? 0.7f : 0.0f;
  }
  std::vector<kernels::SampleOutput> out;
  ASSERT_NO_FATAL_FAILURE(Sample(logits, vocab, sample_rows, &out));
  double max_err = 0.0;
  for (int r = 0; r < rows; ++r) {
    const CpuSample ref =
        Reference(logits.data() + int64_t{sample_rows[r].logits_row} * vocab, vocab);
    EXPECT_EQ(out[r].token, ref.order[0]) << "row " << r;
    max_err = std::max(max_err, std::abs(out[r].logprob - ref.logprobs[ref.order[0]]));
    for (int n = 0; n < sample_rows[r].num_top_logprobs; ++n) {
      EXPECT_EQ(out[r].top_tokens[n], ref.order[n]) << "row " << r << " rank " << n;
      max_err = std::max(max_err, std::abs(out[r].top_logprobs[n] - ref.logprobs[ref.order[n]]));
    }
  }
  ReportError("sampling_logprob_abs", max_err);
  EXPECT_LT(max_err, 1e-3);
}

TEST(SamplingKernel, SeededDrawsStayInsideTopKAndTopPAndRepeat) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int vocab = 5000, rows = 64;
  const std::vector<float> one_row = RandomFloats(vocab, 41, 5.0f);
  std::vector<float> logits;
  for (int r = 0; r < rows; ++r) logits.insert(logits.end(), one_row.begin(), one_row.end());
  std::vector<kernels::SampleRow> sample_rows(rows);
  for (int r = 0; r < rows; ++r) {
    sample_rows[r].logits_row = r;
    sample_rows[r].temperature = 1.3f;
    sample_rows[r].top_k = r % 2 == 0 ? 20 : 0;
    sample_rows[r].top_p = r % 2 == 0 ? 1.0f : 0.5f;
    sample_rows[r].seed = 1234;
    sample_rows[r].sample_index = r / 2;
  }
  std::vector<kernels::SampleOutput> first, second;
  ASSERT_NO_FATAL_FAILURE(Sample(logits, vocab, sample_rows, &first, &second));

  const CpuSample ref = Reference(one_row.data(), vocab);
  std::vector<int> rank(vocab);
  for (int i = 0; i < vocab; ++i) rank[ref.order[i]] = i;
  // The top-p set at temperature 1.3.
  std::vector<double> probs(vocab);
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) total += probs[i] = std::exp(ref.logprobs[i] / 1.3);
  int nucleus = 0;
  for (double mass = 0.0; mass < 0.5 * total; ++nucleus) mass += probs[ref.order[nucleus]];
  std::vector<int> distinct;
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(first[r].token, second[r].token) << "row " << r;
    ASSERT_GE(first[r].token, 0);
    ASSERT_LT(first[r].token, vocab);
    EXPECT_LT(rank[first[r].token], r % 2 == 0 ? 20 : nucleus) << "row " << r;
    EXPECT_NEAR(first[r].logprob, ref.logprobs[first[r].token], 1e-3);
    distinct.push_back(first[r].token);
  }
  std::sort(distinct.begin(), distinct.end());
  EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 4);
}

// Each launch reads only what its own blocks wrote: shared memory keeps the previous launch's
// values (here, block sums far above every logit), and a reduction that read past its own
// entries returned a token id made of a float's bits on the second launch (seen on an H200).
TEST(SamplingKernel, RepeatedLaunchesPickTheArgmaxEachTime) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int vocab = 32003, rows = 24;
  for (int launch = 0; launch < 4; ++launch) {
    SCOPED_TRACE(launch);
    const std::vector<float> logits =
        RandomFloats(static_cast<size_t>(vocab) * rows, 100 + launch, 3.0f);
    std::vector<kernels::SampleRow> sample_rows(rows);
    for (int r = 0; r < rows; ++r) sample_rows[r].logits_row = r;
    std::vector<kernels::SampleOutput> out;
    ASSERT_NO_FATAL_FAILURE(Sample(logits, vocab, sample_rows, &out));
    for (int r = 0; r < rows; ++r) {
      const float* row = logits.data() + static_cast<size_t>(r) * vocab;
      EXPECT_EQ(out[r].token, std::max_element(row, row + vocab) - row) << "row " << r;
    }
  }
}

// One rule on both executors (common/sampling_rule.h): the kernel draws the CPU sampler's token
// for the same logits, parameters, seed and index. Float sums on the device against double on the
// host can move a draw within rounding of a boundary to its neighbour, so a few may differ.
TEST(SamplingKernel, DrawsTheCpuSamplersTokens) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int vocab = 3001, rows = 128;
  const std::vector<float> logits = RandomFloats(static_cast<size_t>(vocab) * rows, 77, 4.0f);
  std::vector<kernels::SampleRow> sample_rows(rows);
  std::vector<SamplingParams> params(rows);
  const int top_ks[] = {0, 1, 20, 50};
  const float top_ps[] = {1.0f, 0.9f, 0.5f};
  for (int r = 0; r < rows; ++r) {
    params[r] = {0.5f + 0.1f * static_cast<float>(r % 9), top_ks[r % 4], top_ps[(r / 4) % 3],
                 static_cast<uint64_t>(1000 + r), 0};
    sample_rows[r].logits_row = r;
    sample_rows[r].temperature = params[r].temperature;
    sample_rows[r].top_k = params[r].top_k;
    sample_rows[r].top_p = params[r].top_p;
    sample_rows[r].seed = params[r].seed;
    sample_rows[r].sample_index = r * 3;
  }
  std::vector<kernels::SampleOutput> out;
  ASSERT_NO_FATAL_FAILURE(Sample(logits, vocab, sample_rows, &out));
  std::vector<std::pair<float, int32_t>> scratch;
  int agree = 0;
  for (int r = 0; r < rows; ++r) {
    const SampledToken cpu = SampleToken(logits.data() + static_cast<size_t>(r) * vocab, vocab,
                                         params[r], sample_rows[r].sample_index, &scratch);
    if (cpu.token == out[r].token) ++agree;
  }
  std::printf("GPU_CHECK sampler_agree %d/%d\n", agree, rows);
  EXPECT_GE(agree, rows * 9 / 10);
}

// Structured output's allowed tokens, logit_bias with the penalties, and min_p, against the CPU
// sampler (executor/sampler.h), which states the rule: the choice is made from the adjusted
// logits of the allowed tokens, the reported logprobs stay the model's own.
TEST(SamplingKernel, AllowedTokensAdjustmentsAndMinPFollowTheCpuSampler) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int vocab = 20011, rows = 48;
  const int words = (vocab + 31) / 32;
  const std::vector<float> logits = RandomFloats(static_cast<size_t>(vocab) * rows, 91, 4.0f);
  std::mt19937 rng(92);
  std::vector<kernels::SampleRow> sample_rows(rows);
  std::vector<SamplingParams> params(rows);
  std::vector<std::vector<uint32_t>> masks(rows);
  std::vector<std::shared_ptr<LogitAdjustments>> adjust(rows);
  std::vector<uint32_t> all_masks;
  std::vector<kernels::LogitAdjustment> all_entries;
  std::vector<size_t> mask_at(rows, SIZE_MAX), entries_at(rows, SIZE_MAX);
  for (int r = 0; r < rows; ++r) {
    SamplingParams& sp = params[r];
    const bool greedy = r % 3 == 0;
    sp.temperature = greedy ? 0.0f : 0.6f + 0.1f * static_cast<float>(r % 5);
    sp.top_k = r % 4 == 1 ? 40 : 0;
    sp.top_p = r % 4 == 2 ? 0.8f : 1.0f;
    sp.min_p = r % 5 == 3 ? 0.05f : 0.0f;
    sp.seed = 500 + r;
    sp.num_top_logprobs = r % 7 == 0 ? 5 : 0;
    if (r % 2 == 0) {  // allowed tokens: a random third, one token alone, or none
      masks[r].assign(words, 0u);
      if (r == 2) {
        masks[r][777 / 32] |= 1u << (777 % 32);
      } else if (r != 4) {
        for (int i = 0; i < vocab; ++i) {
          if (rng() % 3 == 0) masks[r][i / 32] |= 1u << (i % 32);
        }
      }
      mask_at[r] = all_masks.size();
      all_masks.insert(all_masks.end(), masks[r].begin(), masks[r].end());
    }
    if (r % 4 != 0) {  // logit_bias and the penalties over a prompt and an output so far
      if (r % 8 < 4) sp.repetition_penalty = 1.3f;
      sp.presence_penalty = 0.4f;
      sp.frequency_penalty = r % 8 == 5 ? 0.0f : 0.3f;
      std::vector<LogitBias> biases;
      for (int i = 0; i < 10; ++i) biases.push_back({(r * 997 + i * 1999) % vocab, 3.0f - i});
      std::vector<int32_t> prompt(50);
      for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % vocab);
      adjust[r] = LogitAdjustments::Make(sp, biases, prompt);
      for (int i = 0; i < 40; ++i) adjust[r]->CountOutput(static_cast<int32_t>(rng() % 300));
      std::vector<MergedLogitAdjustment> merged;
      adjust[r]->Merge(vocab, &merged);
      entries_at[r] = all_entries.size();
      for (const MergedLogitAdjustment& m : merged) {
        all_entries.push_back({m.token, m.bias, m.repetition, m.subtract, 0.0f});
      }
      sample_rows[r].num_adjustments = static_cast<int32_t>(merged.size());
    }
    sample_rows[r].logits_row = r;
    sample_rows[r].temperature = sp.temperature;
    sample_rows[r].top_k = sp.top_k;
    sample_rows[r].top_p = sp.top_p;
    sample_rows[r].min_p = sp.min_p;
    sample_rows[r].seed = sp.seed;
    sample_rows[r].sample_index = r;
    sample_rows[r].num_top_logprobs = sp.num_top_logprobs;
  }
  DeviceArray<uint32_t> d_masks(all_masks);
  DeviceArray<kernels::LogitAdjustment> d_entries(all_entries);
  for (int r = 0; r < rows; ++r) {
    if (mask_at[r] != SIZE_MAX) sample_rows[r].allowed = d_masks.get() + mask_at[r];
    if (entries_at[r] != SIZE_MAX) sample_rows[r].adjustments = d_entries.get() + entries_at[r];
  }
  std::vector<kernels::SampleOutput> out;
  ASSERT_NO_FATAL_FAILURE(Sample(logits, vocab, sample_rows, &out));
  std::vector<std::pair<float, int32_t>> scratch;
  int agree = 0, greedy_rows = 0;
  double worst = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* row_logits = logits.data() + static_cast<size_t>(r) * vocab;
    const SampledToken cpu =
        SampleToken(row_logits, vocab, params[r], r, &scratch,
                    masks[r].empty() ? nullptr : masks[r].data(), adjust[r].get());
    if (r == 4) {
      EXPECT_EQ(out[r].token, -1) << "no token is allowed";
      continue;
    }
    if (r == 2) {
      EXPECT_EQ(out[r].token, 777) << "the one token allowed";
    }
    if (!masks[r].empty() && out[r].token >= 0) {
      EXPECT_TRUE((masks[r][out[r].token / 32] >> (out[r].token % 32)) & 1u) << "row " << r;
    }
    if (params[r].temperature == 0.0f) {
      ++greedy_rows;
      EXPECT_EQ(out[r].token, cpu.token) << "greedy row " << r;
    }
    if (out[r].token == cpu.token) {
      ++agree;
      worst = std::max(worst, std::abs(static_cast<double>(out[r].logprob) - cpu.logprob));
      for (int i = 0; i < params[r].num_top_logprobs; ++i) {
        EXPECT_EQ(out[r].top_tokens[i], cpu.top_logprobs[i].token) << "row " << r;
      }
    }
  }
  std::printf("GPU_CHECK sampler_extended_agree %d/%d\n", agree, rows - 1);
  ReportError("sampling_extended_logprob_abs", worst);
  EXPECT_GT(greedy_rows, 0);
  EXPECT_GE(agree, (rows - 1) * 9 / 10);
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace convoy
