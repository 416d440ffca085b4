// Evaluates an expression to constants, lane by lane, following the Semantics block of IR.h
// exactly (wrapping integers, Euclidean division, saturating float-to-integer casts, float32
// rounding). It is the arithmetic core of the reference evaluator and the oracle of the simplifier
// and interval fuzzers, so it shares no code with either.
//
// Where IR.h leaves a choice, the evaluator (and the simplifier's constant folding) take these:
// float min(a, b) is a < b ? a : b and max(a, b) is a > b ? a : b, so a NaN first operand yields
// the second; float a % b is a - b * floor(a / b), each step rounded to the type; a masked-off
// lane of a predicated Load is 0.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lang/IR.h"

namespace kiln {

/// One scalar value. Integers are stored sign-extended (Int) or zero-extended (UInt, Bool) to 64
/// bits in `bits`; floats are stored as a double that, for float32, holds a float32 value exactly.
struct Value {
    Type type = Int(32); ///< always a scalar type
    uint64_t bits = 0;   ///< integer payload
    double f = 0;        ///< float payload

    static Value make_int(Type t, int64_t v);   ///< wraps v into t's range
    static Value make_uint(Type t, uint64_t v); ///< wraps v into t's range
    static Value make_float(Type t, double v);  ///< rounds to float32 when t is float32
    static Value make_bool(bool v);
    /// Any numeric value converted to the given scalar type with the IR's cast rules.
    Value cast_to(Type t) const;

    int64_t as_int() const { return int64_t(bits); }
    uint64_t as_uint() const { return bits; }
    double as_double() const; ///< the value as a double, for any type
    bool as_bool() const { return bits != 0; }

    /// Bitwise equality for floats (so -0.0 differs from 0.0), except that every NaN equals every
    /// other: neither IEEE 754 nor LLVM fixes the sign or payload of a NaN result. Value equality
    /// otherwise; values of different types differ.
    bool operator==(const Value &o) const;
    bool operator!=(const Value &o) const { return !(*this == o); }
    std::string to_string() const;
};

std::ostream &operator<<(std::ostream &s, const Value &v);

/// Evaluates expressions given values for their free variables.
class ExprEvaluator {
public:
    /// Called for Call nodes of kind Func or Image with the already evaluated (scalar) args;
    /// returns the value. Math calls and intrinsics are handled by the evaluator itself.
    std::function<Value(const Call *op, const std::vector<Value> &args)> on_call;
    /// Called for each lane of a Load with the evaluated index of that lane.
    std::function<Value(const Load *op, int64_t index)> on_load;

    /// Binds a free variable; a later bind of the same name replaces the value.
    void bind(const std::string &name, Value v) { vars[name] = v; }
    void unbind(const std::string &name) { vars.erase(name); }
    bool is_bound(const std::string &name) const { return vars.count(name) != 0; }

    /// The value of lane `lane` of e. Raises InternalError for an unbound variable or a call
    /// without a handler.
    Value eval(const Expr &e, int lane = 0);
    /// All lanes of e.
    std::vector<Value> eval_lanes(const Expr &e);

private:
    std::map<std::string, Value> vars;
};

} // namespace kiln
