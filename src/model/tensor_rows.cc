#include "model/tensor_rows.h"

#include <cstring>

#include "common/half.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"

namespace convoy {

int64_t ViewRowLength(const TensorView& view) { return view.shape.empty() ? 1 : view.shape.back(); }

int64_t ViewRows(const TensorView& view) {
  const int64_t length = ViewRowLength(view);
  return length == 0 ? 0 : view.NumElements() / length;
}

int64_t ViewRowBytes(const TensorView& view) {
  const int64_t length = ViewRowLength(view);
  if (view.dtype != DType::kQuantized) return length * DTypeSize(view.dtype);
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(view.quant_type));
  return info == nullptr || info->block_elements == 0
             ? 0
             : length / info->block_elements * info->block_bytes;
}

void ViewRowsToFloat(const TensorView& view, int64_t first, int64_t count, float* dst) {
  const int64_t length = ViewRowLength(view);
  const std::byte* src = view.data + first * ViewRowBytes(view);
  const int64_t n = count * length;
  switch (view.dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16: {
      const bool bf16 = view.dtype == DType::kBF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        dst[i] = bf16 ? BF16ToFloat(bits) : FP16ToFloat(bits);
      }
      return;
    }
    case DType::kQuantized:
      DequantizeValues(view.quant_type, src, n, dst);
      return;
  }
}

}  // namespace convoy
