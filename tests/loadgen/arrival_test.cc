#include "bench/loadgen/arrival.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/loadgen/request_source.h"
#include "bench/loadgen/workload.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

namespace convoy::bench {
namespace {

v1::OpenLoop Open(double rate, v1::OpenLoop::Pattern pattern, double burstiness = 0.25) {
  v1::OpenLoop open;
  open.set_rate_rps(rate);
  open.set_pattern(pattern);
  open.set_burstiness(burstiness);
  return open;
}

struct Moments {
  double mean;
  double cv2;  // squared coefficient of variation
};

Moments GapMoments(OpenLoopArrivals& arrivals, int n) {
  double sum = 0;
  double sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double g = arrivals.NextGapSeconds();
    EXPECT_GE(g, 0);
    sum += g;
    sum2 += g * g;
  }
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return {mean, var / (mean * mean)};
}

TEST(ArrivalTest, SameSeedSameGaps) {
  OpenLoopArrivals a(Open(5, v1::OpenLoop::POISSON), 42);
  OpenLoopArrivals b(Open(5, v1::OpenLoop::POISSON), 42);
  OpenLoopArrivals c(Open(5, v1::OpenLoop::POISSON), 43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.NextGapSeconds();
    EXPECT_EQ(x, b.NextGapSeconds());
    differs |= x != c.NextGapSeconds();
  }
  EXPECT_TRUE(differs);
}

TEST(ArrivalTest, PoissonRateAndVariance) {
  OpenLoopArrivals arrivals(Open(8, v1::OpenLoop::POISSON), 7);
  const Moments m = GapMoments(arrivals, 200000);
  EXPECT_NEAR(m.mean, 1.0 / 8, 0.01 / 8);
  EXPECT_NEAR(m.cv2, 1.0, 0.05);  // exponential gaps
}

TEST(ArrivalTest, BurstyKeepsTheRateWithMoreVariance) {
  OpenLoopArrivals arrivals(Open(3, v1::OpenLoop::BURSTY, 0.25), 11);
  const Moments m = GapMoments(arrivals, 400000);
  EXPECT_NEAR(m.mean, 1.0 / 3, 0.02 / 3);
  EXPECT_NEAR(m.cv2, 4.0, 0.4);  // 1 / shape
}

TEST(ArrivalTest, ConstantIsEvenlySpaced) {
  OpenLoopArrivals arrivals(Open(4, v1::OpenLoop::CONSTANT), 1);
  for (int i = 0; i < 10; ++i) EXPECT_DOUBLE_EQ(arrivals.NextGapSeconds(), 0.25);
}

TEST(RngTest, GammaMeanForShapesAboveAndBelowOne) {
  for (double shape : {0.3, 1.0, 2.5}) {
    Rng rng(5);
    double sum = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) sum += rng.Gamma(shape);
    EXPECT_NEAR(sum / n, shape, 0.02 * shape) << shape;
  }
}

TEST(RngTest, UniformIntCoversItsRangeEvenly) {
  Rng rng(9);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const int64_t x = rng.UniformInt(3, 12);
    ASSERT_GE(x, 3);
    ASSERT_LE(x, 12);
    ++counts[x - 3];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(LengthTest, DistributionsStayInBounds) {
  Rng rng(3);
  v1::LengthDistribution fixed;
  fixed.set_fixed(17);
  EXPECT_EQ(SampleLength(fixed, rng), 17);
  v1::LengthDistribution uniform;
  uniform.mutable_uniform()->set_min(5);
  uniform.mutable_uniform()->set_max(9);
  v1::LengthDistribution lognormal;
  lognormal.mutable_lognormal()->set_median(100);
  lognormal.mutable_lognormal()->set_sigma(1.0);
  lognormal.mutable_lognormal()->set_min(20);
  lognormal.mutable_lognormal()->set_max(300);
  std::vector<int> samples;
  int hit_min = 0, hit_max = 0;
  for (int i = 0; i < 20000; ++i) {
    const int u = SampleLength(uniform, rng);
    EXPECT_GE(u, 5);
    EXPECT_LE(u, 9);
    const int l = SampleLength(lognormal, rng);
    EXPECT_GE(l, 20);
    EXPECT_LE(l, 300);
    hit_min += l == 20;
    hit_max += l == 300;
    samples.push_back(l);
  }
  EXPECT_GT(hit_min, 0);
  EXPECT_GT(hit_max, 0);
  std::sort(samples.begin(), samples.end());
  EXPECT_NEAR(samples[samples.size() / 2], 100, 5);  // the median
}

TEST(RequestSourceTest, SeededSequenceWithinVocabularyAndContext) {
  absl::StatusOr<v1::Workload> w = ParseWorkload(R"pb(
                                                   seed: 99
                                                   arrival { closed_loop { concurrency: 1 } }
                                                   request_class {
                                                     name: "short"
                                                     weight: 3
                                                     priority: 1
                                                     prompt_tokens { uniform { min: 1 max: 20 } }
                                                     output_tokens { fixed: 5 }
                                                   }
                                                   request_class {
                                                     name: "long"
                                                     weight: 1
                                                     prompt_tokens { fixed: 5000 }
                                                     output_tokens { fixed: 100 }
                                                   }
                                                 )pb",
                                                 "w");
  ASSERT_OK(w);
  RequestSource a(*w, 50, 1024, w->seed());
  RequestSource b(*w, 50, 1024, w->seed());
  int long_count = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const PlannedRequest x = a.Next();
    const PlannedRequest y = b.Next();
    ASSERT_EQ(x.index, i);
    ASSERT_EQ(x.class_index, y.class_index);
    ASSERT_EQ(x.prompt_token_ids, y.prompt_token_ids);
    ASSERT_EQ(x.max_tokens, y.max_tokens);
    ASSERT_EQ(x.sampling_seed, y.sampling_seed);
    for (int32_t id : x.prompt_token_ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 50);
    }
    ASSERT_LE(static_cast<int64_t>(x.prompt_token_ids.size()) + x.max_tokens, 1024);
    if (x.class_index == 1) {
      ++long_count;
      EXPECT_EQ(x.prompt_token_ids.size(), 1024u - 100u);  // shortened to fit the context
      EXPECT_EQ(x.priority, 0);
    } else {
      EXPECT_EQ(x.priority, 1);
    }
  }
  EXPECT_NEAR(static_cast<double>(long_count) / n, 0.25, 0.03);
}

TEST(RequestSourceTest, AClassSharedPrefixBeginsEachOfItsPrompts) {
  absl::StatusOr<v1::Workload> w = ParseWorkload(R"pb(
                                                   seed: 7
                                                   arrival { closed_loop { concurrency: 1 } }
                                                   request_class {
                                                     name: "chat"
                                                     shared_prefix_tokens: 300
                                                     prompt_tokens { uniform { min: 1 max: 40 } }
                                                     output_tokens { fixed: 8 }
                                                   }
                                                   request_class {
                                                     name: "plain"
                                                     prompt_tokens { fixed: 300 }
                                                     output_tokens { fixed: 8 }
                                                   }
                                                 )pb",
                                                 "w");
  ASSERT_OK(w);
  RequestSource source(*w, 1000, 320, w->seed());
  std::vector<int32_t> prefix;
  int shortened = 0;
  for (int i = 0; i < 400; ++i) {
    const PlannedRequest r = source.Next();
    ASSERT_LE(static_cast<int64_t>(r.prompt_token_ids.size()) + r.max_tokens, 320);
    if (r.class_index == 1) {
      // Two draws of 300 random ids out of 1,000 agree on the first ten with odds of 1e-30.
      ASSERT_EQ(r.prompt_token_ids.size(), 300u);
      if (!prefix.empty()) {
        EXPECT_NE(std::vector<int32_t>(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 10),
                  std::vector<int32_t>(prefix.begin(), prefix.begin() + 10));
      }
      continue;
    }
    ASSERT_GE(r.prompt_token_ids.size(), 301u);
    const std::vector<int32_t> head(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 300);
    if (prefix.empty()) prefix = head;
    EXPECT_EQ(head, prefix) << "request " << i;
    // The prompt's own tokens are cut to fit the context (300 + 12 + 8), the prefix never.
    if (r.prompt_token_ids.size() == 312u) ++shortened;
  }
  EXPECT_GT(shortened, 0);
}

}  // namespace
}  // namespace convoy::bench
