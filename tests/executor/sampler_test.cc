#include "executor/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "common/sampling_rule.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

double LogSoftmaxAt(const std::vector<float>& logits, int32_t i) {
  double m = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float l : logits) s += std::exp(l - m);
  return logits[i] - m - std::log(s);
}

TEST(SamplerTest, GreedyPicksArgmaxWithItsLogprob) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  SampledToken t = SampleToken(logits.data(), 5, SamplingParams{}, 0, &scratch);
  EXPECT_EQ(t.token, 1) << "ties go to the lowest id";
  EXPECT_NEAR(t.logprob, LogSoftmaxAt(logits, 1), 1e-6);
}

TEST(SamplerTest, GreedyOverALargeVocabularyMatchesADoubleLogSoftmax) {
  // Sizes with and without a partial last vector; the largest logit twice (the first one wins),
  // in the tail or in the body; -inf logits (a masked token) add nothing.
  for (int32_t vocab : {15, 16, 17, 32000, 49152, 49157}) {
    std::vector<float> logits(vocab);
    uint32_t s = 12345u + vocab;
    for (float& l : logits) {
      s = s * 1664525u + 1013904223u;
      l = static_cast<float>(s >> 8) / (1 << 24) * 60.0f - 30.0f;  // [-30, 30)
    }
    logits[vocab / 3] = -INFINITY;
    const int32_t first = vocab - 5, second = vocab - 2;
    logits[first] = logits[second] = 31.0f;
    std::vector<std::pair<float, int32_t>> scratch;
    SampledToken t = SampleToken(logits.data(), vocab, SamplingParams{}, 0, &scratch);
    EXPECT_EQ(t.token, first) << vocab;
    EXPECT_NEAR(t.logprob, LogSoftmaxAt(logits, first), 1e-5) << vocab;
  }
}

TEST(SamplerTest, ANanLogitDoesNotHideTheLargestOneBeforeIt) {
  // The NaN comes 16 logits after the maximum: the same vector lane for AVX-512 and AVX2.
  std::vector<float> logits(64, 0.0f);
  logits[5] = 3.0f;
  logits[21] = NAN;
  logits[40] = 2.0f;
  std::vector<std::pair<float, int32_t>> scratch;
  EXPECT_EQ(SampleToken(logits.data(), 64, SamplingParams{}, 0, &scratch).token, 5);
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {0.1f, 0.3f, 3.0f, 0.2f};
  std::vector<std::pair<float, int32_t>> scratch;
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(SampleToken(logits.data(), 4, {1.0f, 1, 1.0f, 9, 0}, i, &scratch).token, 2);
    EXPECT_EQ(SampleToken(logits.data(), 4, {1.0f, 0, 0.01f, 9, 0}, i, &scratch).token, 2);
  }
}

TEST(SamplerTest, SameSeedSameTokensOtherSeedOtherTokens) {
  std::vector<float> logits(50, 0.0f);
  std::vector<std::pair<float, int32_t>> scratch;
  std::vector<int32_t> a, b, c;
  for (int64_t i = 0; i < 40; ++i) {
    a.push_back(SampleToken(logits.data(), 50, {1.0f, 0, 1.0f, 42, 0}, i, &scratch).token);
    b.push_back(SampleToken(logits.data(), 50, {1.0f, 0, 1.0f, 42, 0}, i, &scratch).token);
    c.push_back(SampleToken(logits.data(), 50, {1.0f, 0, 1.0f, 43, 0}, i, &scratch).token);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// Draws follow softmax(logits / T) restricted by top-k and top-p. 20000 seeded draws are
// deterministic, so the frequency bounds below cannot flake.
TEST(SamplerTest, FrequenciesFollowTheTruncatedDistribution) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  std::vector<std::pair<float, int32_t>> scratch;
  auto frequencies = [&](SamplingParams p) {
    std::map<int32_t, double> f;
    const int n = 20000;
    for (int i = 0; i < n; ++i) f[SampleToken(logits.data(), 4, p, i, &scratch).token] += 1.0 / n;
    return f;
  };
  auto plain = frequencies({1.0f, 0, 1.0f, 5, 0});
  EXPECT_NEAR(plain[0], 0.5, 0.02);
  EXPECT_NEAR(plain[1], 0.3, 0.02);
  EXPECT_NEAR(plain[3], 0.05, 0.01);
  auto top2 = frequencies({1.0f, 2, 1.0f, 5, 0});
  EXPECT_NEAR(top2[0], 0.625, 0.02);
  EXPECT_EQ(top2.count(2) + top2.count(3), 0u);
  auto nucleus = frequencies({1.0f, 0, 0.7f, 5, 0});  // 0.5 + 0.3 reaches 0.7
  EXPECT_NEAR(nucleus[1], 0.375, 0.02);
  EXPECT_EQ(nucleus.count(2), 0u);
  auto hot = frequencies({2.0f, 0, 1.0f, 5, 0});  // p^(1/2), renormalized
  const double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  EXPECT_NEAR(hot[3], std::sqrt(0.05) / z, 0.015);
}

// The rule shared with the GPU kernel (common/sampling_rule.h): the draw walks the kept tokens in
// token-id order, not in order of likelihood.
TEST(SamplerTest, DrawIsTheInverseCdfInTokenIdOrder) {
  const std::vector<double> p = {0.1, 0.4, 0.2, 0.3};
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  std::vector<std::pair<float, int32_t>> scratch;
  const SamplingParams params{1.0f, 0, 1.0f, 99, 0};
  int checked = 0;
  for (int64_t i = 0; i < 500; ++i) {
    const double u = SampleUniform(params.seed, i);
    double cdf = 0.0, nearest = 1.0;
    int32_t want = -1;
    for (int32_t t = 0; t < 4; ++t) {
      cdf += p[t];
      nearest = std::min(nearest, std::abs(u - cdf));
      if (want < 0 && u < cdf) want = t;
    }
    if (nearest < 1e-6) continue;  // within rounding of a boundary
    ++checked;
    EXPECT_EQ(SampleToken(logits.data(), 4, params, i, &scratch).token, want) << "draw " << i;
  }
  EXPECT_GT(checked, 490);
}

// The rule of common/sampling_rule.h written out the plain way (every kept token sorted, masses in
// double), for comparing the sampler's sort-as-far-as-the-cut top_p with.
int32_t ReferenceDraw(const std::vector<float>& logits, const SamplingParams& p, int64_t index) {
  const double max = *std::max_element(logits.begin(), logits.end());
  auto mass = [&](double l) { return std::exp((l - max) / p.temperature); };
  std::vector<float> kept(logits);
  std::sort(kept.begin(), kept.end(), std::greater<float>());
  if (p.top_k > 0 && p.top_k < static_cast<int32_t>(kept.size())) {
    const float kth = kept[p.top_k - 1];
    while (kept.back() < kth) kept.pop_back();
  }
  double total = 0.0;
  for (float l : kept) total += mass(l);
  float threshold = kept.back();
  double cumulative = 0.0;
  for (size_t i = 0; i < kept.size(); ++i) {
    cumulative += mass(kept[i]);
    const bool group_ends = i + 1 == kept.size() || kept[i + 1] != kept[i];
    if (group_ends && cumulative >= p.top_p * total) {
      threshold = kept[i];
      total = cumulative;
      break;
    }
  }
  const double target = SampleUniform(p.seed, index) * total;
  double running = 0.0;
  for (size_t t = 0; t < logits.size(); ++t) {
    if (logits[t] < threshold) continue;
    running += mass(logits[t]);
    if (target < running) return static_cast<int32_t>(t);
  }
  return -1;
}

TEST(SamplerTest, TopPMatchesThePlainRuleWhereverTheCutFalls) {
  // Flat and peaked logits, and logits rounded to a few values so that groups of equal logits
  // straddle the sampler's sort rounds (64, 256, 1024, ... tokens); cuts from the first token to
  // most of the vocabulary.
  std::vector<std::pair<float, int32_t>> scratch;
  uint32_t s = 7u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / (1 << 24);  // [0, 1)
  };
  int compared = 0;
  for (int32_t vocab : {50, 3000, 20000}) {
    for (float spread : {0.5f, 4.0f, 20.0f}) {
      for (float step : {0.0f, 0.25f, 1.0f}) {
        std::vector<float> logits(vocab);
        for (float& l : logits) {
          l = spread * (next() - 0.5f);
          if (step > 0.0f) l = std::round(l / step) * step;
        }
        for (float top_p : {0.05f, 0.5f, 0.9f, 0.99f}) {
          for (int32_t top_k : {0, 100}) {
            const SamplingParams p{1.0f, top_k, top_p, 5, 0};
            for (int64_t i = 0; i < 20; ++i) {
              ++compared;
              ASSERT_EQ(SampleToken(logits.data(), vocab, p, i, &scratch).token,
                        ReferenceDraw(logits, p, i))
                  << "vocab " << vocab << " spread " << spread << " step " << step << " top_p "
                  << top_p << " top_k " << top_k << " draw " << i;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * 3 * 3 * 4 * 2 * 20);
}

TEST(SamplerTest, NanLogitsAreNeverDrawnAndEveryCutEnds) {
  std::vector<float> logits(300);
  for (int32_t i = 0; i < 300; ++i) logits[i] = i % 7 == 0 ? NAN : static_cast<float>(i % 13);
  std::vector<std::pair<float, int32_t>> scratch;
  for (float top_p : {0.3f, 0.9f, 1.0f}) {
    for (int32_t top_k : {0, 20}) {
      for (int64_t i = 0; i < 50; ++i) {
        const int32_t t =
            SampleToken(logits.data(), 300, {1.0f, top_k, top_p, 3, 0}, i, &scratch).token;
        ASSERT_GE(t, 0);
        EXPECT_FALSE(std::isnan(logits[t])) << "top_p " << top_p << " top_k " << top_k;
      }
    }
  }
}

TEST(SamplerTest, TiesAtTheTopKAndTopPCutsAreKept) {
  std::vector<std::pair<float, int32_t>> scratch;
  auto seen = [&](const std::vector<float>& logits, SamplingParams p) {
    std::set<int32_t> tokens;
    for (int i = 0; i < 2000; ++i) {
      tokens.insert(
          SampleToken(logits.data(), static_cast<int32_t>(logits.size()), p, i, &scratch).token);
    }
    return tokens;
  };
  // The 2nd largest logit is 2, held by tokens 1 and 2: both stay.
  EXPECT_EQ(seen({3.0f, 2.0f, 2.0f, 0.0f}, {1.0f, 2, 1.0f, 3, 0}), (std::set<int32_t>{0, 1, 2}));
  // Tokens 0 and 1 share the top logit; either alone would reach top_p, so both stay.
  EXPECT_EQ(seen({2.0f, 2.0f, 0.0f, 0.0f}, {1.0f, 0, 0.3f, 3, 0}), (std::set<int32_t>{0, 1}));
}

TEST(SamplerTest, SampleUniformIsFixedBySeedAndIndex) {
  // The draw's definition must not drift: the GPU kernel and saved outputs depend on it.
  EXPECT_EQ(SampleUniform(0, 0), SampleUniform(0, 0));
  EXPECT_NE(SampleUniform(1, 0), SampleUniform(0, 1));
  double sum = 0.0;
  for (int64_t i = 0; i < 10000; ++i) {
    const double u = SampleUniform(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(SamplerTest, TopLogprobsAreTheMostLikelyInOrder) {
  std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  SampledToken t = SampleToken(logits.data(), 4, {0.0f, 0, 1.0f, 0, 3}, 0, &scratch);
  ASSERT_EQ(t.top_logprobs.size(), 3u);
  EXPECT_EQ(t.top_logprobs[0].token, 1);
  EXPECT_EQ(t.top_logprobs[1].token, 3);
  EXPECT_EQ(t.top_logprobs[2].token, 2);
  EXPECT_NEAR(t.top_logprobs[1].logprob, LogSoftmaxAt(logits, 3), 1e-6);
}

TEST(SamplerTest, ValidationNamesTheField) {
  EXPECT_THAT(ValidateSamplingParams({-1.0f, 0, 1.0f, 0, 0}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("temperature")));
  EXPECT_THAT(ValidateSamplingParams({NAN, 0, 1.0f, 0, 0}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("temperature")));
  EXPECT_THAT(ValidateSamplingParams({1.0f, -2, 1.0f, 0, 0}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_k")));
  EXPECT_THAT(ValidateSamplingParams({1.0f, 0, 0.0f, 0, 0}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  EXPECT_THAT(ValidateSamplingParams({1.0f, 0, 1.5f, 0, 0}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  EXPECT_THAT(ValidateSamplingParams({1.0f, 0, 1.0f, 0, 11}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_top_logprobs")));
  EXPECT_OK(ValidateSamplingParams({0.7f, 40, 0.9f, 1, 5}, 10));
}

// The bits of step/token_constraint.h allowing exactly `tokens`.
std::vector<uint32_t> MaskOf(int32_t vocab, const std::vector<int32_t>& tokens) {
  std::vector<uint32_t> bits((vocab + 31) / 32, 0u);
  for (int32_t t : tokens) bits[t >> 5] |= 1u << (t & 31);
  return bits;
}

std::vector<float> RandomLogits(int32_t vocab, uint32_t seed) {
  std::vector<float> logits(vocab);
  for (float& l : logits) {
    seed = seed * 1664525u + 1013904223u;
    l = static_cast<float>(seed >> 8) / (1 << 24) * 16.0f - 8.0f;
  }
  return logits;
}

TEST(SamplerTest, AMaskAllowingOneTokenForcesItGreedyAndSampled) {
  const int32_t vocab = 1000;
  const std::vector<float> logits = RandomLogits(vocab, 7);
  std::vector<std::pair<float, int32_t>> scratch;
  for (int32_t forced : {0, 31, 32, 517, 999}) {
    const std::vector<uint32_t> mask = MaskOf(vocab, {forced});
    for (const SamplingParams& p : {SamplingParams{}, SamplingParams{1.0f, 0, 1.0f, 3, 0},
                                    SamplingParams{0.7f, 40, 0.9f, 5, 2}}) {
      for (int64_t i = 0; i < 20; ++i) {
        SampledToken t = SampleToken(logits.data(), vocab, p, i, &scratch, mask.data());
        ASSERT_EQ(t.token, forced) << "temperature " << p.temperature << " draw " << i;
        // The logprob stays the model's own, not the masked distribution's (which would be 0).
        EXPECT_NEAR(t.logprob, LogSoftmaxAt(logits, forced), 1e-5);
        if (p.num_top_logprobs > 0) {
          ASSERT_EQ(t.top_logprobs.size(), 2u);
          EXPECT_EQ(t.top_logprobs[0].token,
                    std::max_element(logits.begin(), logits.end()) - logits.begin());
        }
      }
    }
  }
}

TEST(SamplerTest, AMaskAllowingEverythingChangesNothing) {
  const int32_t vocab = 49157;
  const std::vector<float> logits = RandomLogits(vocab, 11);
  std::vector<int32_t> all(vocab);
  for (int32_t i = 0; i < vocab; ++i) all[i] = i;
  const std::vector<uint32_t> mask = MaskOf(vocab, all);
  std::vector<std::pair<float, int32_t>> scratch;
  for (const SamplingParams& p : {SamplingParams{}, SamplingParams{1.0f, 0, 1.0f, 3, 0},
                                  SamplingParams{0.8f, 50, 0.95f, 4, 1}}) {
    for (int64_t i = 0; i < 30; ++i) {
      SampledToken free = SampleToken(logits.data(), vocab, p, i, &scratch);
      SampledToken masked = SampleToken(logits.data(), vocab, p, i, &scratch, mask.data());
      EXPECT_EQ(masked.token, free.token) << i;
      EXPECT_EQ(masked.logprob, free.logprob) << i;
    }
  }
}

TEST(SamplerTest, AMaskedDrawFollowsTheRenormalisedDistribution) {
  // Four tokens allowed out of eight: the draws over many indices land only on them, each about
  // as often as its share of the allowed mass.
  const std::vector<float> logits = {2.0f, 0.0f, 1.0f, 3.0f, 0.5f, -1.0f, 1.5f, 4.0f};
  const std::vector<int32_t> allowed = {1, 2, 4, 6};
  const std::vector<uint32_t> mask = MaskOf(8, allowed);
  double total = 0;
  for (int32_t t : allowed) total += std::exp(logits[t]);
  std::map<int32_t, int> counts;
  std::vector<std::pair<float, int32_t>> scratch;
  const int draws = 20000;
  for (int64_t i = 0; i < draws; ++i) {
    ++counts[SampleToken(logits.data(), 8, {1.0f, 0, 1.0f, 99, 0}, i, &scratch, mask.data()).token];
  }
  for (const auto& [token, n] : counts) {
    ASSERT_TRUE(std::count(allowed.begin(), allowed.end(), token)) << token;
    EXPECT_NEAR(static_cast<double>(n) / draws, std::exp(logits[token]) / total, 0.015) << token;
  }
}

TEST(SamplerTest, AMaskAllowingNothingChoosesNoToken) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const std::vector<uint32_t> mask = MaskOf(3, {});
  std::vector<std::pair<float, int32_t>> scratch;
  EXPECT_EQ(SampleToken(logits.data(), 3, SamplingParams{}, 0, &scratch, mask.data()).token, -1);
}

TEST(SamplerTest, AMaskedGreedyDrawNeverFallsBackToAMaskedToken) {
  // The only allowed token has a -inf logit: it is still the one chosen.
  const std::vector<float> logits = {5.0f, -INFINITY, 3.0f};
  const std::vector<uint32_t> mask = MaskOf(3, {1});
  std::vector<std::pair<float, int32_t>> scratch;
  EXPECT_EQ(SampleToken(logits.data(), 3, SamplingParams{}, 0, &scratch, mask.data()).token, 1);
  EXPECT_EQ(SampleToken(logits.data(), 3, {1.0f, 0, 1.0f, 1, 0}, 0, &scratch, mask.data()).token,
            1);
}

}  // namespace
}  // namespace convoy
