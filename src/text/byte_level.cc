#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace convoy::tokenizer_internal {
namespace {

struct Alphabet {
  std::array<char32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  std::array<int, 324> byte{};  // by code point; the alphabet's largest is U+0143

  Alphabet() {
    byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      code_point[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      byte[code_point[b]] = b;
      AppendUtf8(code_point[b], &utf8[b]);
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* const alphabet = new Alphabet();
  return *alphabet;
}

}  // namespace

char32_t ByteLevelCodePoint(unsigned char byte) { return GetAlphabet().code_point[byte]; }

int ByteLevelByte(char32_t code_point) {
  const Alphabet& alphabet = GetAlphabet();
  return code_point < alphabet.byte.size() ? alphabet.byte[code_point] : -1;
}

std::string ToByteLevel(std::string_view bytes) {
  const Alphabet& alphabet = GetAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(alphabet.utf8[static_cast<unsigned char>(c)]);
  return out;
}

std::string FromByteLevel(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const int byte = ByteLevelByte(NextCodePoint(token, &pos));
    if (byte < 0) return std::string(token);
    bytes.push_back(static_cast<char>(byte));
  }
  return bytes;
}

}  // namespace convoy::tokenizer_internal
