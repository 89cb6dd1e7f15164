#include "grammar/expr.h"

#include <algorithm>
#include <utility>

namespace convoy::grammar {

Expr Empty() { return Expr{}; }

Expr Literal(std::string_view text) {
  Expr e;
  e.kind = Expr::Kind::kBytes;
  e.text = std::string(text);
  return e;
}

Expr Bytes(const ByteSet& bytes) {
  Expr e;
  e.kind = Expr::Kind::kByteSet;
  e.bytes = bytes;
  return e;
}

Expr ByteRange(unsigned char lo, unsigned char hi) {
  ByteSet set;
  for (int b = lo; b <= hi; ++b) set.set(b);
  return Bytes(set);
}

Expr Class(std::vector<CodepointRange> ranges, bool negated) {
  Expr e;
  e.kind = Expr::Kind::kClass;
  e.ranges = NormalizeRanges(std::move(ranges), negated);
  return e;
}

Expr Ref(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::kRef;
  e.rule = rule;
  return e;
}

Expr Seq(std::vector<Expr> children) {
  if (children.size() == 1) return std::move(children[0]);
  Expr e;
  e.kind = Expr::Kind::kSeq;
  e.children = std::move(children);
  return e;
}

Expr Alt(std::vector<Expr> children) {
  if (children.size() == 1) return std::move(children[0]);
  Expr e;
  e.kind = Expr::Kind::kAlt;
  e.children = std::move(children);
  return e;
}

Expr Repeat(Expr child, int64_t min, int64_t max) {
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.children.push_back(std::move(child));
  return e;
}

Expr Optional(Expr child) { return Repeat(std::move(child), 0, 1); }
Expr Star(Expr child) { return Repeat(std::move(child), 0, Expr::kUnbounded); }
Expr Plus(Expr child) { return Repeat(std::move(child), 1, Expr::kUnbounded); }

std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (!negated) return merged;
  std::vector<CodepointRange> complement;
  char32_t next = 0;
  for (const CodepointRange& r : merged) {
    if (r.lo > next) complement.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
  return complement;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace convoy::grammar
