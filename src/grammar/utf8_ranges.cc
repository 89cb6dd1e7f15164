#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <string>

namespace convoy::grammar {
namespace {

int EncodedLength(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] with lo and hi of the same encoded length.
void SplitSameLength(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, out);
        SplitSameLength((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, out);
        SplitSameLength(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, a);
  AppendUtf8(hi, b);
  Utf8Sequence seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out.push_back(std::move(seq));
}

void Split(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // cut the surrogates out
    if (lo < 0xD800) Split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) Split(0xE000, hi, out);
    return;
  }
  for (char32_t bound : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= bound && hi > bound) {
      Split(lo, bound, out);
      Split(bound + 1, hi, out);
      return;
    }
  }
  SplitSameLength(lo, hi, out);
}

}  // namespace

std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  for (const CodepointRange& r : ranges) Split(r.lo, std::min(r.hi, kMaxCodepoint), out);
  return out;
}

}  // namespace convoy::grammar
