// Random expressions of every scalar type (bool, int8..int64, uint8..uint64, float32, float64)
// and of vector types, for the device code generator's semantics fuzzer. Unlike
// tests/lang/RandomExpr.h (which keeps int32 arithmetic from overflowing, as the simplifier
// assumes), nothing here is bounded: the printed code must wrap, saturate and divide by zero
// exactly as ExprEvaluator does.
//
// Leaves are the named input variables (cast to the wanted type), constants (edge values
// included), and loads from input buffers at `(i + k) % n` (vectors: ramps of those, gathers).
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lang/IROperator.h"

namespace kiln::test {

struct DeviceInput {
    std::string name;   ///< the variable bound to this input's value at the point
    std::string buffer; ///< the buffer holding the input's values, one per point
    Type type;
};

class DeviceExprGenerator {
public:
    /// `point` is the int32 variable of the point index; buffers hold `points` values.
    DeviceExprGenerator(std::mt19937_64 &rng, std::vector<DeviceInput> inputs, std::string point,
                        int points)
        : rng(rng), inputs(std::move(inputs)), point(std::move(point)), points(points) {
        for (const DeviceInput &in : this->inputs)
            pool.push_back({in.name, in.type});
    }

    /// A random type for a fuzzed expression.
    Type random_type() {
        static const Type types[] = {Bool(),    Int(8),    Int(16),  Int(32),  Int(32),
                                     Int(64),   UInt(8),   UInt(16), UInt(32), UInt(64),
                                     Float(32), Float(32), Float(64)};
        return types[pick(int(std::size(types)))];
    }

    /// An expression of type t of at most `depth` levels, without transcendental functions, so
    /// that every result is exact.
    Expr exact(Type t, int depth) {
        lets_made = 0;
        return gen(t, depth);
    }

    /// A transcendental function (exp, log, sqrt, pow, sin, cos, tanh) of exact arguments.
    Expr transcendental(Type t, int depth) {
        static const char *names[] = {"exp", "log", "pow", "sin", "cos", "tanh"};
        std::string name = names[pick(6)];
        std::vector<Expr> args{gen(t, depth)};
        if (name == "pow") args.push_back(gen(t, depth));
        return Call::make(t, name, args, Call::Math);
    }

    int pick(int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); }

private:
    struct Binding {
        std::string name;
        Type type;
    };
    std::mt19937_64 &rng;
    std::vector<DeviceInput> inputs;
    std::string point;
    int points;
    std::vector<Binding> pool;
    int lets_made = 0;

    Expr constant(Type t) {
        Type s = t.element_of();
        Expr c;
        if (s.is_bool()) {
            c = make_const(s, int64_t(pick(2)));
        } else if (s.is_float()) {
            // No NaN constants: PoCL 3.1 miscompiles builtins (ceil, exp, tanh, ...) whose
            // argument LLVM can prove to be NaN. NaN still comes from the inputs at run time.
            static const double specials[] = {0.0,   -0.0,  0.5,  -1.5,    3.0,   1e20,
                                              -3e9,  2.5,   -2.5, 1e-40,   1e-30, 7.0,
                                              65536, 1e300, -0.1, INFINITY};
            int k = pick(20);
            c = k < 16
                    ? make_const(s, specials[k])
                    : make_const(s, double(std::uniform_int_distribution<int>(-20, 20)(rng)) / 4);
        } else {
            int k = pick(10);
            if (k < 6) {
                c = make_const(s, int64_t(pick(33) - 16));
            } else if (k < 7) {
                c = s.is_int() ? make_const(s, s.min_int()) : make_zero(s);
            } else if (k < 8) {
                c = s.is_int() ? make_const(s, s.max_int()) : UIntImm::make(s, s.max_uint());
            } else {
                uint64_t bits = rng();
                c = s.is_int() ? IntImm::make(s, int64_t(bits)) : UIntImm::make(s, bits);
            }
        }
        return t.is_vector() ? Broadcast::make(c, t.lanes) : c;
    }

    // A load of an input at (point + k) % points, or a gather / dense ramp of them for vectors.
    Expr load(Type t) {
        const DeviceInput &in = inputs[pick(int(inputs.size()))];
        Expr base = Variable::make(Int(32), point) + (pick(points) - points / 2);
        Expr index = t.is_vector() ? Ramp::make(base, Expr(pick(5) - 2), t.lanes) : base;
        Expr n = t.is_vector() ? Broadcast::make(Expr(points), t.lanes) : Expr(points);
        Expr e = Load::make(in.type.with_lanes(t.lanes), in.buffer, Mod::make(index, n));
        return e.type() == t ? e : Cast::make(t, e);
    }

    Expr leaf(Type t) {
        int k = pick(10);
        if (k < 3) return constant(t);
        if (k < 4) return load(t);
        std::vector<const Binding *> usable;
        for (const Binding &b : pool) {
            if (b.type.lanes == 1 || b.type.lanes == t.lanes) usable.push_back(&b);
        }
        const Binding &b = *usable[pick(int(usable.size()))];
        Expr e = Variable::make(b.type, b.name);
        if (t.is_vector() && b.type.is_scalar()) {
            Type s = b.type;
            if (pick(2) == 0 || s.is_bool()) {
                e = Broadcast::make(e, t.lanes);
            } else {
                Expr stride = s.is_float() ? make_const(s, double(pick(5) - 2) * 0.5)
                                           : make_const(s, int64_t(pick(7) - 3));
                e = Ramp::make(e, stride, t.lanes);
            }
        }
        return e.type() == t ? e : Cast::make(t, e);
    }

    Expr gen(Type t, int depth) {
        if (depth <= 0 || pick(8) == 0) return leaf(t);
        if (t.element_of().is_bool()) return gen_bool(t, depth);
        int op = pick(t.is_float() ? 22 : 20);
        Expr a = gen(t, depth - 1);
        switch (op) {
        case 0:
        case 1:
            return Add::make(a, gen(t, depth - 1));
        case 2:
        case 3:
            return Sub::make(a, gen(t, depth - 1));
        case 4:
        case 5:
            return Mul::make(a, gen(t, depth - 1));
        case 6:
        case 7:
            return Div::make(a, divisor(t, depth));
        case 8:
        case 9:
            return Mod::make(a, divisor(t, depth));
        case 10:
            return Min::make(a, gen(t, depth - 1));
        case 11:
            return Max::make(a, gen(t, depth - 1));
        case 12:
        case 13: {
            Expr c = gen_bool(pick(2) ? t.with_code(Type::Bool).with_bits(1) : Bool(), depth - 1);
            return Select::make(c, a, gen(t, depth - 1));
        }
        case 14:
            return let(t, depth);
        case 15:
        case 16: {
            Type from = random_type().with_lanes(t.lanes);
            Expr v = gen(from, depth - 1);
            return from == t ? v : Cast::make(t, v);
        }
        case 17:
            return unary(t, a);
        default:
            break;
        }
        if (t.element_of().is_float() && op >= 20) {
            return Call::make(t, "fma", {a, gen(t, depth - 1), gen(t, depth - 1)}, Call::Math);
        }
        return Add::make(a, leaf(t));
    }

    Expr divisor(Type t, int depth) {
        if (pick(2) == 0) return gen(t, depth - 1);
        // Constants, powers of two and negatives among them, for the shift and mask forms.
        static const int64_t ks[] = {1, 2, 3, 4, 7, 8, 16, 64, -1, -2, -4, 0};
        Type s = t.element_of();
        Expr c = s.is_float() ? make_const(s, double(ks[pick(12)])) : make_const(s, ks[pick(12)]);
        return t.is_vector() ? Broadcast::make(c, t.lanes) : c;
    }

    Expr unary(Type t, const Expr &a) {
        Type s = t.element_of();
        if (s.is_float()) {
            static const char *names[] = {"floor", "ceil", "round", "abs", "sqrt"};
            return Call::make(t, names[pick(5)], {a}, Call::Math);
        }
        if (s.is_uint()) {
            // Integer abs has an unsigned result.
            Expr x = gen(t.with_code(Type::Int), 1);
            return Call::make(t, intrinsic::abs, {x}, Call::Intrinsic);
        }
        return Sub::make(make_zero(t), a);
    }

    Expr let(Type t, int depth) {
        std::string name =
            pick(4) == 0 ? pool[pick(int(pool.size()))].name : "t" + std::to_string(lets_made++);
        Type vt = pick(2) == 0 ? t : random_type().with_lanes(pick(2) ? t.lanes : 1);
        Expr value = gen(vt, depth - 1);
        std::vector<Binding> saved = pool;
        std::erase_if(pool, [&](const Binding &b) { return b.name == name; });
        pool.push_back({name, vt});
        Expr body = gen(t, depth - 1);
        pool = saved;
        return Let::make(name, value, body);
    }

    Expr gen_bool(Type t, int depth) {
        int lanes = t.lanes;
        int op = depth <= 0 ? 9 : pick(12);
        if (op < 6) {
            Type s = random_type().with_lanes(lanes);
            Expr a = gen(s, depth - 1), b = gen(s, depth - 1);
            switch (op) {
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
        if (op < 7) return And::make(gen_bool(t, depth - 1), gen_bool(t, depth - 1));
        if (op < 8) return Or::make(gen_bool(t, depth - 1), gen_bool(t, depth - 1));
        if (op < 9) return Not::make(gen_bool(t, depth - 1));
        if (op < 10) return leaf(t);
        if (op < 11) {
            Type s = random_type().with_lanes(lanes);
            return s.is_bool() ? gen(s, depth - 1) : Cast::make(t, gen(s, depth - 1));
        }
        Expr a = gen_bool(t, depth - 1), b = gen_bool(t, depth - 1);
        return pick(2) ? Min::make(a, b) : Max::make(a, b);
    }
};

} // namespace kiln::test
