// GgufFile::Open on arbitrary bytes (through an in-memory file: the reader maps a path), then
// everything the server reads from a GGUF file that opens: every metadata value, a row of every
// tensor that has a dequantizer, the Llama config and tensors, the tokenizer and the chat template.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"
#include "model/gguf_llama_config.h"
#include "model/gguf_llama_tensors.h"
#include "model/gguf_tokenizer.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace convoy::fuzz {
namespace {

// Rows longer than this are not dequantized (the data checks still run at Open).
constexpr int64_t kMaxRowValues = 1 << 16;

void ReadMetadata(const GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)value.Describe();
    (void)value.AsInt();
    (void)value.AsDouble();
    (void)value.AsBool();
    if (value.type == GgufValueType::kArray) {
      (void)value.ArrayInt(0);
      if (value.count > 0) (void)value.ArrayInt(value.count - 1);
      (void)value.ArrayInt(value.count);
    }
    Check(file.FindValue(key) == &value, "FindValue does not find a metadata key");
  }
}

void ReadTensors(const GgufFile& file) {
  std::vector<float> row;
  for (const GgufTensor& tensor : file.tensors()) {
    Check(file.FindTensor(tensor.name) == &tensor, "FindTensor does not find a tensor");
    const int64_t elements = tensor.NumElements();
    const int64_t row_length = tensor.RowLength();
    if (!CanDequantize(tensor.type) || row_length <= 0 || row_length > kMaxRowValues) continue;
    row.resize(static_cast<size_t>(row_length));
    const int64_t rows = elements / row_length;
    for (int64_t r : {int64_t{0}, rows - 1, rows}) {
      if (r < 0) continue;
      absl::Status status = DequantizeRow(tensor, r, row.data());
      Check(status.ok() == (r < rows), "DequantizeRow: wrong answer for the row's range");
    }
  }
}

void ReadTokenizerAndTemplate(const GgufFile& file) {
  absl::StatusOr<TokenizerSpec> spec = TokenizerSpecFromGguf(file);
  if (spec.ok()) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(*spec);
    if (tokenizer.ok()) {
      absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode("Hello world <s>", true);
      if (ids.ok()) (void)(*tokenizer)->Decode(*ids);
    }
  }
  absl::StatusOr<std::optional<std::string>> source = ChatTemplateFromGguf(file);
  if (source.ok() && source->has_value()) (void)ChatTemplate::Parse(**source);
}

}  // namespace
}  // namespace convoy::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy;
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(fuzz::BytesAsFile(data, size));
  if (!file.ok()) return 0;
  fuzz::ReadMetadata(**file);
  fuzz::ReadTensors(**file);
  fuzz::ReadTokenizerAndTemplate(**file);
  absl::StatusOr<ModelConfig> config = GgufLlamaConfig(**file);
  if (config.ok()) (void)GgufLlamaTensors::Load(*std::move(file), *config);
  return 0;
}
