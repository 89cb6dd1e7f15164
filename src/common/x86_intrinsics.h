// <immintrin.h> for code that uses the AVX-512 intrinsics under target attributes: gcc 12's
// build their "undefined" vectors from themselves, which -Wuninitialized reports wherever they are
// inlined; the header is not ours to fix.
#ifndef CONVOY_COMMON_X86_INTRINSICS_H_
#define CONVOY_COMMON_X86_INTRINSICS_H_

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a gcc-only warning, unknown to clang
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#endif  // CONVOY_COMMON_X86_INTRINSICS_H_
