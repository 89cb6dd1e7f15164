// A tensor view's rows, whatever they are stored in: F32, F16, BF16 or GGUF blocks (kQuantized).
// The one place that knows how each storage reads back as fp32.
#ifndef CONVOY_MODEL_TENSOR_ROWS_H_
#define CONVOY_MODEL_TENSOR_ROWS_H_

#include <cstdint>

#include "model/safetensors.h"

namespace convoy {

// Values per row: the last dimension (a 1-D view is one row).
int64_t ViewRowLength(const TensorView& view);
// Rows: the product of the other dimensions.
int64_t ViewRows(const TensorView& view);
// Bytes one row takes in the view's storage (whole blocks for kQuantized).
int64_t ViewRowBytes(const TensorView& view);

// Rows first .. first + count - 1 of `view` to `dst` (count * ViewRowLength values), as fp32:
// quantized blocks through ggml's reference dequantizer (gguf_dequantize.h).
// REQUIRES: the rows exist; a kQuantized view's type has a dequantizer (the GGUF loader makes
// only those).
void ViewRowsToFloat(const TensorView& view, int64_t first, int64_t count, float* dst);

}  // namespace convoy

#endif  // CONVOY_MODEL_TENSOR_ROWS_H_
