# Tokenizers (byte-level and SentencePiece-style BPE, as Hugging Face tokenizers has them) and
# streaming detokenization. PCRE2 runs the pre-tokenizers' Unicode regexes; utf8proc the Unicode
# normalization forms.
add_library(convoy_tokenizer
  utf8.cc
  utf8.h
  byte_level.cc
  byte_level.h
  pretokenizer_regex.cc
  pretokenizer_regex.h
  pretokenizer.cc
  pretokenizer.h
  pretokenizer_table.cc
  normalizer.cc
  normalizer.h
  added_tokens.cc
  added_tokens.h
  bpe.cc
  bpe.h
  decoder.cc
  decoder.h
  detokenizer.cc
  detokenizer.h
  tokenizer.cc
  tokenizer.h
  tokenizer_parts.h
  tokenizer_spec.h
  tokenizer_from_spec.cc
  tokenizer_hf_json.cc)
target_link_libraries(convoy_tokenizer
  PUBLIC convoy_common absl::flat_hash_map absl::flat_hash_set absl::span absl::function_ref
  PRIVATE absl::str_format PkgConfig::PCRE2 PkgConfig::UTF8PROC nlohmann_json::nlohmann_json)
convoy_target_warnings(convoy_tokenizer)
