#include "lang/Type.h"

#include "lang/Error.h"

namespace kiln {

int64_t Type::min_int() const {
    internal_assert(is_int_or_uint() || is_bool(), "min_int of ", *this);
    if (!is_int()) return 0;
    return bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1));
}

int64_t Type::max_int() const {
    internal_assert(is_int_or_uint() || is_bool(), "max_int of ", *this);
    if (is_bool()) return 1;
    if (is_int()) return bits == 64 ? INT64_MAX : (int64_t(1) << (bits - 1)) - 1;
    return bits >= 63 ? INT64_MAX : (int64_t(1) << bits) - 1;
}

uint64_t Type::max_uint() const {
    internal_assert(is_uint(), "max_uint of ", *this);
    return bits == 64 ? UINT64_MAX : (uint64_t(1) << bits) - 1;
}

bool Type::can_represent(int64_t v) const {
    if (is_float()) return true;
    return v >= min_int() && v <= max_int();
}

double Type::round_float(double v) const {
    internal_assert(is_float(), "round_float of ", *this);
    if (is_bfloat()) return double(float_of_bfloat16_bits(bfloat16_bits_of(float(v))));
    return bits == 32 ? double(float(v)) : v;
}

std::string Type::to_string() const {
    std::string s;
    switch (code) {
    case Int:
        s = "int" + std::to_string(bits);
        break;
    case UInt:
        s = "uint" + std::to_string(bits);
        break;
    case Float:
        s = "float" + std::to_string(bits);
        break;
    case Bool:
        s = "bool";
        break;
    case BFloat:
        s = "bfloat" + std::to_string(bits);
        break;
    }
    if (lanes > 1) s += "x" + std::to_string(lanes);
    return s;
}

std::string Type::c_name() const {
    switch (code) {
    case Int:
        return "int" + std::to_string(bits) + "_t";
    case UInt:
        return "uint" + std::to_string(bits) + "_t";
    case Float:
        return bits == 32 ? "float" : "double";
    case Bool:
        return "bool";
    case BFloat:
        return "kiln::bfloat16_t";
    }
    return "?";
}

std::ostream &operator<<(std::ostream &s, const Type &t) {
    return s << t.to_string();
}

} // namespace kiln
