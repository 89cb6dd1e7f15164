#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fuzz_support.h"
#include "text/tokenizer_spec.h"
#include "text/utf8.h"

namespace convoy::fuzz {
namespace {

bool IsPrintableByte(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

// GPT-2's byte-to-character table: printable bytes stand for themselves, the others for U+0100
// onwards, in byte order.
std::string ByteLevelChar(int byte) {
  char32_t cp = static_cast<char32_t>(byte);
  if (!IsPrintableByte(byte)) {
    cp = 0x100;
    for (int b = 0; b < byte; ++b) cp += IsPrintableByte(b) ? 0 : 1;
  }
  std::string out;
  tokenizer_internal::AppendUtf8(cp, &out);
  return out;
}

std::unique_ptr<Tokenizer> BuildOrDie(const TokenizerSpec& spec, std::string_view name) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(spec);
  Check(tokenizer.ok(), absl::StrCat(std::string(name), ": ", tokenizer.status().ToString()));
  return *std::move(tokenizer);
}

}  // namespace

const Tokenizer& ByteLevelTokenizer(std::string_view pre) {
  static auto* const tokenizers =
      new std::map<std::string, std::unique_ptr<Tokenizer>, std::less<>>;
  auto it = tokenizers->find(pre);
  if (it != tokenizers->end()) return *it->second;
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = std::string(pre);
  spec.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  spec.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kControl};
  for (int byte = 0; byte < 256; ++byte) {
    spec.tokens.push_back(ByteLevelChar(byte));
    spec.token_types.push_back(TokenType::kNormal);
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"},   {"Ġ", "a"},   {"e", "r"},
      {"Ġ", "s"}, {"o", "n"}, {"Ġ", "Ġ"},   {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"},   {"1", "2"},
      {"Ã", "©"}, {"a", "b"}, {"ab", "c"},  {"in", "g"},  {"Ġs", "he"}, {"e", "n"}};
  for (const auto& [left, right] : merges) {
    spec.merges.push_back(absl::StrCat(left, " ", right));
    spec.tokens.push_back(left + right);
    spec.token_types.push_back(TokenType::kNormal);
  }
  spec.bos_id = 0;
  spec.eos_id = 0;
  return *tokenizers->emplace(std::string(pre), BuildOrDie(spec, "byte-level tokenizer"))
              .first->second;
}

const Tokenizer& SentencePieceTokenizer() {
  static const Tokenizer* const tokenizer = [] {
    TokenizerSpec spec;
    spec.model = "llama";
    spec.tokens = {"<unk>", "<s>", "</s>"};
    spec.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
    spec.scores = {0, 0, 0};
    for (int byte = 0; byte < 256; ++byte) {
      spec.tokens.push_back(absl::StrFormat("<0x%02X>", byte));
      spec.token_types.push_back(TokenType::kByte);
      spec.scores.push_back(0);
    }
    const std::vector<std::string> pieces = {"▁",  "a",  "b",  "c",    "e",   "h",
                                             "t",  "▁t", "he", "▁the", "ab",  "abc",
                                             "▁a", "é",  "日", "本",   "日本"};
    float score = -1;
    for (const std::string& piece : pieces) {
      spec.tokens.push_back(piece);
      spec.token_types.push_back(TokenType::kNormal);
      spec.scores.push_back(score);
      score -= 1;
    }
    spec.bos_id = 1;
    spec.eos_id = 2;
    spec.unk_id = 0;
    return BuildOrDie(spec, "SentencePiece tokenizer").release();
  }();
  return *tokenizer;
}

}  // namespace convoy::fuzz
