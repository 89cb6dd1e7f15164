// GgufFile::Open on arbitrary bytes (through an in-memory file: the reader maps a path), then
// everything the server reads from a GGUF file that opens: every metadata value, a row of every
// tensor that has a dequantizer, the Llama config and tensors, the tokenizer and the chat template;
// and for the Llama tensors kept in their blocks, what the CPU executor runs on them: rows read
// back (tensor_rows.h, the embedding lookup) and the quantized product (quant_matmul.h), whose
// best path (VNNI where the CPU has it), AVX2 and portable paths must give the same bits whatever
// the blocks hold, at one activation row (the one-row kernels) and at several (the tile kernels).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "executor/cpu/quant_matmul.h"
#include "fuzz_support.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"
#include "model/gguf_llama_config.h"
#include "model/gguf_llama_tensors.h"
#include "model/gguf_tokenizer.h"
#include "model/tensor_rows.h"
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

// Equal bits, or both NaN (the paths need not agree on a NaN's payload).
bool SameFloat(float a, float b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// The first and last rows of each quantized view as floats, and the product of a few of its rows
// with one, two and five activation rows (the last one all zeros) on every path (kBest: AVX-512
// VNNI where the CPU has it), which must give the same bits.
void RunQuantizedViews(const GgufLlamaTensors& tensors) {
  std::vector<float> row, x, y_best, y_avx2, y_portable;
  QuantizedRows quantized;
  for (const auto& [name, view] : tensors.views()) {
    if (view.dtype != DType::kQuantized) continue;
    const int64_t k = ViewRowLength(view);
    const int64_t rows = ViewRows(view);
    if (k <= 0 || k > kMaxRowValues || rows <= 0) continue;
    row.resize(static_cast<size_t>(k));
    ViewRowsToFloat(view, 0, 1, row.data());
    ViewRowsToFloat(view, rows - 1, 1, row.data());
    if (!QuantMatmulSupports(view.quant_type) || k % QuantizedRows::kGroup != 0) continue;
    const int64_t n = std::min<int64_t>(rows, 4);
    x.assign(static_cast<size_t>(5 * k), 0.0f);
    for (int64_t i = 0; i < 4 * k; ++i) x[i] = static_cast<float>((i * 37) % 23 - 11) / 8.0f;
    // One activation row (the one-row kernels), two (the tile kernels) and five (four at once, then
    // one).
    for (int64_t m : {1, 2, 5}) {
      quantized.Quantize(x.data(), m, k);
      y_best.assign(static_cast<size_t>(m * n), 0.0f);
      y_avx2.assign(static_cast<size_t>(m * n), 0.0f);
      y_portable.assign(static_cast<size_t>(m * n), 0.0f);
      QuantMatmul(view.quant_type, view.data, n, k, quantized, y_best.data(), n, QuantPath::kBest);
      QuantMatmul(view.quant_type, view.data, n, k, quantized, y_avx2.data(), n, QuantPath::kAvx2);
      QuantMatmul(view.quant_type, view.data, n, k, quantized, y_portable.data(), n,
                  QuantPath::kPortable);
      for (size_t i = 0; i < y_best.size(); ++i) {
        Check(SameFloat(y_best[i], y_portable[i]),
              "QuantMatmul: the best and portable paths differ");
        Check(SameFloat(y_avx2[i], y_portable[i]),
              "QuantMatmul: the AVX2 and portable paths differ");
      }
    }
  }
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
  if (!config.ok()) return 0;
  absl::StatusOr<std::unique_ptr<GgufLlamaTensors>> tensors =
      GgufLlamaTensors::Load(*std::move(file), *config);
  if (tensors.ok()) fuzz::RunQuantizedViews(**tensors);
  return 0;
}
