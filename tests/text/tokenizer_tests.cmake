# Tokenizers against Hugging Face tokenizers (fixtures written by
# scripts/fixtures/tokenizer_fixtures.py), streaming detokenization, invalid input and large input.
convoy_test(tokenizer_fixtures_test SOURCES tokenizer_fixtures_test.cc
  LIBS convoy_tokenizer nlohmann_json::nlohmann_json)
convoy_test(tokenizer_test SOURCES tokenizer_test.cc LIBS convoy_tokenizer)
convoy_test(tokenizer_detokenizer_test SOURCES tokenizer_detokenizer_test.cc LIBS convoy_tokenizer)
