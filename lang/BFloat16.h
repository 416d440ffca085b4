// bfloat16: the upper 16 bits of an IEEE float32 (1 sign, 8 exponent, 7 mantissa bits). kiln
// stores it and converts it; arithmetic on it is done in float32 and rounded back (see Type.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

/// Rounds a float32 to the nearest bfloat16 (ties to even) and returns its bits. NaN stays a NaN
/// (quiet, sign kept); infinities and overflow give infinities; denormals are kept, not flushed.
inline uint16_t bfloat16_bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

/// The float32 value of bfloat16 bits (exact).
inline float float_of_bfloat16_bits(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

/// One bfloat16 element, for Buffer<bfloat16_t> and Param<bfloat16_t>. Converting from float
/// rounds to nearest even; converting to float is exact.
struct bfloat16_t { // NOLINT(readability-identifier-naming): named like Halide's and <cstdint>'s
    uint16_t bits = 0;

    bfloat16_t() = default;
    explicit bfloat16_t(float f) : bits(bfloat16_bits_of(f)) {}
    static bfloat16_t from_bits(uint16_t b) {
        bfloat16_t r;
        r.bits = b;
        return r;
    }
    operator float() const {
        return float_of_bfloat16_bits(bits);
    } // NOLINT(google-explicit-constructor)
};
static_assert(sizeof(bfloat16_t) == 2, "bfloat16_t must be two bytes");

} // namespace kiln
