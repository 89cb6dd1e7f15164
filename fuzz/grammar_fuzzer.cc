// The grammar engine on arbitrary input: the first byte picks what the rest is compiled as (GBNF,
// a JSON schema, a regular expression, or choices one per line); a grammar that compiles is driven
// a few steps over a small fixed vocabulary, tokens picked by the following bytes. Checks what
// grammar.h and grammar_matcher.h promise: refusals are INVALID_ARGUMENT; every token the mask
// allows is accepted, a token it refuses is refused with the state unchanged; end tokens are
// allowed exactly when IsComplete(); masks from the grammar's per-position tables equal those of a
// matcher that walks the vocabulary's trie.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"

namespace convoy::fuzz {
namespace {

using grammar::Grammar;
using grammar::GrammarMatcher;
using grammar::TokenVocabulary;

const std::shared_ptr<const TokenVocabulary>& Vocabulary() {
  static const auto* vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t :
         {"{\"",  "\":", "\",\"", "\"}", "true", "null",     "12", "-0.5", "e+", "\\u00",
          "\\\"", "  ",  "\n",    "é",   "日本", "\xe6\x97", "ab", "abc",  "[]", "{}"}) {
      tokens.push_back(t);
    }
    tokens.push_back("");  // a special token
    tokens.push_back("");  // the end token
    const int32_t end = static_cast<int32_t>(tokens.size()) - 1;
    return new std::shared_ptr<const TokenVocabulary>(
        *TokenVocabulary::Create(std::move(tokens), {end}));
  }();
  return *vocab;
}

bool Allowed(const std::vector<uint32_t>& bits, int32_t t) {
  return (bits[t >> 5] >> (t & 31)) & 1;
}

void Drive(const std::shared_ptr<const Grammar>& g, std::string_view picks) {
  const auto& vocab = Vocabulary();
  GrammarMatcher matcher(g, vocab);
  GrammarMatcher walker(g, vocab, nullptr, nullptr);
  std::vector<uint32_t> bits(vocab->mask_words()), again(vocab->mask_words());
  for (size_t step = 0; step < 24; ++step) {
    matcher.FillNextTokenMask(bits.data());
    walker.FillNextTokenMask(again.data());
    Check(again == bits, "the tables' mask differs from the trie walk's");
    const int32_t end = vocab->end_tokens()[0];
    Check(Allowed(bits, end) == matcher.IsComplete(),
          "end token allowed differs from IsComplete()");
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab->size(); ++t) {
      if (Allowed(bits, t)) allowed.push_back(t);
    }
    const uint8_t pick = step < picks.size() ? static_cast<uint8_t>(picks[step]) : 0;
    const int32_t refused = static_cast<int32_t>((pick * 7919u) % vocab->size());
    if (!Allowed(bits, refused)) {
      Check(!matcher.AcceptToken(refused).ok(), "a token outside the mask was accepted");
      matcher.FillNextTokenMask(again.data());
      Check(again == bits, "a refused token changed the state");
    }
    if (allowed.empty()) return;
    const int32_t chosen = allowed[pick % allowed.size()];
    Check(matcher.AcceptToken(chosen).ok(), "a token in the mask was refused");
    Check(walker.AcceptToken(chosen).ok(), "a token in the mask was refused by the walker");
    if (matcher.IsTerminated() && vocab->is_end_token(chosen)) return;
  }
}

}  // namespace
}  // namespace convoy::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy::grammar;
  using convoy::fuzz::Check;
  if (size < 1) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The last 24 bytes (when there are more than 48) pick tokens; the rest is the source.
  std::string_view picks;
  if (rest.size() > 48) {
    picks = rest.substr(rest.size() - 24);
    rest = rest.substr(0, rest.size() - 24);
  }
  absl::StatusOr<std::shared_ptr<const Grammar>> g;
  switch (data[0] & 3) {
    case 0:
      g = CompileGbnf(rest);
      break;
    case 1:
      g = CompileJsonSchema(rest);
      break;
    case 2:
      g = CompileRegex(rest);
      break;
    default: {
      std::vector<std::string> choices;
      size_t start = 0;
      while (start <= rest.size()) {
        size_t end = rest.find('\n', start);
        if (end == std::string_view::npos) end = rest.size();
        choices.emplace_back(rest.substr(start, end - start));
        start = end + 1;
      }
      g = CompileChoices(choices);
    }
  }
  if (!g.ok()) {
    Check(g.status().code() == absl::StatusCode::kInvalidArgument,
          "a grammar was refused with a code other than INVALID_ARGUMENT");
    return 0;
  }
  convoy::fuzz::Drive(*g, picks);
  return 0;
}
