// A "random model" for grammar tests and benchmarks: at each step it picks a random allowed token;
// past `soft_cap` steps it steers towards an end, three steps in four (an end token once allowed,
// else tokens made only of '"', '}' and ']', else short tokens that open nothing), and gives up
// after `hard_cap` steps.
#ifndef CONVOY_TESTS_GRAMMAR_RANDOM_MODEL_H_
#define CONVOY_TESTS_GRAMMAR_RANDOM_MODEL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/xoshiro.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"

namespace convoy::grammar::testing {

struct RandomRun {
  std::string text;
  bool finished = false;  // an end token was accepted
  int steps = 0;
  absl::Status error;  // a broken contract between the mask and AcceptToken
};

inline RandomRun RunRandomModel(GrammarMatcher& matcher, const TokenVocabulary& vocab,
                                uint64_t seed, int soft_cap = 48, int hard_cap = 1500,
                                const std::function<void()>& before_mask = nullptr,
                                const std::function<void()>& after_mask = nullptr) {
  Xoshiro256 rng(seed);
  RandomRun run;
  std::vector<uint32_t> bits(vocab.mask_words());
  std::vector<int32_t> allowed, preferred;
  for (; run.steps < hard_cap; ++run.steps) {
    if (before_mask) before_mask();
    matcher.FillNextTokenMask(bits.data());
    if (after_mask) after_mask();
    allowed.clear();
    for (int32_t t = 0; t < vocab.size(); ++t) {
      if ((bits[t >> 5] >> (t & 31)) & 1) allowed.push_back(t);
    }
    bool end_allowed = false;
    for (int32_t e : vocab.end_tokens())
      end_allowed = end_allowed || ((bits[e >> 5] >> (e & 31)) & 1);
    if (end_allowed != matcher.IsComplete()) {
      run.error = absl::InternalError("end tokens allowed differs from IsComplete()");
      return run;
    }
    if (allowed.empty()) {
      run.error = absl::InternalError(absl::StrCat("no token allowed after: ", run.text));
      return run;
    }
    // A few tokens the mask refuses must be refused by AcceptToken too.
    for (int k = 0; k < 3; ++k) {
      const int32_t t = static_cast<int32_t>(rng.Next() % vocab.size());
      if (!((bits[t >> 5] >> (t & 31)) & 1) && matcher.AcceptToken(t).ok()) {
        run.error = absl::InternalError(absl::StrCat("token ", t, " accepted but not in the mask"));
        return run;
      }
    }
    int32_t choice = allowed[rng.Next() % allowed.size()];
    if (run.steps >= soft_cap && (end_allowed || rng.Next() % 4 != 0)) {
      preferred.clear();
      if (end_allowed) {
        for (int32_t e : vocab.end_tokens()) preferred.push_back(e);
      }
      if (preferred.empty()) {
        for (int32_t t : allowed) {
          const std::string& b = vocab.token_bytes(t);
          if (!b.empty() && b.find_first_not_of("\"}]") == std::string::npos)
            preferred.push_back(t);
        }
      }
      if (preferred.empty()) {
        for (int32_t t : allowed) {
          const std::string& b = vocab.token_bytes(t);
          if (b.size() == 1 && std::string_view("{[ \n\t\r").find(b[0]) == std::string::npos) {
            preferred.push_back(t);
          }
        }
      }
      if (!preferred.empty()) choice = preferred[rng.Next() % preferred.size()];
    } else if (end_allowed && rng.Next() % 4 == 0) {
      choice = vocab.end_tokens()[0];
    }
    if (absl::Status s = matcher.AcceptToken(choice); !s.ok()) {
      run.error = absl::InternalError(absl::StrCat("allowed token refused: ", s.message()));
      return run;
    }
    if (vocab.is_end_token(choice)) {
      run.finished = true;
      ++run.steps;
      return run;
    }
    run.text += vocab.token_bytes(choice);
  }
  return run;
}

}  // namespace convoy::grammar::testing

#endif  // CONVOY_TESTS_GRAMMAR_RANDOM_MODEL_H_
