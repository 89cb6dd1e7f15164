// What a Tokenizer is made of. Both factories (tokenizer.json, GGUF spec) fill one; the Tokenizer
// derives its tables from it. Internal to the text module.
#ifndef CONVOY_TEXT_TOKENIZER_PARTS_H_
#define CONVOY_TEXT_TOKENIZER_PARTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/pretokenizer.h"

namespace convoy::tokenizer_internal {

struct TokenizerParts {
  // Filled by the factories.
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  TokenDecoder decoder;
  std::vector<int32_t> prefix_ids;  // what Encode with add_special puts before the text
  std::vector<int32_t> suffix_ids;  // and after it
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  std::optional<int32_t> pad_id;

  // Derived by Tokenizer::Create.
  std::vector<std::string> tokens;  // by id; an id without a token has !has_token
  std::vector<bool> has_token;
  std::vector<bool> special;
  std::vector<std::string> token_bytes;  // by id, for the ByteLevel decoder
  absl::flat_hash_map<std::string, int32_t> token_ids;
  std::unique_ptr<AddedTokenMatcher> raw_matcher;         // added tokens matched before normalizing
  std::unique_ptr<AddedTokenMatcher> normalized_matcher;  // and after
};

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_TOKENIZER_PARTS_H_
