// GGUF weight rows unpacked into the form QuantMatmul's kernels read: one byte per quant and the
// scales and offsets of quant_matmul.h's table, in fp32. Internal to quant_matmul.cc and its
// tests.
#ifndef CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_
#define CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_

#include <cstddef>
#include <cstdint>

#include "model/gguf_file.h"

namespace convoy::quant {

// One weight row of k values, unpacked. The buffers belong to the caller.
struct UnpackedRow {
  // k quants in value order (Q8_0: the int8 bits).
  uint8_t* q;
  // 8 per group of 32: lanes 0-3 the scale of the group's first 16 values, lanes 4-7 the second's
  // (the vector the kernels multiply by the activation's scale). k / 4 floats.
  float* scales;
  // The k / 16 offsets mn, then zeros up to OffsetStride(k). Unused for types without offsets.
  float* offsets;
};

// k / 16 rounded up to a multiple of 8: the offsets' and the activations' half-sums' length.
constexpr int64_t OffsetStride(int64_t k) { return (k / 16 + 7) / 8 * 8; }

using UnpackFn = void (*)(const std::byte* row, int64_t k, const UnpackedRow& out);

struct Format {
  int64_t block_elements;
  int64_t block_bytes;
  bool is_signed;    // q is int8 (Q8_0); unsigned 0..63 otherwise
  bool has_offsets;  // false for Q8_0
  UnpackFn unpack_portable;
  UnpackFn unpack_avx2;  // REQUIRES: the CPU has AVX2. Writes the same bytes as unpack_portable.
};

// nullptr for a type QuantMatmul does not run.
const Format* FindFormat(GgmlType type);

}  // namespace convoy::quant

#endif  // CONVOY_EXECUTOR_CPU_QUANT_UNPACK_H_
