// What a request changes in the model's logits before its next token is chosen: logit_bias
// (OpenAI's: a value added to a token's logit), and the presence, frequency and repetition
// penalties, which depend on the tokens the request holds so far.
//
// Who touches it: the front end makes it (request validation), the scheduler hands it to each row
// that samples for the request (StepRow::logit_adjustments) and counts every token the request
// generates (CountOutput, on the engine thread, after a step's result), and the executor applies
// it while the step runs. The engine never counts while a step that holds the request runs (it
// applies a step's result before it launches the next), so no lock is needed.
//
// The order, as vLLM applies them: the bias, then the repetition penalty (a token of the prompt or
// the output: a positive logit divided by it, a negative one multiplied, as Hugging Face's
// RepetitionPenaltyLogitsProcessor does), then the frequency and presence penalties over the
// output's tokens (logit -= frequency * count + presence), as OpenAI defines them.
#ifndef CONVOY_STEP_LOGIT_ADJUSTMENTS_H_
#define CONVOY_STEP_LOGIT_ADJUSTMENTS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "convoy/sampling_params.h"

namespace convoy {

// logit_bias entries a request may have at most, and a bias's range (OpenAI's: [-100, 100]; -100
// bans a token and 100 all but forces it).
inline constexpr int32_t kMaxLogitBiasEntries = 1024;
inline constexpr float kMaxLogitBias = 100.0f;

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
};

// Everything Apply does to one token, as one entry: logit' = R(logit + bias) - subtract, where
// R(x) = x / repetition for x > 0, else x * repetition. For samplers that adjust a few logits
// where they are (the GPU's), with the same rounding as Apply.
struct MergedLogitAdjustment {
  int32_t token = 0;
  float bias = 0.0f;
  float repetition = 1.0f;
  float subtract = 0.0f;

  float Adjusted(float logit) const {
    float x = logit + bias;
    if (repetition != 1.0f) x = x > 0.0f ? x / repetition : x * repetition;
    return x - subtract;
  }
};

class LogitAdjustments {
 public:
  // Null when nothing would change a logit: no bias and neutral penalties. `biases` are in the
  // vocabulary and unique (request validation checks); `prompt` is the request's prompt.
  static std::shared_ptr<LogitAdjustments> Make(const SamplingParams& params,
                                                std::vector<LogitBias> biases,
                                                std::span<const int32_t> prompt) {
    const bool penalized = params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f ||
                           params.repetition_penalty != 1.0f;
    if (biases.empty() && !penalized) return nullptr;
    auto made = std::shared_ptr<LogitAdjustments>(new LogitAdjustments());
    made->presence_ = params.presence_penalty;
    made->frequency_ = params.frequency_penalty;
    made->repetition_ = params.repetition_penalty;
    made->biases_ = std::move(biases);
    if (made->repetition_ != 1.0f) {
      made->prompt_tokens_.assign(prompt.begin(), prompt.end());
      std::sort(made->prompt_tokens_.begin(), made->prompt_tokens_.end());
      made->prompt_tokens_.erase(
          std::unique(made->prompt_tokens_.begin(), made->prompt_tokens_.end()),
          made->prompt_tokens_.end());
    }
    return made;
  }

  LogitAdjustments(const LogitAdjustments&) = delete;
  LogitAdjustments& operator=(const LogitAdjustments&) = delete;

  // Counts a token the request generated (the engine thread, between steps).
  void CountOutput(int32_t token) {
    auto it = std::lower_bound(output_counts_.begin(), output_counts_.end(), token,
                               [](const auto& entry, int32_t t) { return entry.first < t; });
    if (it != output_counts_.end() && it->first == token) {
      ++it->second;
    } else {
      output_counts_.insert(it, {token, 1});
    }
  }

  // The tokens Apply changes, one entry each, ascending by token, replacing `out`'s contents.
  void Merge(int32_t vocab_size, std::vector<MergedLogitAdjustment>* out) const {
    // One entry per (source, token), then sorted and folded: linear in the prompt's and the
    // output's distinct tokens but for the sort (a long prompt under repetition_penalty makes
    // thousands). Each token has at most one bias and one subtrahend, so the folded sums are the
    // values themselves, as Apply adds them.
    out->clear();
    auto in_vocab = [vocab_size](int32_t token) { return token >= 0 && token < vocab_size; };
    for (const LogitBias& b : biases_) {
      if (in_vocab(b.token)) out->push_back({.token = b.token, .bias = b.bias});
    }
    if (repetition_ != 1.0f) {
      for (int32_t token : prompt_tokens_) {
        if (in_vocab(token)) out->push_back({.token = token, .repetition = repetition_});
      }
      for (const auto& [token, count] : output_counts_) {
        if (in_vocab(token)) out->push_back({.token = token, .repetition = repetition_});
      }
    }
    if (presence_ != 0.0f || frequency_ != 0.0f) {
      for (const auto& [token, count] : output_counts_) {
        if (!in_vocab(token)) continue;
        out->push_back(
            {.token = token, .subtract = frequency_ * static_cast<float>(count) + presence_});
      }
    }
    std::sort(out->begin(), out->end(),
              [](const MergedLogitAdjustment& a, const MergedLogitAdjustment& b) {
                return a.token < b.token;
              });
    size_t kept = 0;
    for (size_t i = 0; i < out->size(); ++i) {
      const MergedLogitAdjustment& e = (*out)[i];
      if (kept > 0 && (*out)[kept - 1].token == e.token) {
        MergedLogitAdjustment& merged = (*out)[kept - 1];
        merged.bias += e.bias;
        if (e.repetition != 1.0f) merged.repetition = e.repetition;
        merged.subtract += e.subtract;
      } else {
        (*out)[kept++] = e;
      }
    }
    out->resize(kept);
  }

  // Adjusts the `vocab_size` logits of the position to sample. Tokens outside the vocabulary are
  // skipped (none are, after validation).
  void Apply(float* logits, int32_t vocab_size) const {
    for (const LogitBias& b : biases_) {
      if (b.token >= 0 && b.token < vocab_size) logits[b.token] += b.bias;
    }
    if (repetition_ != 1.0f) {
      auto penalize = [&](int32_t token) {
        if (token < 0 || token >= vocab_size) return;
        float& x = logits[token];
        x = x > 0.0f ? x / repetition_ : x * repetition_;
      };
      for (int32_t token : prompt_tokens_) penalize(token);
      for (const auto& [token, count] : output_counts_) {
        if (!std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), token)) {
          penalize(token);
        }
      }
    }
    if (presence_ != 0.0f || frequency_ != 0.0f) {
      for (const auto& [token, count] : output_counts_) {
        if (token < 0 || token >= vocab_size) continue;
        logits[token] -= frequency_ * static_cast<float>(count) + presence_;
      }
    }
  }

 private:
  LogitAdjustments() = default;

  float presence_ = 0.0f;
  float frequency_ = 0.0f;
  float repetition_ = 1.0f;
  std::vector<LogitBias> biases_;
  std::vector<int32_t> prompt_tokens_;  // sorted, unique; with a repetition penalty
  std::vector<std::pair<int32_t, int32_t>> output_counts_;  // (token, times generated), by token
};

}  // namespace convoy

#endif  // CONVOY_STEP_LOGIT_ADJUSTMENTS_H_
