// Every limit the grammar engine enforces, in one place. A grammar, regular expression or schema
// that would pass one is refused with INVALID_ARGUMENT naming the limit, before anything large is
// built; a matcher that would pass one at run time drops the paths that do (see grammar_matcher.h).
#ifndef CONVOY_GRAMMAR_LIMITS_H_
#define CONVOY_GRAMMAR_LIMITS_H_

#include <cstdint>

namespace convoy::grammar {

// Source sizes: GBNF text, a regular expression (also a schema's "pattern"), a schema's JSON text.
inline constexpr int64_t kMaxGbnfBytes = 1 << 20;
inline constexpr int64_t kMaxPatternBytes = 4096;
inline constexpr int64_t kMaxSchemaBytes = 1 << 20;

// After compilation: rules (named and helper rules) and elements (one per byte set, rule
// reference or alternative end) of the flat grammar.
inline constexpr int64_t kMaxRules = 100'000;
inline constexpr int64_t kMaxElements = 1'000'000;

// Nesting: parentheses in GBNF and regular expressions, schemas inside schemas.
inline constexpr int kMaxNestingDepth = 64;

// The largest bound of a counted repetition once expanded: x{m,n} in GBNF and regular
// expressions, minItems/maxItems, minLength/maxLength.
inline constexpr int64_t kMaxRepetition = 1000;

// Choices: how many, and how long each is.
inline constexpr int64_t kMaxChoices = 10'000;
inline constexpr int64_t kMaxChoiceBytes = 4096;

// JSON output: the longest run of whitespace between two JSON tokens, the most digits of an
// integer (or of a number's integer part), of a number's fraction and of its exponent.
inline constexpr int kMaxJsonWhitespace = 16;
inline constexpr int kMaxIntegerDigits = 18;
inline constexpr int kMaxFractionDigits = 15;
inline constexpr int kMaxExponentDigits = 2;

// Vocabulary: how many tokens and how long one token's bytes may be.
inline constexpr int64_t kMaxVocabularySize = 1 << 22;
inline constexpr int64_t kMaxTokenBytes = 1024;

// Matcher, at run time: stacks alive at once (an ambiguous grammar's paths beyond it are
// dropped), interned states and stack nodes kept before a matcher's caches start over (a state
// that has been advanced holds a 1 KiB transition table), and token masks cached per matcher.
inline constexpr int64_t kMaxStacks = 1024;
inline constexpr int64_t kMaxCachedStates = 16384;
inline constexpr int64_t kMaxCachedNodes = 1 << 20;
inline constexpr int64_t kMaxCachedMasks = 256;
// Masks shared by every matcher of one grammar over one vocabulary (mask_cache.h): at most 32 MiB
// (about 5,000 masks of a 49,152-token vocabulary, 6 KiB each, with their keys); past it a part of
// the cache starts over.
inline constexpr int64_t kMaxSharedMaskBytes = 32 << 20;
// Per-position tables (position_masks.h), built once per grammar and vocabulary: at most 32 MiB
// (a byte-set position that allows many tokens holds a 6 KiB bitset over a 49,152-token
// vocabulary, one that allows few a list of them), and at most 25M trie steps to build (about half
// a second on one core; the 130 suite schemas take at most 9M, 110 ms). A grammar past either has
// no tables: its matchers walk the trie for every new state.
inline constexpr int64_t kMaxPositionMaskBytes = 32 << 20;
inline constexpr int64_t kMaxPositionMaskSteps = 25'000'000;

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_LIMITS_H_
