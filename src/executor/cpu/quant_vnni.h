// QuantMatmul's group-contract kernels (Q2_K and Q3_K) for CPUs with AVX-512 VNNI (with AVX-512
// F, BW and VL): vpdpbusd does the u8 x s8 products of four pairs and their sum in one
// instruction, where the AVX2 kernels take two (maddubs, then madd). Internal to quant_matmul.cc
// and its tests.
//
// Same bits as the AVX2 kernels. The integer sums P of quant_matmul.h's contract are exact on both
// paths: maddubs saturates at 32767 and its pairs stay below (unsigned q <= 63: 2 * 63 * 127 =
// 16002), and vpdpbusd's four products sum without rounding in 32 bits. Every float operation is
// the contract's, in its order: a 512-bit vector holds the same group of two weight rows, each
// row's 8 lanes take their fused multiply-add group after group as in the AVX2 kernels, and the
// scales' products c = s * dx are the same fp32 multiplications.
#ifndef CONVOY_EXECUTOR_CPU_QUANT_VNNI_H_
#define CONVOY_EXECUTOR_CPU_QUANT_VNNI_H_

#include "executor/cpu/quant_unpack.h"
#include "model/gguf_file.h"

namespace convoy::quant {

// Whether the CPU (and the operating system, which must save the 512-bit state) has AVX-512 F, BW,
// VL and VNNI, and AVX2, FMA and F16C. Checked once.
bool Avx512VnniAvailable();

// The one-row kernel of `type` (quant_unpack.h's DirectFn) for every type under the group contract
// (Q2_K and Q3_K); nullptr for the others. REQUIRES: Avx512VnniAvailable() before calling
// what it returns.
DirectFn FindDirectVnni(GgmlType type);

// The tile kernel on unpacked rows. REQUIRES: Avx512VnniAvailable() before calling what it
// returns.
TileFn FindTileVnni();

}  // namespace convoy::quant

#endif  // CONVOY_EXECUTOR_CPU_QUANT_VNNI_H_
