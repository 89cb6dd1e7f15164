// The grammar vocabulary of SmolLM2 (the default model's tokenizer, from tests/fixtures), or, when
// that file is missing, a synthetic one: every single byte plus a few thousand random strings.
#ifndef CONVOY_TESTS_GRAMMAR_SMOLLM2_VOCABULARY_H_
#define CONVOY_TESTS_GRAMMAR_SMOLLM2_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/xoshiro.h"
#include "grammar/token_vocabulary.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace convoy::grammar::testing {

inline std::shared_ptr<const TokenVocabulary> SyntheticVocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  const std::string alphabet = " \n\t\"{}[]:,.-+eE0123456789abcdefghijklmnopqrstuvwxyzABCXYZ_\\/@";
  Xoshiro256 rng(7);
  for (int i = 0; i < 4000; ++i) {
    std::string t;
    const int length = 2 + static_cast<int>(rng.Next() % 6);
    for (int k = 0; k < length; ++k) t += alphabet[rng.Next() % alphabet.size()];
    tokens.push_back(t);
  }
  tokens.push_back("\xc3\xa9");
  tokens.push_back("\xe6\x97\xa5");
  tokens.push_back("");
  const int32_t end = static_cast<int32_t>(tokens.size()) - 1;
  return *TokenVocabulary::Create(std::move(tokens), {end});
}

// `source_dir`: the repository root.
inline std::shared_ptr<const TokenVocabulary> SmolLm2Vocabulary(const std::string& source_dir,
                                                                bool* real = nullptr) {
  auto tokenizer = Tokenizer::FromHuggingFaceJsonFile(
      source_dir + "/tests/fixtures/tokenizer/smollm2/tokenizer.json");
  if (real != nullptr) *real = tokenizer.ok();
  if (!tokenizer.ok()) return SyntheticVocabulary();
  std::vector<std::string> bytes((*tokenizer)->vocab_size());
  std::vector<int32_t> end;
  for (int32_t id = 0; id < (*tokenizer)->vocab_size(); ++id) {
    const auto token = (*tokenizer)->IdToToken(id);
    if (!token) continue;
    if ((*tokenizer)->IsSpecial(id)) {
      if (*token == "<|endoftext|>" || *token == "<|im_end|>") end.push_back(id);
      continue;
    }
    bytes[id] = tokenizer_internal::FromByteLevel(*token);
  }
  return *TokenVocabulary::Create(std::move(bytes), std::move(end));
}

}  // namespace convoy::grammar::testing

#endif  // CONVOY_TESTS_GRAMMAR_SMOLLM2_VOCABULARY_H_
