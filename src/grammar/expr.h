// Grammar expressions: what the front ends (GBNF, regular expressions, choices, JSON schema) build
// before a grammar is lowered to its flat form (program.h). Plain values; a rule is referred to by
// the id a GrammarBuilder gave it.
#ifndef CONVOY_GRAMMAR_EXPR_H_
#define CONVOY_GRAMMAR_EXPR_H_

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace convoy::grammar {

// Code points lo..hi, both included.
struct CodepointRange {
  char32_t lo = 0;
  char32_t hi = 0;
};

// The largest code point; UTF-16 surrogates (U+D800..U+DFFF) are never matched.
inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

using ByteSet = std::bitset<256>;

struct Expr {
  enum class Kind {
    kSeq,      // children one after another (no children: the empty string)
    kAlt,      // any one child (no children: nothing matches)
    kBytes,    // the bytes of `text`
    kByteSet,  // one byte of `bytes`
    kClass,    // one code point of `ranges`, as UTF-8
    kRef,      // rule `rule`
    kRepeat,   // children[0] between `min` and `max` times (max kUnbounded: no upper bound)
  };
  static constexpr int64_t kUnbounded = -1;

  Kind kind = Kind::kSeq;
  std::string text;
  ByteSet bytes;
  std::vector<CodepointRange> ranges;  // sorted, disjoint, not adjacent
  int32_t rule = -1;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<Expr> children;
};

Expr Empty();
Expr Literal(std::string_view text);
Expr Bytes(const ByteSet& bytes);
Expr ByteRange(unsigned char lo, unsigned char hi);
// Code points in `ranges` (any order, may overlap), or not in them when `negated`.
Expr Class(std::vector<CodepointRange> ranges, bool negated = false);
Expr Ref(int32_t rule);
Expr Seq(std::vector<Expr> children);
Expr Alt(std::vector<Expr> children);
Expr Repeat(Expr child, int64_t min, int64_t max);
Expr Optional(Expr child);
Expr Star(Expr child);
Expr Plus(Expr child);

// `ranges` sorted and merged, or its complement in 0..kMaxCodepoint when `negated`.
std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges, bool negated);

// Appends `code_point` as UTF-8.
void AppendUtf8(char32_t code_point, std::string& out);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_EXPR_H_
