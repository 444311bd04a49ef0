// Naive twins of tensor/float16.h: the conversions computed from the definition of a binary format
// (precision p, exponent range) in double arithmetic: find the two neighbouring representable values,
// take the nearer, on a tie the one with an even last digit, then overflow to inf. No bit tricks.
// They are the oracle of tests/unit/float16_test.cc, not code to run in training.
#pragma once

#include <cstdint>

namespace sp::reference {

uint16_t bf16_from_f32(float x);
float f32_from_bf16(uint16_t h);
uint16_t f16_from_f32(float x);
float f32_from_f16(uint16_t h);

}  // namespace sp::reference
