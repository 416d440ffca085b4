// Scalar and vector types of the IR: bool, signed and unsigned integers of 8 to 64 bits,
// float32/float64 and bfloat16, each with a number of vector lanes (1 for scalars).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "lang/BFloat16.h"

namespace kiln {

/// A scalar or vector type: a code, a bit width and a lane count.
///
/// bfloat16 (code BFloat, 16 bits) is a float type (is_float() holds) that kiln loads, stores and
/// converts; the expression operators compute arithmetic on it in float32 and round the result
/// back, so the IR holds no bfloat16 arithmetic. Conversions to bfloat16 round to nearest even
/// through float32 (a float64 or integer is first converted to float32).
struct Type {
    // The codes match kiln_type_code_t in runtime/kiln_runtime.h.
    enum Code : uint8_t { Int, UInt, Float, Bool, BFloat };
    Code code = Int;
    uint8_t bits = 32;
    uint16_t lanes = 1;

    constexpr Type() = default;
    constexpr Type(Code c, int b, int l = 1)
        : code(c), bits(static_cast<uint8_t>(b)), lanes(static_cast<uint16_t>(l)) {}

    bool is_int() const { return code == Int; }
    bool is_uint() const { return code == UInt; }
    /// float32, float64 or bfloat16.
    bool is_float() const { return code == Float || code == BFloat; }
    bool is_bfloat() const { return code == BFloat; }
    bool is_bool() const { return code == Bool; }
    /// Signed or unsigned integer (not bool).
    bool is_int_or_uint() const { return code == Int || code == UInt; }
    bool is_scalar() const { return lanes == 1; }
    bool is_vector() const { return lanes > 1; }

    Type element_of() const { return Type(code, bits, 1); }
    Type with_lanes(int l) const { return Type(code, bits, l); }
    Type with_bits(int b) const { return Type(code, b, lanes); }
    Type with_code(Code c) const { return Type(c, bits, lanes); }

    /// Size of one lane in bytes (bool takes one byte in memory).
    int bytes() const { return (bits + 7) / 8; }

    /// Largest and smallest representable values of an integer type.
    int64_t min_int() const;
    int64_t max_int() const;
    uint64_t max_uint() const;
    /// v rounded to this float type's precision (float32 and bfloat16 round to nearest even).
    double round_float(double v) const;
    /// Whether the integer value fits in this type.
    bool can_represent(int64_t v) const;

    bool operator==(const Type &o) const {
        return code == o.code && bits == o.bits && lanes == o.lanes;
    }
    bool operator!=(const Type &o) const { return !(*this == o); }

    /// Halide-style spelling: "int32", "uint8x16", "float32", "bool".
    std::string to_string() const;
    /// The C type name of the element ("int32_t", "float", "bool", "kiln::bfloat16_t").
    std::string c_name() const;
};

std::ostream &operator<<(std::ostream &s, const Type &t);

inline constexpr Type Int(int bits, int lanes = 1) {
    return Type(Type::Int, bits, lanes);
}
inline constexpr Type UInt(int bits, int lanes = 1) {
    return Type(Type::UInt, bits, lanes);
}
inline constexpr Type Float(int bits, int lanes = 1) {
    return Type(Type::Float, bits, lanes);
}
inline constexpr Type BFloat(int bits = 16, int lanes = 1) {
    return Type(Type::BFloat, bits, lanes);
}
inline constexpr Type Bool(int lanes = 1) {
    return Type(Type::Bool, 1, lanes);
}

/// The kiln Type of a C++ scalar type.
template <typename T>
Type type_of();
template <>
inline Type type_of<bool>() {
    return Bool();
}
template <>
inline Type type_of<int8_t>() {
    return Int(8);
}
template <>
inline Type type_of<int16_t>() {
    return Int(16);
}
template <>
inline Type type_of<int32_t>() {
    return Int(32);
}
template <>
inline Type type_of<int64_t>() {
    return Int(64);
}
template <>
inline Type type_of<uint8_t>() {
    return UInt(8);
}
template <>
inline Type type_of<uint16_t>() {
    return UInt(16);
}
template <>
inline Type type_of<uint32_t>() {
    return UInt(32);
}
template <>
inline Type type_of<uint64_t>() {
    return UInt(64);
}
template <>
inline Type type_of<float>() {
    return Float(32);
}
template <>
inline Type type_of<double>() {
    return Float(64);
}
template <>
inline Type type_of<bfloat16_t>() {
    return BFloat(16);
}

} // namespace kiln
