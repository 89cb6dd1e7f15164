// GPT-2's byte-level alphabet: every byte is spelled as one printable code point, so that a
// vocabulary of strings can hold arbitrary bytes. Printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 bytes take U+0100 upward in byte order (so the space
// is 'Ġ', U+0120).
#ifndef CONVOY_TEXT_BYTE_LEVEL_H_
#define CONVOY_TEXT_BYTE_LEVEL_H_

#include <string>
#include <string_view>

namespace convoy::tokenizer_internal {

// The code point that spells `byte`.
char32_t ByteLevelCodePoint(unsigned char byte);

// The byte that `code_point` spells, or -1 when it is not in the alphabet.
int ByteLevelByte(char32_t code_point);

// `bytes` spelled in the alphabet (UTF-8).
std::string ToByteLevel(std::string_view bytes);

// The bytes a byte-level token spells, as the ByteLevel decoder of Hugging Face tokenizers reads
// it: when some character of `token` (valid UTF-8) is outside the alphabet, the token's own bytes.
std::string FromByteLevel(std::string_view token);

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_BYTE_LEVEL_H_
