// What the fuzz targets share: small fixed tokenizers and chat templates, a way to hand bytes to
// readers that take a path, and the check that turns a broken contract into a crash.
#ifndef CONVOY_FUZZ_FUZZ_SUPPORT_H_
#define CONVOY_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace convoy::fuzz {

// Aborts (so that libFuzzer keeps the input) with `what` when `condition` is false: for contracts
// that the code under test states but no sanitizer sees, e.g. "Decode(Encode(text)) == text".
void Check(bool condition, std::string_view what);

// A byte-level BPE tokenizer ("gpt2" model, pre-tokenizer `pre`): the 256 byte tokens, a few
// merges, and the special tokens <|endoftext|> (BOS and EOS), <|im_start|>, <|im_end|>. Built once
// per `pre` and kept.
const Tokenizer& ByteLevelTokenizer(std::string_view pre = "gpt-2");

// A SentencePiece-style BPE tokenizer ("llama" model): <unk>, <s>, </s>, the 256 <0xXX> byte
// tokens, and a few scored pieces whose merges follow from the scores. Built once and kept.
const Tokenizer& SentencePieceTokenizer();

// A ChatML template ("<|im_start|>role\ncontent<|im_end|>\n" per message).
inline constexpr std::string_view kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// A path that reads as a regular file holding exactly `bytes` (an in-memory file, rewritten on
// each call): for readers whose only entry point maps a file. Valid until the next call.
const std::string& BytesAsFile(const uint8_t* data, size_t size);

}  // namespace convoy::fuzz

#endif  // CONVOY_FUZZ_FUZZ_SUPPORT_H_
