// Code point ranges as sequences of byte ranges: the UTF-8 encodings of exactly the code points in
// a range (surrogates excluded), for lowering character classes to byte-level grammar elements.
#ifndef CONVOY_GRAMMAR_UTF8_RANGES_H_
#define CONVOY_GRAMMAR_UTF8_RANGES_H_

#include <cstdint>
#include <vector>

#include "grammar/expr.h"

namespace convoy::grammar {

struct ByteRangePair {
  uint8_t lo = 0;
  uint8_t hi = 0;
};

// One UTF-8 shape: the i-th byte lies in ranges[i]; 1 to 4 bytes.
using Utf8Sequence = std::vector<ByteRangePair>;

// Byte sequences whose union encodes exactly the code points of `ranges` other than surrogates.
std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_UTF8_RANGES_H_
