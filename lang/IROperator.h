// Building expressions: C++ operators with Halide's type coercions, constants, and the math
// library. Coercion rules for a binary operator on a and b:
//  1. a C++ number combined with an Expr takes the Expr's type (an error if it does not fit);
//  2. if one side is float and the other is not, the other is cast to that float type;
//  3. two floats widen to the wider; two integers widen to the wider bit width, and become
//     signed if either is signed; bool is cast to the other operand's type in arithmetic;
//  4. a scalar combined with a vector is broadcast to the vector's lanes.
#pragma once

#include <optional>

#include "lang/IR.h"

namespace kiln {

/// A constant of the given type (broadcast for vector types).
Expr make_const(Type t, int64_t v);
Expr make_const(Type t, double v);
Expr make_zero(Type t);
Expr make_one(Type t);
Expr const_true(int lanes = 1);
Expr const_false(int lanes = 1);
/// The smallest and largest value of a type (infinities for floats).
Expr type_min(Type t);
Expr type_max(Type t);

/// The value of an integer constant (IntImm, UIntImm or a broadcast of one), if e is one.
std::optional<int64_t> as_const_int(const Expr &e);
/// The value of a float constant (or a broadcast of one), if e is one.
std::optional<double> as_const_float(const Expr &e);
bool is_const(const Expr &e);
bool is_const(const Expr &e, int64_t v);
bool is_const_zero(const Expr &e);
/// Whether e is a constant zero that is not a float's -0 (the value an empty sum starts at,
/// and what a matrix unit's tilezero stores).
bool is_positive_zero(const Expr &e);
bool is_const_one(const Expr &e);
bool is_const_true(const Expr &e);
bool is_const_false(const Expr &e);
/// Whether e is a positive integer constant.
bool is_positive_const(const Expr &e);

/// Converts both operands to a common type following the rules above.
void match_types(Expr &a, Expr &b);

Expr cast(Type t, Expr e);
template <typename T>
Expr cast(Expr e) {
    return cast(type_of<T>(), std::move(e));
}

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
/// Integer division is Euclidean (lang/IR.h): it rounds toward negative infinity for b > 0 and
/// toward positive infinity for b < 0, so that a % b is never negative; a / 0 is 0. Float division
/// is IEEE.
Expr operator/(Expr a, Expr b);
/// Integer modulo is Euclidean: the result lies in [0, |b|).
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);

Expr &operator+=(Expr &a, Expr b);
Expr &operator-=(Expr &a, Expr b);
Expr &operator*=(Expr &a, Expr b);
Expr &operator/=(Expr &a, Expr b);

// Mixed operands: the C++ number takes the Expr's type.
#define KILN_MIXED_OPERATOR(op)                                                                    \
    Expr operator op(Expr a, int b);                                                               \
    Expr operator op(int a, Expr b);                                                               \
    Expr operator op(Expr a, double b);                                                            \
    Expr operator op(double a, Expr b);                                                            \
    Expr operator op(Expr a, float b);                                                             \
    Expr operator op(float a, Expr b);
KILN_MIXED_OPERATOR(+)
KILN_MIXED_OPERATOR(-)
KILN_MIXED_OPERATOR(*)
KILN_MIXED_OPERATOR(/)
KILN_MIXED_OPERATOR(%)
KILN_MIXED_OPERATOR(==)
KILN_MIXED_OPERATOR(!=)
KILN_MIXED_OPERATOR(<)
KILN_MIXED_OPERATOR(<=)
KILN_MIXED_OPERATOR(>)
KILN_MIXED_OPERATOR(>=)
#undef KILN_MIXED_OPERATOR

Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
// As with the operators, a C++ number takes the Expr's type (rule 1); operand order is kept.
Expr min(Expr a, int b);
Expr max(Expr a, int b);
Expr min(int a, Expr b);
Expr max(int a, Expr b);
Expr min(Expr a, float b);
Expr max(Expr a, float b);
Expr min(float a, Expr b);
Expr max(float a, Expr b);
Expr min(Expr a, double b);
Expr max(Expr a, double b);
Expr min(double a, Expr b);
Expr max(double a, Expr b);
/// max(min(e, hi), lo); lo and hi are cast to e's type. A constant bound that does not fit in
/// e's integer type is an error rather than wrapping.
Expr clamp(Expr e, Expr lo, Expr hi);
/// Both values are computed; the condition picks one per lane.
Expr select(Expr condition, Expr true_value, Expr false_value);
/// select(c1, v1, c2, v2, ..., default): the first true condition wins.
template <typename... Rest>
Expr select(Expr c1, Expr v1, Expr c2, Expr v2, Rest &&...rest) {
    return select(std::move(c1), std::move(v1),
                  select(std::move(c2), std::move(v2), std::forward<Rest>(rest)...));
}

/// Absolute value; for signed integers abs(min) wraps to min.
Expr abs(Expr e);
// Float math: integer arguments are converted to float32 first.
Expr exp(Expr e);
Expr log(Expr e);
Expr sqrt(Expr e);
Expr pow(Expr base, Expr exponent);
Expr sin(Expr e);
Expr cos(Expr e);
Expr tanh(Expr e);
Expr floor(Expr e);
Expr ceil(Expr e);
/// Rounds half to even, as IEEE nearbyint does by default.
Expr round(Expr e);
/// a * b + c with a single rounding.
Expr fma(Expr a, Expr b, Expr c);
/// A hint to loop partitioning that the condition is usually true.
Expr likely(Expr e);

/// Euclidean division and modulo on plain integers, matching the IR semantics.
int64_t div_euclid(int64_t a, int64_t b);
int64_t mod_euclid(int64_t a, int64_t b);

} // namespace kiln
