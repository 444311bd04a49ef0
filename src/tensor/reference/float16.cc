// Naive twins of the 16-bit conversions (reference/float16.h), written from the format definition.
// A binary format with p significand bits (including the implicit one), exponents [emin, emax]:
// a finite nonzero value is ±m·2^(e−p+1) with integer m < 2^p and e ≥ emin; below 2^emin the spacing
// stays 2^(emin−p+1) (subnormals). Rounding picks the nearer multiple of the spacing, ties to even m.
#include "tensor/reference/float16.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace sp::reference {
namespace {

struct Format {
  int p;           // significand bits including the implicit bit
  int emin, emax;  // exponent range of normal numbers
  int fraction_bits() const { return p - 1; }
  int exponent_bits() const { return emax == 127 ? 8 : 5; }
};
constexpr Format kBF16{8, -126, 127};
constexpr Format kF16{11, -14, 15};

// x rounded to the format (nearest, ties to even), ±inf on overflow; ±inf stays. x not NaN.
double round_to(double x, Format f) {
  if (x == 0.0 || std::isinf(x)) return x;
  const double ax = std::fabs(x);
  int e = std::ilogb(ax);  // ax in [2^e, 2^(e+1))
  if (e < f.emin) e = f.emin;
  const double spacing = std::ldexp(1.0, e - f.p + 1);
  const double q = ax / spacing;  // exact: a power-of-two division of a double holding an fp32
  const double lo = std::floor(q);
  const double frac = q - lo;
  double m = lo;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(lo, 2.0) == 1.0)) m = lo + 1.0;
  const double r = m * spacing;
  const double max_finite = (2.0 - std::ldexp(1.0, 1 - f.p)) * std::ldexp(1.0, f.emax);
  const double out = r > max_finite ? std::numeric_limits<double>::infinity() : r;
  return std::signbit(x) ? -out : out;
}

// Bit pattern of a value of the format (x representable, or ±inf).
uint16_t encode(double x, Format f) {
  const uint32_t sign = std::signbit(x) ? 1u << 15 : 0u;
  const double ax = std::fabs(x);
  const int fb = f.fraction_bits();
  const uint32_t exp_all_ones = (1u << f.exponent_bits()) - 1u;
  if (std::isinf(ax)) return static_cast<uint16_t>(sign | (exp_all_ones << fb));
  if (ax < std::ldexp(1.0, f.emin)) {  // subnormal or zero: fraction = ax / 2^(emin − fb)
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(ax / std::ldexp(1.0, f.emin - fb)));
  }
  const int e = std::ilogb(ax);
  const double frac = ax / std::ldexp(1.0, e) - 1.0;  // in [0, 1)
  const uint32_t biased = static_cast<uint32_t>(e - f.emin + 1);
  return static_cast<uint16_t>(sign | (biased << fb) | static_cast<uint32_t>(frac * std::ldexp(1.0, fb)));
}

double decode(uint16_t h, Format f) {
  const int fb = f.fraction_bits();
  const uint32_t exp_all_ones = (1u << f.exponent_bits()) - 1u;
  const uint32_t e = (h >> fb) & exp_all_ones;
  const uint32_t m = h & ((1u << fb) - 1u);
  const double sign = (h >> 15) != 0 ? -1.0 : 1.0;
  if (e == exp_all_ones)
    return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), f.emin - fb);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -fb), static_cast<int>(e) + f.emin - 1);
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// NaN → quiet NaN of the same sign keeping the top fraction bits (IEEE 754 §6.2.3 recommends keeping
// the payload). Written out per format.
uint16_t narrow_nan(float x, Format f) {
  const uint32_t u = bits_of(x);
  const int fb = f.fraction_bits();
  const uint32_t exp_all_ones = (1u << f.exponent_bits()) - 1u;
  const uint32_t fraction = (u & 0x7FFFFFu) >> (23 - fb);
  return static_cast<uint16_t>(((u >> 31) << 15) | (exp_all_ones << fb) | (1u << (fb - 1)) | fraction);
}

float widen(uint16_t h, Format f) {
  const double v = decode(h, f);
  if (!std::isnan(v)) return static_cast<float>(v);  // exact: every 16-bit value is an fp32 value
  // NaN: sign, all-ones exponent, the fraction moved to the top of fp32's fraction; fp16 NaNs come back
  // quiet (IEEE convertFormat), bf16's bits are kept as they are (the bf16 widening is a bit shift).
  const int fb = f.fraction_bits();
  const uint32_t quiet = f.p == 11 ? 0x00400000u : 0u;
  const uint32_t u =
      (static_cast<uint32_t>(h >> 15) << 31) | 0x7F800000u | ((h & ((1u << fb) - 1u)) << (23 - fb)) | quiet;
  float out;
  std::memcpy(&out, &u, 4);
  return out;
}

uint16_t narrow(float x, Format f) {
  if (std::isnan(x)) return narrow_nan(x, f);
  return encode(round_to(static_cast<double>(x), f), f);
}

}  // namespace

uint16_t bf16_from_f32(float x) { return narrow(x, kBF16); }
float f32_from_bf16(uint16_t h) { return widen(h, kBF16); }
uint16_t f16_from_f32(float x) { return narrow(x, kF16); }
float f32_from_f16(uint16_t h) { return widen(h, kF16); }

}  // namespace sp::reference
