// Conversions between float and the 16-bit floating-point formats that model weights use.
#ifndef CONVOY_COMMON_HALF_H_
#define CONVOY_COMMON_HALF_H_

#include <cstdint>
#include <cstring>

namespace convoy {

inline float BF16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Round to nearest, ties to even; NaN stays NaN.
inline uint16_t FloatToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16 by bit manipulation (round to nearest, ties to even; NaN stays NaN). The compiler's
// _Float16 is used where it has one; this is the definition elsewhere (clang 14 on x86, which the
// thread-safety build uses) and the reference it is tested against.
inline float FP16ToFloatPortable(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t u;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    std::memcpy(&u, &magnitude, sizeof(u));
    u |= sign;
  } else if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else {
    u = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t FloatToFP16Portable(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (u < 0x38800000u) {
    // Below the smallest normal half: a multiple of 2^-24, rounded to nearest even.
    float magnitude;
    std::memcpy(&magnitude, &u, sizeof(magnitude));
    const float scaled = magnitude * 0x1p24f;  // exact: a power of two
    uint32_t units = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(units);
    if (rest > 0.5f || (rest == 0.5f && (units & 1u) != 0)) ++units;
    return static_cast<uint16_t>(sign | units);
  }
  u += 0xfffu + ((u >> 13) & 1u);  // round the 13 dropped bits to nearest even
  return static_cast<uint16_t>(sign | ((u - 0x38000000u) >> 13));
}

#if defined(__FLT16_MAX__)
inline float FP16ToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof(h));
  return static_cast<float>(h);
}

inline uint16_t FloatToFP16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}
#else
inline float FP16ToFloat(uint16_t bits) { return FP16ToFloatPortable(bits); }
inline uint16_t FloatToFP16(float f) { return FloatToFP16Portable(f); }
#endif

}  // namespace convoy

#endif  // CONVOY_COMMON_HALF_H_
