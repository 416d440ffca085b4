// Random integer and bool expressions for fuzz tests (the simplifier's and the interval
// fuzzer's). Variables are int32 and named by the caller; a caller binds each to a value in
// [-var_limit, var_limit] (100 by default).
//
// The simplifier assumes that int32 and int64 arithmetic does not overflow (see Simplify.h), so
// the generator guarantees it: it tracks a bound on the magnitude of every int32/int64
// subexpression given the variable limit and never builds one above magnitude_limit (2^24 by
// default, far enough below 2^31 that the simplifier's rearrangements stay in range too). Narrow
// and unsigned types are unrestricted: every rewrite on them must be exact under wrapping.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lang/IROperator.h"

namespace kiln::test {

/// What the generator may assume and produce.
struct RandomExprOptions {
    int64_t var_limit = 100;  ///< |value| of each named variable is at most this
    int64_t const_limit = 16; ///< constants are drawn from [-const_limit, const_limit]
    double magnitude_limit = double(1 << 24); ///< bound on every int32/int64 subexpression
    bool lets = true;
    bool casts = true;
    bool selects = true;
    int lanes = 1; ///< vector lanes; above 1, leaves are broadcasts and ramps of the variables
};

/// Builds random expressions over a fixed set of int32 variables.
class RandomExprGenerator {
public:
    RandomExprGenerator(std::mt19937_64 &rng, const std::vector<std::string> &vars,
                        RandomExprOptions options = {})
        : rng(rng), options(options) {
        for (const std::string &v : vars)
            pool.push_back({v, Int(32), double(options.var_limit)});
    }

    /// An integer expression of type t (scalar t gets options.lanes lanes) of at most `depth`
    /// levels of operators.
    Expr int_expr(Type t, int depth) {
        if (t.is_scalar()) t = t.with_lanes(options.lanes);
        return gen(t, depth).e;
    }
    /// A bool expression (comparisons, &&, ||, !) with options.lanes lanes.
    Expr bool_expr(int depth) { return gen_bool(depth, options.lanes); }
    /// A type for a fuzzed expression: int32 most of the time, sometimes a narrow or unsigned one.
    Type random_type() {
        static const Type others[] = {Int(8), Int(16), UInt(8), UInt(16), UInt(32), Int(64)};
        if (pick(10) < 5) return Int(32);
        return others[pick(6)];
    }

private:
    struct Generated {
        Expr e;
        double magnitude; // an upper bound on |value|, meaningful for int32 and int64
    };
    struct Binding {
        std::string name;
        Type type;
        double magnitude;
    };

    std::mt19937_64 &rng;
    RandomExprOptions options;
    std::vector<Binding> pool;
    int lets_made = 0;

    int pick(int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); }
    int64_t pick_range(int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    }

    static bool tracked(Type t) { return t.is_int() && t.bits >= 32; }

    static double range_magnitude(Type t) {
        if (t.is_bool()) return 1;
        if (t.is_int()) return std::ldexp(1.0, t.bits - 1);
        return std::ldexp(1.0, t.bits) - 1;
    }

    // The magnitude of cast(to, v) when v of type `from` has magnitude m (untracked types may
    // take any value of their range).
    static double cast_magnitude(Type from, double m, Type to) {
        double lo, hi;
        if (tracked(from)) {
            lo = -m;
            hi = m;
        } else if (from.is_int()) {
            lo = -range_magnitude(from);
            hi = range_magnitude(from) - 1;
        } else {
            lo = 0;
            hi = range_magnitude(from);
        }
        double to_lo = to.is_int() ? -range_magnitude(to) : 0;
        double to_hi = to.is_int() ? range_magnitude(to) - 1 : range_magnitude(to);
        if (lo >= to_lo && hi <= to_hi) return std::max(-lo, hi);
        return range_magnitude(to);
    }

    bool too_big(Type t, double m) const { return tracked(t) && m > options.magnitude_limit; }

    Generated constant(Type t) {
        int64_t c = pick_range(-options.const_limit, options.const_limit);
        Expr e = make_const(t, c);
        double m = std::abs(double(c));
        if (t.is_uint()) m = double(*as_const_int(e));
        return {e, m};
    }

    Generated leaf(Type t) {
        std::vector<const Binding *> usable;
        for (const Binding &b : pool) {
            if (b.type.lanes == 1 || b.type.lanes == t.lanes) usable.push_back(&b);
        }
        if (usable.empty() || pick(3) == 0) return constant(t);
        const Binding &b = *usable[pick(int(usable.size()))];
        Expr e = Variable::make(b.type, b.name);
        double m = b.magnitude;
        if (t.is_vector() && b.type.is_scalar()) {
            if (pick(2) == 0) {
                e = Broadcast::make(e, t.lanes);
            } else {
                int64_t stride = pick_range(-3, 3);
                e = Ramp::make(e, make_const(b.type, stride), t.lanes);
                m += std::abs(double(stride)) * (t.lanes - 1);
            }
        }
        if (e.type() != t) {
            m = cast_magnitude(e.type(), m, t);
            e = Cast::make(t, e);
        }
        if (too_big(t, m)) return constant(t);
        return {e, m};
    }

    Generated gen(Type t, int depth) {
        if (depth <= 0 || pick(6) == 0) return leaf(t);
        int op = pick(20);
        if (op < 4) return binary<Add>(t, depth, [](double a, double b) { return a + b; });
        if (op < 6) return binary<Sub>(t, depth, [](double a, double b) { return a + b; });
        if (op < 8) return binary<Mul>(t, depth, [](double a, double b) { return a * b; });
        if (op < 10) return division(t, depth, true);
        if (op < 12) return division(t, depth, false);
        if (op < 14)
            return binary<Min>(t, depth, [](double a, double b) { return std::max(a, b); });
        if (op < 16)
            return binary<Max>(t, depth, [](double a, double b) { return std::max(a, b); });
        if (op < 18 && options.selects) {
            Expr c = gen_bool(depth - 1, pick(2) ? t.lanes : 1);
            Generated a = gen(t, depth - 1), b = gen(t, depth - 1);
            return {Select::make(c, a.e, b.e), std::max(a.magnitude, b.magnitude)};
        }
        if (op < 19 && options.lets) return let(t, depth);
        if (options.casts) {
            static const Type sources[] = {Int(8), Int(16), Int(32), UInt(8), UInt(16), UInt(32)};
            Type s = sources[pick(6)].with_lanes(t.lanes);
            Generated v = gen(s, depth - 1);
            double m = cast_magnitude(s, v.magnitude, t);
            if (s == t || too_big(t, m)) return v.e.type() == t ? v : leaf(t);
            return {Cast::make(t, v.e), m};
        }
        return leaf(t);
    }

    template <typename Op, typename Magnitude>
    Generated binary(Type t, int depth, Magnitude magnitude) {
        Generated a = gen(t, depth - 1), b = gen(t, depth - 1);
        double m = magnitude(a.magnitude, b.magnitude);
        if (too_big(t, m)) {
            // Keep the shape with a small constant operand, or give up on the operator.
            b = constant(t);
            m = magnitude(a.magnitude, b.magnitude);
            if (too_big(t, m)) return a;
        }
        return {Op::make(a.e, b.e), m};
    }

    Generated division(Type t, int depth, bool is_div) {
        Generated a = gen(t, depth - 1);
        // Constant divisors, mostly positive, exercise the simplifier's rules.
        Generated b =
            pick(2) == 0 ? Generated{make_const(t, pick_range(-2, 9)), 9} : gen(t, depth - 1);
        if (is_div) return {Div::make(a.e, b.e), a.magnitude};
        return {Mod::make(a.e, b.e), b.magnitude};
    }

    Generated let(Type t, int depth) {
        std::string name =
            pick(3) == 0 ? pool[pick(int(pool.size()))].name : "t" + std::to_string(lets_made++);
        Type vt = pick(2) == 0 ? t : Type(Int(32));
        Generated value = gen(vt, depth - 1);
        // The new binding hides any other of the same name in the body.
        std::vector<Binding> saved = pool;
        std::erase_if(pool, [&](const Binding &b) { return b.name == name; });
        pool.push_back({name, vt, value.magnitude});
        Generated body = gen(t, depth - 1);
        pool = saved;
        return {Let::make(name, value.e, body.e), body.magnitude};
    }

    Expr gen_bool(int depth, int lanes) {
        int op = depth <= 0 ? 0 : pick(10);
        if (op < 6) {
            Type t = (pick(3) == 0 ? random_type() : Int(32)).with_lanes(lanes);
            Expr a = gen(t, depth - 1).e, b = gen(t, depth - 1).e;
            switch (pick(6)) {
            case 0:
                return LT::make(a, b);
            case 1:
                return LE::make(a, b);
            case 2:
                return GT::make(a, b);
            case 3:
                return GE::make(a, b);
            case 4:
                return EQ::make(a, b);
            default:
                return NE::make(a, b);
            }
        }
        if (op < 8) return And::make(gen_bool(depth - 1, lanes), gen_bool(depth - 1, lanes));
        if (op < 9) return Or::make(gen_bool(depth - 1, lanes), gen_bool(depth - 1, lanes));
        return Not::make(gen_bool(depth - 1, lanes));
    }
};

/// A random int32 expression over the named int32 variables.
inline Expr random_int_expr(std::mt19937_64 &rng, int depth, const std::vector<std::string> &vars) {
    return RandomExprGenerator(rng, vars).int_expr(Int(32), depth);
}

/// A random integer expression of type t over the named int32 variables.
inline Expr random_int_expr(std::mt19937_64 &rng, Type t, int depth,
                            const std::vector<std::string> &vars) {
    return RandomExprGenerator(rng, vars).int_expr(t, depth);
}

/// A random bool expression over the named int32 variables.
inline Expr random_bool_expr(std::mt19937_64 &rng, int depth,
                             const std::vector<std::string> &vars) {
    return RandomExprGenerator(rng, vars).bool_expr(depth);
}

} // namespace kiln::test
