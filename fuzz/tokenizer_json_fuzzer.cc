// Tokenizer::FromHuggingFaceJson on arbitrary bytes; a tokenizer that loads then encodes and
// decodes a fixed text and its own first ids.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using convoy::fuzz::Check;
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<convoy::Tokenizer>> tokenizer =
      convoy::Tokenizer::FromHuggingFaceJson(json, {.bos_token = "<s>", .eos_token = "</s>"});
  if (!tokenizer.ok()) return 0;
  const convoy::Tokenizer& t = **tokenizer;
  Check(t.vocab_size() >= 0, "negative vocab_size");
  for (bool add_special : {false, true}) {
    absl::StatusOr<std::vector<int32_t>> ids =
        t.Encode("Hello, world! 123 <s> héllo 日本\n\n  x</s>", add_special);
    if (!ids.ok()) continue;
    for (int32_t id : *ids) Check(id >= 0 && id < t.vocab_size(), "Encode: id out of range");
    (void)t.Decode(*ids, /*skip_special=*/false);
    (void)t.Decode(*ids, /*skip_special=*/true);
  }
  std::vector<int32_t> first;
  for (int32_t id = -1; id < 64 && id <= t.vocab_size(); ++id) first.push_back(id);
  (void)t.Decode(first);
  if (first.size() > 2) (void)t.Decode(std::vector<int32_t>(first.begin() + 1, first.end() - 1));
  return 0;
}
