#include "executor/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_format.h"
#include "common/sampling_rule.h"
#include "common/simd.h"

namespace convoy {
namespace {

// Larger logit first; equal logits by lower token id, so every order is total and deterministic.
bool ByLogitDesc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

struct LogSumExp {
  float max_logit = -INFINITY;
  int32_t argmax = 0;  // the first token holding max_logit
  float log_z = 0.0f;  // max_logit + log(sum(exp(logit - max_logit)))
};

// With AVX-512 sixteen logits at a time (AVX2: eight), each exp in fp32 (Exp16, Exp8: relative
// error about 1e-6) and their sum in double; one value at a time in double took a tenth of a
// 16-row decode step over a 49,152-token vocabulary. The vector max takes the loaded logits
// first, so a NaN logit leaves its lane's maximum as it was, as the scalar loop does.
LogSumExp ComputeLogSumExp(const float* logits, int32_t n) {
  LogSumExp r;
  int32_t i = 0;
  double sum = 0.0;
#if defined(__AVX512F__)
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(_mm512_loadu_ps(logits + i), vmax);
  r.max_logit = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) r.max_logit = std::max(r.max_logit, logits[i]);
  while (r.argmax < n && !(logits[r.argmax] == r.max_logit)) ++r.argmax;
  if (r.argmax == n) r.argmax = 0;  // every logit NaN
  const __m512 shift = _mm512_set1_ps(r.max_logit);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n, i);
    const __m512 e = _mm512_maskz_mov_ps(
        mask, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, logits + i), shift)));
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(
        hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
#elif defined(CONVOY_SIMD_AVX2)
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(logits + i), vmax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  for (float lane : lanes) r.max_logit = std::max(r.max_logit, lane);
  for (; i < n; ++i) r.max_logit = std::max(r.max_logit, logits[i]);
  while (r.argmax < n && !(logits[r.argmax] == r.max_logit)) ++r.argmax;
  if (r.argmax == n) r.argmax = 0;  // every logit NaN
  const __m256 shift = _mm256_set1_ps(r.max_logit);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(logits + i), shift));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double halves[4];
  _mm256_store_pd(halves, _mm256_add_pd(lo, hi));
  sum = halves[0] + halves[1] + halves[2] + halves[3];
  for (; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - r.max_logit));
#else
  for (; i < n; ++i) {
    if (logits[i] > r.max_logit) {
      r.max_logit = logits[i];
      r.argmax = i;
    }
  }
  for (i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - r.max_logit));
#endif
  r.log_z = r.max_logit + static_cast<float>(std::log(sum));
  return r;
}

// The rule of common/sampling_rule.h over `logits`, whose maximum and first argmax `lse` holds.
// `skip_masked`: a -inf logit is never chosen (a masked token), even when rounding puts the draw
// past the end.
int32_t ChooseToken(const float* logits, int32_t vocab_size, const SamplingParams& params,
                    int64_t sample_index, std::vector<std::pair<float, int32_t>>* scratch,
                    const LogSumExp& lse, bool skip_masked) {
  const float max_logit = lse.max_logit;
  const int32_t argmax = lse.argmax;
  int32_t token = argmax;
  if (params.temperature != 0.0f && params.top_k != 1) {
    // The rule of common/sampling_rule.h: cuts by logit value (ties at a cut kept), then the
    // inverse CDF in token-id order.
    auto& c = *scratch;
    c.resize(vocab_size);
    // A NaN logit (a broken model) counts as -inf: it is never drawn, and the cuts' comparisons
    // stay a strict weak order.
    for (int32_t i = 0; i < vocab_size; ++i) {
      c[i] = {std::isnan(logits[i]) ? -INFINITY : logits[i], i};
    }
    const double inv_t = 1.0 / params.temperature;
    auto mass = [&](float logit) {
      return std::exp((static_cast<double>(logit) - max_logit) * inv_t);
    };
    // min_p keeps p_i >= min_p * p_max, that is logit_i >= max + temperature * ln(min_p): a cut
    // by logit value like top_k's, so the two commute and top_p applies to what both keep.
    float threshold =
        params.min_p > 0.0f ? max_logit + params.temperature * std::log(params.min_p) : -INFINITY;
    int32_t candidates = vocab_size;  // the kept tokens are c[0, candidates) once sorted
    if (params.top_k > 0 && params.top_k < vocab_size) {
      std::nth_element(c.begin(), c.begin() + (params.top_k - 1), c.end(), ByLogitDesc);
      threshold = std::max(threshold, c[params.top_k - 1].first);
    }
    if (threshold > -INFINITY) {
      candidates = static_cast<int32_t>(
          std::partition(c.begin(), c.end(), [&](const auto& x) { return x.first >= threshold; }) -
          c.begin());
    }
    double total = 0.0;
    for (int32_t i = 0; i < candidates; ++i) total += mass(c[i].first);
    if (params.top_p < 1.0f) {
      // The kept mass in descending logit order, a group of equal logits at a time, sorting only
      // as far as the cut: c[0, sorted) holds the largest, in order, and grows fourfold until the
      // cut falls inside it (sorting a whole 49,152-token vocabulary took 4 ms a row).
      const double goal = static_cast<double>(params.top_p) * total;
      double cumulative = 0.0;
      int32_t sorted = 0;
      auto sort_more = [&] {
        const int32_t grow = std::max<int32_t>(64, 3 * sorted);
        const int32_t next = candidates - sorted <= grow ? candidates : sorted + grow;
        if (next < candidates) {
          std::nth_element(c.begin() + sorted, c.begin() + next, c.begin() + candidates,
                           ByLogitDesc);
        }
        std::sort(c.begin() + sorted, c.begin() + next, ByLogitDesc);
        sorted = next;
      };
      for (int32_t i = 0; i < candidates;) {
        if (i == sorted) sort_more();
        const float value = c[i].first;
        int32_t end = i;
        for (;;) {  // the whole group of c[i]'s value, which may go on past the sorted part
          while (end < sorted && c[end].first == value) ++end;
          if (end < sorted || sorted == candidates) break;
          sort_more();
        }
        for (; i < end; ++i) cumulative += mass(value);
        if (cumulative >= goal) {
          threshold = std::max(threshold, value);
          total = cumulative;
          break;
        }
      }
    }
    const double target = SampleUniform(params.seed, sample_index) * total;
    double running = 0.0;
    int32_t last_kept = argmax;
    for (int32_t i = 0; i < vocab_size; ++i) {
      if (!(logits[i] >= threshold) || (skip_masked && logits[i] == -INFINITY)) continue;
      running += mass(logits[i]);
      last_kept = i;
      if (target < running) break;
    }
    // Rounding can put the target past the end: the last kept token then.
    token = last_kept;
  }
  return token;
}

// The `num_top` most likely tokens and their logprobs (log_z: the log-sum-exp), most likely first.
void AddTopLogprobs(const float* logits, int32_t vocab_size, float log_z, int32_t num_top,
                    std::vector<std::pair<float, int32_t>>* scratch, SampledToken* result) {
  if (num_top <= 0) return;
  auto& c = *scratch;
  c.resize(vocab_size);
  for (int32_t i = 0; i < vocab_size; ++i) c[i] = {logits[i], i};
  const int32_t n = std::min(num_top, vocab_size);
  std::partial_sort(c.begin(), c.begin() + n, c.end(), ByLogitDesc);
  for (int32_t i = 0; i < n; ++i) result->top_logprobs.push_back({c[i].second, c[i].first - log_z});
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  if (std::optional<SamplingParamError> error =
          CheckSamplingParams(p, std::min(vocab_size, kMaxTopLogprobs))) {
    return absl::InvalidArgumentError(absl::StrCat(error->field, " ", error->reason));
  }
  return absl::OkStatus();
}

SampledToken SampleToken(const float* logits, int32_t vocab_size, const SamplingParams& params,
                         int64_t sample_index, std::vector<std::pair<float, int32_t>>* scratch,
                         const uint32_t* allowed, const LogitAdjustments* adjustments) {
  // log_softmax of the raw logits, for the reported logprobs.
  const LogSumExp lse = ComputeLogSumExp(logits, vocab_size);
  const float log_z = lse.log_z;

  SampledToken result;
  if (allowed == nullptr && adjustments == nullptr) {
    result.token = ChooseToken(logits, vocab_size, params, sample_index, scratch, lse, false);
  } else {
    // The adjusted logits of the allowed tokens, the rest -inf; and their maximum and its first
    // token, which is all ChooseToken reads of a LogSumExp (no sum of exponentials is needed for
    // the choice). The first allowed token stands when every allowed logit is NaN or -inf.
    thread_local std::vector<float> work;
    work.assign(logits, logits + vocab_size);
    if (adjustments != nullptr) adjustments->Apply(work.data(), vocab_size);
    LogSumExp work_max;
    work_max.argmax = -1;
    for (int32_t i = 0; i < vocab_size; ++i) {
      if (allowed != nullptr && !TokenAllowed(allowed, i)) {
        work[i] = -INFINITY;
        continue;
      }
      if (work_max.argmax < 0 || work[i] > work_max.max_logit) {
        work_max.max_logit = work[i];
        work_max.argmax = i;
      }
    }
    if (work_max.argmax < 0) {
      result.token = -1;
      return result;
    }
    result.token =
        ChooseToken(work.data(), vocab_size, params, sample_index, scratch, work_max, true);
  }
  result.logprob = logits[result.token] - log_z;
  AddTopLogprobs(logits, vocab_size, log_z, params.num_top_logprobs, scratch, &result);
  return result;
}

SampledToken ScoreToken(const float* logits, int32_t vocab_size, int32_t token, int32_t num_top,
                        std::vector<std::pair<float, int32_t>>* scratch) {
  const LogSumExp lse = ComputeLogSumExp(logits, vocab_size);
  SampledToken result;
  result.token = token;
  result.logprob = logits[token] - lse.log_z;
  AddTopLogprobs(logits, vocab_size, lse.log_z, num_top, scratch, &result);
  return result;
}

}  // namespace convoy
