// GGUF tensor data to fp32: the float types and ggml's block quantizations that Llama files use.
#ifndef CONVOY_MODEL_GGUF_DEQUANTIZE_H_
#define CONVOY_MODEL_GGUF_DEQUANTIZE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "model/gguf_file.h"

namespace convoy {

// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K.
bool CanDequantize(GgmlType type);
// Those types' names, for errors: "F32, F16, ..., Q5_K or Q6_K".
constexpr char kDequantizableTypeNames[] =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K";

// Converts `num_elements` consecutive values stored at `src` in `type` to fp32 at `dst`. Each
// value is computed with the same fp32 operations, in the same order, as ggml's reference
// dequantizer (and gguf-py's), with no fused multiply-add, so the results are bit-identical.
// REQUIRES: CanDequantize(type); num_elements is a multiple of the type's block; `src` holds
// num_elements / block_elements * block_bytes bytes (any alignment).
void DequantizeValues(GgmlType type, const std::byte* src, int64_t num_elements, float* dst);

// Row `row` of `tensor` (RowLength() values) to `dst`. UNIMPLEMENTED, naming the tensor and its
// type, when the type has no dequantizer; OUT_OF_RANGE for a row past the end.
absl::Status DequantizeRow(const GgufTensor& tensor, int64_t row, float* dst);

}  // namespace convoy

#endif  // CONVOY_MODEL_GGUF_DEQUANTIZE_H_
