// Reading source text (grammars, patterns): UTF-8 one code point at a time, hex digits, and
// repetition counts.
#ifndef CONVOY_GRAMMAR_UTF8_DECODE_H_
#define CONVOY_GRAMMAR_UTF8_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace convoy::grammar {

// Decodes the code point at text[pos] into `cp`; returns its length in bytes, or 0 when the bytes
// there are not valid UTF-8 (overlong forms and surrogates included). REQUIRES: pos < size.
size_t DecodeUtf8(std::string_view text, size_t pos, char32_t& cp);

// The value of hexadecimal digit `c`, or -1.
int HexDigitValue(char c);

// Reads the decimal digits at text[pos] (advancing pos) into `value`, saturating at `cap`; false
// when there are none.
bool ReadCount(std::string_view text, size_t& pos, int64_t cap, int64_t& value);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_UTF8_DECODE_H_
