// fp16 / bf16 <-> fp32 by bit manipulation: exact, round to nearest even, independent of
// the floating-point environment except for the subnormal fp16 path (default rounding).
#include <cstdint>
#include <cstring>

#include "kernels/kernels.h"

namespace spillway::kernels {

namespace {
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return float_of(sign | bits_of(magnitude));
  }
  if (exponent == 31) return float_of(sign | 0x7F800000u | (mantissa << 13));  // Inf / NaN
  return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t u = bits_of(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: keep it a quiet NaN with the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x1FFu));
  }
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to Inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal fp16 (2^-14): a multiple of 2^-24. Scaling by 2^24 is exact;
    // adding and removing 2^23 rounds to the nearest integer, ties to even.
    const float scaled = float_of(magnitude) * 0x1p24f;
    const float rounded = (scaled + 0x1p23f) - 0x1p23f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits; a
  // mantissa carry correctly bumps the exponent.
  const uint32_t rebased = magnitude - (112u << 23);
  const uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float bf16_to_fp32(uint16_t h) { return float_of(uint32_t{h} << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace spillway::kernels
