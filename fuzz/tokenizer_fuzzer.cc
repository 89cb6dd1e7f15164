// The tokenizers on arbitrary input: the first byte picks a fixed tokenizer and the flags; the
// rest is encoded as text and, read as 16-bit numbers, decoded as ids, whole and one id at a time.
// Checks what tokenizer.h and detokenizer.h promise: ids in range, byte-level text that comes
// back unchanged, and streamed text equal to the whole decode and valid UTF-8 piece by piece.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace convoy::fuzz {
namespace {

const Tokenizer& Pick(uint8_t selector, bool& byte_level) {
  byte_level = true;
  switch (selector & 3) {
    case 0:
      return ByteLevelTokenizer("gpt-2");
    case 1:
      return ByteLevelTokenizer("llama-bpe");
    case 2:
      return ByteLevelTokenizer((selector & 0x10) ? "qwen2" : "smollm");
    default:
      byte_level = false;
      return SentencePieceTokenizer();
  }
}

void EncodeText(const Tokenizer& tokenizer, bool byte_level, bool add_special,
                std::string_view text) {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, add_special);
  if (!ids.ok()) {
    Check(!tokenizer_internal::ValidateUtf8(text).ok() ||
              ids.status().code() == absl::StatusCode::kResourceExhausted,
          "Encode refused valid UTF-8: " + ids.status().ToString());
    return;
  }
  for (int32_t id : *ids) Check(id >= 0 && id < tokenizer.vocab_size(), "Encode: id out of range");
  absl::StatusOr<std::string> decoded = tokenizer.Decode(*ids);
  Check(decoded.ok(), "Decode of Encode's ids failed");
  if (byte_level && !add_special)
    Check(*decoded == text, "byte-level Decode(Encode(text)) != text");
}

void DecodeIds(const Tokenizer& tokenizer, bool skip_special, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    // Mostly ids of the vocabulary, some just outside it.
    const int32_t raw = static_cast<uint8_t>(bytes[i]) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    ids.push_back(raw % (tokenizer.vocab_size() + 4) - 2);
  }
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::vector<int32_t> accepted;
  std::string streamed;
  for (int32_t id : ids) {
    absl::StatusOr<std::string> piece = detokenizer.Next(id);
    const bool valid = id >= 0 && id < tokenizer.vocab_size() && tokenizer.IdToToken(id);
    Check(piece.ok() == valid, "IncrementalDetokenizer::Next accepts exactly the token ids");
    if (!piece.ok()) continue;
    Check(tokenizer_internal::ValidateUtf8(*piece).ok(), "Next returned invalid UTF-8");
    streamed += *piece;
    accepted.push_back(id);
  }
  std::string tail = detokenizer.Flush();
  Check(tokenizer_internal::ValidateUtf8(tail).ok(), "Flush returned invalid UTF-8");
  streamed += tail;
  absl::StatusOr<std::string> whole = tokenizer.Decode(accepted, skip_special);
  Check(whole.ok(), "Decode refused ids that Next accepted");
  Check(*whole == streamed, "streamed text != Decode");
  if (accepted.size() != ids.size()) Check(!tokenizer.Decode(ids).ok(), "Decode took a bad id");
}

}  // namespace
}  // namespace convoy::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy::fuzz;
  if (size == 0) return 0;
  bool byte_level;
  const convoy::Tokenizer& tokenizer = Pick(data[0], byte_level);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  EncodeText(tokenizer, byte_level, (data[0] & 4) != 0, rest);
  DecodeIds(tokenizer, (data[0] & 8) != 0, rest);
  return 0;
}
