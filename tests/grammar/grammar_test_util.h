// Helpers for the grammar tests: byte-level vocabularies and whole-text matching.
#ifndef CONVOY_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_
#define CONVOY_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"

namespace convoy::grammar::testing {

// Tokens 0..255 are the single bytes, then `extra` in order, then one end token (no bytes).
inline std::shared_ptr<const TokenVocabulary> ByteVocabulary(
    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  tokens.push_back("");
  const int32_t end = static_cast<int32_t>(tokens.size()) - 1;
  return *TokenVocabulary::Create(std::move(tokens), {end});
}

inline int32_t EndToken(const TokenVocabulary& vocab) { return vocab.end_tokens()[0]; }

// Feeds `text` byte by byte; true when every byte is allowed and the text is complete.
inline bool Matches(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  static const auto vocab = ByteVocabulary();
  GrammarMatcher matcher(grammar, vocab);
  for (char c : text) {
    if (!matcher.AcceptToken(static_cast<unsigned char>(c)).ok()) return false;
  }
  return matcher.IsComplete();
}

inline std::vector<uint32_t> Mask(GrammarMatcher& matcher, const TokenVocabulary& vocab) {
  std::vector<uint32_t> bits(vocab.mask_words());
  matcher.FillNextTokenMask(bits.data());
  return bits;
}

inline bool Allowed(const std::vector<uint32_t>& bits, int32_t token) {
  return (bits[token / 32] >> (token % 32)) & 1;
}

// The bytes of every allowed token that has bytes.
inline std::set<std::string> AllowedStrings(GrammarMatcher& matcher, const TokenVocabulary& vocab) {
  const std::vector<uint32_t> bits = Mask(matcher, vocab);
  std::set<std::string> out;
  for (int32_t t = 0; t < vocab.size(); ++t) {
    if (Allowed(bits, t) && !vocab.token_bytes(t).empty()) out.insert(vocab.token_bytes(t));
  }
  return out;
}

}  // namespace convoy::grammar::testing

#endif  // CONVOY_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_
