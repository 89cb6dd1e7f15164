// Reading UTF-8 source text (grammars, patterns) one code point at a time.
#ifndef CONVOY_GRAMMAR_UTF8_DECODE_H_
#define CONVOY_GRAMMAR_UTF8_DECODE_H_

#include <cstddef>
#include <string_view>

namespace convoy::grammar {

// Decodes the code point at text[pos] into `cp`; returns its length in bytes, or 0 when the bytes
// there are not valid UTF-8 (overlong forms and surrogates included). REQUIRES: pos < size.
size_t DecodeUtf8(std::string_view text, size_t pos, char32_t& cp);

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_UTF8_DECODE_H_
