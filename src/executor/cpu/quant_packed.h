// QuantMatmul's kernels, on weights repacked at load with 16 rows interleaved: the K types Q2_K,
// Q3_K, Q4_K, Q5_K and Q6_K (the superblock contract, quant_matmul.h) and the 32-value types Q4_0,
// Q4_1, Q5_0, Q5_1 and Q8_0 (the interleaved group contract). A
// 512-bit vector holds the same 4 values of 16 weight rows: one vpdpbusd multiplies them by 4
// activations broadcast, and the scales are applied to the 16 rows at once, lane by lane.
// Internal to quant_matmul.cc and its tests.
//
// Packed layout: the n rows are cut into groups of 16 (rows past n are zero blocks); a group is
// one tile per block of the row (k / 256 for the K types, k / 32 for the others), each the 16 rows'
// blocks rearranged (the same bytes: 16 x the type's block bytes). In a tile, "dword i of the 16
// rows" means 64 bytes: the 4 bytes at byte 4i of each row's block, row 0 first.
//   Q4_K (2,304 bytes): the 16 rows' d (fp16, 32 bytes), then their dmin, then dwords 0-2 of the
//     12 scale bytes, then dwords 0-31 of the 128 nibble bytes.
//   Q5_K (2,816 bytes): as Q4_K, with dwords 0-7 of the 32 fifth-bit bytes before the nibbles.
//   Q6_K (3,360 bytes): the 16 rows' d, then the 16 int8 scales of each sub-block of 16 values
//     for the 16 rows (scale j of every row, j = 0 .. 15), then the 128 low-nibble bytes' dwords
//     and the 64 high-bit bytes' in the order the kernel reads them: for h = 0, 1 and c = 0 .. 7,
//     low dwords 16h + c and 16h + 8 + c, then high dword 8h + c.
//   Q2_K (1,344 bytes): the 16 rows' d, then their dmin, then dwords 0-3 of the 16 scale bytes,
//     then the 64 bytes of 2-bit quants in the order the kernel reads them: for c = 0 .. 7,
//     dwords c and 8 + c.
//   Q3_K (1,760 bytes): the 16 rows' d, then dwords 0-2 of the 12 scale bytes, then for c = 0 ..
//     7: dword c of the 32 bytes of high bits, then dwords c and 8 + c of the 64 bytes of quants.
//   Q4_0 (288), Q4_1 (320), Q5_0 (352), Q5_1 (384 bytes): the 16 rows' d, then their m (Q4_1,
//     Q5_1), then their words of fifth bits (Q5_0, Q5_1), bit j of the file's word (value j's)
//     moved to bit 8 (j % 4) + j / 4 so that a shift and a mask give 4 values' bits in 4 bytes,
//     then dwords 0-3 of the 16 nibble bytes (low nibbles values 4c .. 4c + 3, high 16 more).
//   Q8_0 (544 bytes): the 16 rows' d, then dwords 0-7 of the 32 quants, each byte with its top
//     bit flipped (q + 128, unsigned: vpdpbusd's first operand).
#ifndef CONVOY_EXECUTOR_CPU_QUANT_PACKED_H_
#define CONVOY_EXECUTOR_CPU_QUANT_PACKED_H_

#include <cstddef>
#include <cstdint>

#include "executor/cpu/quant_matmul.h"
#include "model/gguf_file.h"

namespace convoy::quant {

// Weight rows interleaved in a packed tile: one per 32-bit lane of a 512-bit vector.
inline constexpr int64_t kPackedRows = 16;

// Whether `type` is held packed: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K
// (every type QuantMatmul runs).
bool IsPackedType(GgmlType type);
// Whether `type` is computed under the superblock contract: the K types.
bool IsSuperblockType(GgmlType type);

// Bytes of the packed form of n rows of k values: ceil(n / 16) groups of one tile per block.
// REQUIRES: IsPackedType(type); k a multiple of the type's block.
int64_t PackedBytes(GgmlType type, int64_t n, int64_t k);

// Packs n rows of k values, row j at raw + j * row_bytes (as the file stores them), into
// `packed` (PackedBytes(type, n, k) bytes). Parallel over the OpenMP threads.
void PackRows(GgmlType type, const std::byte* raw, int64_t n, int64_t k, std::byte* packed);

// Row j of a packed matrix (k values) as the file stored it: row_bytes bytes at `raw`.
void CopyPackedRow(GgmlType type, const std::byte* packed, int64_t k, int64_t j, std::byte* raw);

// y[r * ldy + j] for every row r of x and the rows j of groups [first_group, end_group) that are
// below n, as the type's contract says, from a packed matrix. `path` is resolved (not kBest) and
// the CPU has it. REQUIRES: x.k() == k; x has its superblock form for the superblock types.
void PackedMatmul(GgmlType type, const std::byte* packed, int64_t n, int64_t k,
                  const QuantizedRows& x, float* y, int64_t ldy, QuantPath path,
                  int64_t first_group, int64_t end_group);

}  // namespace convoy::quant

#endif  // CONVOY_EXECUTOR_CPU_QUANT_PACKED_H_
