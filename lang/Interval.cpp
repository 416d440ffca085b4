#include "lang/Interval.h"

#include <cmath>
#include <optional>
#include <ostream>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

// Constant ends are folded in 128 bits, so that an end which leaves its type is noticed (and
// dropped) instead of being wrapped into a plausible but wrong bound.
using Wide = __int128;

std::optional<Wide> const_int(const Expr &e) {
    if (!e.defined()) return std::nullopt;
    if (const auto *b = e.as<Broadcast>()) return const_int(b->value);
    if (const auto *i = e.as<IntImm>()) return Wide(i->value);
    if (const auto *u = e.as<UIntImm>()) return Wide(u->value);
    return std::nullopt;
}

Wide type_min_wide(Type t) {
    return t.is_int() ? -(Wide(1) << (t.bits - 1)) : 0;
}

Wide type_max_wide(Type t) {
    if (t.is_bool()) return 1;
    if (t.is_int()) return (Wide(1) << (t.bits - 1)) - 1;
    return (Wide(1) << t.bits) - 1;
}

/// The constant v of type t, or undefined (an unknown end) when t cannot represent it.
Expr wide_const(Type t, Wide v) {
    t = t.element_of();
    if (v < type_min_wide(t) || v > type_max_wide(t)) return Expr();
    if (t.is_int()) return IntImm::make(t, int64_t(v));
    return UIntImm::make(t, uint64_t(v));
}

Wide div_wide(Wide a, Wide b) {
    if (b == 0) return 0;
    Wide q = a / b;
    if (a % b < 0) q += b > 0 ? -1 : 1;
    return q;
}

Wide mod_wide(Wide a, Wide b) {
    if (b == 0) return 0;
    Wide r = a % b;
    if (r < 0) r += b > 0 ? b : -b;
    return r;
}

// Int32 and int64 index arithmetic is assumed not to overflow (see Interval.h); the other integer
// types wrap, so their bounds are only trusted when no operation can leave the type.
bool no_overflow(Type t) {
    return t.is_float() || (t.is_int() && t.bits >= 32);
}

bool is_narrow_int(Type t) {
    return t.is_bool() || t.is_uint() || (t.is_int() && t.bits <= 16);
}

Interval type_range(Type t) {
    t = t.element_of();
    if (t.is_float()) return Interval::everything();
    return Interval(type_min(t), type_max(t));
}

// What is known about a value of type t that we cannot see into (a load, an image call): its
// type's range when that is narrow enough to be useful, else nothing.
Interval unknown_value(Type t) {
    t = t.element_of();
    if (is_narrow_int(t)) return type_range(t);
    return Interval::everything();
}

enum class Op { Add, Sub, Mul, Div, Mod, Min, Max };

/// a op b for interval ends: undefined when either is, folded (with an overflow check) when both
/// are integer constants.
Expr make_op(Op op, const Expr &a, const Expr &b) {
    if (!a.defined() || !b.defined()) return Expr();
    Type t = a.type();
    auto ca = const_int(a), cb = const_int(b);
    if (ca && cb && !t.is_float()) {
        Wide x = *ca, y = *cb;
        if (op == Op::Add) return wide_const(t, x + y);
        if (op == Op::Sub) return wide_const(t, x - y);
        if (op == Op::Mul) return wide_const(t, x * y);
        if (op == Op::Div) return wide_const(t, div_wide(x, y));
        if (op == Op::Mod) return wide_const(t, mod_wide(x, y));
        return wide_const(t, op == Op::Min ? std::min(x, y) : std::max(x, y));
    }
    if (op == Op::Add) return Add::make(a, b);
    if (op == Op::Sub) return Sub::make(a, b);
    if (op == Op::Mul) return Mul::make(a, b);
    if (op == Op::Div) return Div::make(a, b);
    if (op == Op::Mod) return Mod::make(a, b);
    if (equal(a, b)) return a;
    if (op == Op::Min) return t.is_bool() ? And::make(a, b) : Min::make(a, b);
    return t.is_bool() ? Or::make(a, b) : Max::make(a, b);
}

Expr neg(const Expr &e) {
    if (!e.defined()) return Expr();
    return make_op(Op::Sub, make_zero(e.type().element_of()), e);
}

// Combining lower ends (or upper ends): an undefined end is infinite in its own direction, so it
// absorbs in a union and gives way in an intersection.
Expr loosest_min(const Expr &a, const Expr &b) {
    return make_op(Op::Min, a, b);
}
Expr loosest_max(const Expr &a, const Expr &b) {
    return make_op(Op::Max, a, b);
}
Expr tightest_min(const Expr &a, const Expr &b) {
    if (!a.defined()) return b;
    if (!b.defined()) return a;
    return make_op(Op::Max, a, b);
}
Expr tightest_max(const Expr &a, const Expr &b) {
    if (!a.defined()) return b;
    if (!b.defined()) return a;
    return make_op(Op::Min, a, b);
}

/// Whether a <= b (a < b when strict) for every value of the free variables; false when unknown.
bool provably_le(const Expr &a, const Expr &b, bool strict = false) {
    if (!a.defined() || !b.defined() || a.type().is_bool()) return false;
    auto ca = const_int(a), cb = const_int(b);
    if (ca && cb) return strict ? *ca < *cb : *ca <= *cb;
    auto fa = as_const_float(a), fb = as_const_float(b);
    if (fa && fb) return strict ? *fa < *fb : *fa <= *fb;
    if (!strict && equal(a, b)) return true;
    return can_prove(strict ? LT::make(a, b) : LE::make(a, b));
}

bool is_nonnegative(const Interval &i) {
    if (i.min.defined() && (i.min.type().is_uint() || i.min.type().is_bool())) return true;
    return i.min.defined() && provably_le(make_zero(i.min.type()), i.min);
}
bool is_nonpositive(const Interval &i) {
    return i.max.defined() && provably_le(i.max, make_zero(i.max.type()));
}
bool is_positive(const Interval &i) {
    return i.min.defined() && provably_le(make_zero(i.min.type()), i.min, true);
}
bool is_negative(const Interval &i) {
    return i.max.defined() && provably_le(i.max, make_zero(i.max.type()), true);
}

Expr simplify_end(const Expr &e) {
    if (!e.defined() || is_const(e) || e.as<Variable>()) return e;
    return simplify(e);
}

Interval simplified(const Interval &i) {
    Expr lo = simplify_end(i.min);
    // A single point stays one object, so is_single_point() and later steps see it cheaply.
    Expr hi = i.max.same_as(i.min) ? lo : simplify_end(i.max);
    return Interval(lo, hi);
}

/// For a type that wraps, the result of an operation that can overflow is trusted only when its
/// ends are constants that the folding above kept inside the type; else it is the whole type.
Interval fit_to_type(const Interval &i, Type t) {
    if (no_overflow(t) || i.is_single_point()) return i;
    if (const_int(i.min) && const_int(i.max)) return i;
    return type_range(t);
}

Interval bool_range() {
    return Interval(const_false(), const_true());
}

Interval interval_mul(const Interval &x, const Interval &y) {
    if (x.is_single_point() && y.is_single_point()) {
        return Interval::single_point(make_op(Op::Mul, x.min, y.min));
    }
    Interval a = x, b = y;
    if (a.is_single_point()) std::swap(a, b);
    if (b.is_single_point()) {
        const Expr &k = b.min;
        if (is_const_zero(k)) return Interval::single_point(k);
        if (is_nonnegative(b)) {
            return Interval(make_op(Op::Mul, a.min, k), make_op(Op::Mul, a.max, k));
        }
        if (is_nonpositive(b)) {
            return Interval(make_op(Op::Mul, a.max, k), make_op(Op::Mul, a.min, k));
        }
        // Linear in a for a fixed k of unknown sign: the ends are the two products, either way.
        Expr p = make_op(Op::Mul, a.min, k), q = make_op(Op::Mul, a.max, k);
        return Interval(loosest_min(p, q), loosest_max(p, q));
    }
    bool a_pos = is_nonnegative(a), a_neg = is_nonpositive(a);
    bool b_pos = is_nonnegative(b), b_neg = is_nonpositive(b);
    auto mul = [](const Expr &p, const Expr &q) { return make_op(Op::Mul, p, q); };
    if (a_pos && b_pos) return Interval(mul(a.min, b.min), mul(a.max, b.max));
    if (a_pos && b_neg) return Interval(mul(a.max, b.min), mul(a.min, b.max));
    if (a_neg && b_pos) return Interval(mul(a.min, b.max), mul(a.max, b.min));
    if (a_neg && b_neg) return Interval(mul(a.max, b.max), mul(a.min, b.min));
    if (b_pos || b_neg) std::swap(a, b), std::swap(a_pos, b_pos), std::swap(a_neg, b_neg);
    // With a of known sign the product is monotonic in b, so only two corners matter per end.
    if (a_pos) {
        return Interval(loosest_min(mul(a.min, b.min), mul(a.max, b.min)),
                        loosest_max(mul(a.min, b.max), mul(a.max, b.max)));
    }
    if (a_neg) {
        return Interval(loosest_min(mul(a.min, b.max), mul(a.max, b.max)),
                        loosest_max(mul(a.min, b.min), mul(a.max, b.min)));
    }
    // A bilinear function on a box takes its extremes at the corners.
    Expr c[4] = {mul(a.min, b.min), mul(a.min, b.max), mul(a.max, b.min), mul(a.max, b.max)};
    return Interval(loosest_min(loosest_min(c[0], c[1]), loosest_min(c[2], c[3])),
                    loosest_max(loosest_max(c[0], c[1]), loosest_max(c[2], c[3])));
}

// Euclidean a / b is non-decreasing in a for b >= 0 (including the b == 0 case, which yields 0)
// and non-increasing for b <= 0; for a fixed sign of b it is also monotonic in b, so corners
// bound it.
Interval interval_div(const Interval &a, const Interval &b, Type t) {
    auto div = [](const Expr &p, const Expr &q) { return make_op(Op::Div, p, q); };
    if (a.is_single_point() && b.is_single_point()) {
        return Interval::single_point(div(a.min, b.min));
    }
    if (t.is_float()) {
        // Kept simple: only constant divisors of known sign.
        auto lo = as_const_float(b.min), hi = as_const_float(b.max);
        if (!lo || !hi) return Interval::everything();
        if (*lo > 0 && b.is_single_point()) return Interval(div(a.min, b.min), div(a.max, b.min));
        if (*hi < 0 && b.is_single_point()) return Interval(div(a.max, b.min), div(a.min, b.min));
        if (!a.is_bounded() || !(*lo > 0 || *hi < 0)) return Interval::everything();
    }
    if (b.is_single_point()) {
        const Expr &k = b.min;
        if (is_const_zero(k)) return Interval::single_point(k);
        if (is_nonnegative(b)) return Interval(div(a.min, k), div(a.max, k));
        if (is_nonpositive(b)) return Interval(div(a.max, k), div(a.min, k));
        Expr p = div(a.min, k), q = div(a.max, k);
        if (a.is_bounded()) return Interval(loosest_min(p, q), loosest_max(p, q));
    }
    if (is_positive(b)) {
        return Interval(loosest_min(div(a.min, b.min), div(a.min, b.max)),
                        loosest_max(div(a.max, b.min), div(a.max, b.max)));
    }
    if (is_negative(b)) {
        return Interval(loosest_min(div(a.max, b.min), div(a.max, b.max)),
                        loosest_max(div(a.min, b.min), div(a.min, b.max)));
    }
    if (t.is_float()) return Interval::everything();
    // The divisor may be zero or change sign. Then the quotient lies between 0 and a (b >= 0) or
    // between 0 and -a (b <= 0).
    Expr zero = make_zero(t.element_of());
    if (is_nonnegative(b)) return Interval(loosest_min(a.min, zero), loosest_max(a.max, zero));
    if (is_nonpositive(b)) {
        return Interval(loosest_min(neg(a.max), zero), loosest_max(neg(a.min), zero));
    }
    return Interval(loosest_min(loosest_min(a.min, neg(a.max)), zero),
                    loosest_max(loosest_max(a.max, neg(a.min)), zero));
}

/// Whether a.min / m == a.max / m, i.e. the interval does not cross a multiple of m.
bool in_one_period(const Interval &a, const Expr &m) {
    auto lo = const_int(a.min), hi = const_int(a.max), k = const_int(m);
    if (lo && hi && k) return div_wide(*lo, *k) == div_wide(*hi, *k);
    return can_prove(EQ::make(Div::make(a.min, m), Div::make(a.max, m)));
}

// Euclidean a % b lies in [0, |b|) for b != 0 and is 0 for b == 0.
Interval interval_mod(const Interval &a, const Interval &b, Type t) {
    if (a.is_single_point() && b.is_single_point()) {
        return Interval::single_point(make_op(Op::Mod, a.min, b.min));
    }
    if (t.is_float()) return Interval::everything();
    Expr zero = make_zero(t.element_of()), one = make_one(t.element_of());
    Expr limit; // the largest |b|
    if (b.is_single_point()) {
        if (auto c = const_int(b.min)) {
            if (*c == 0) return Interval::single_point(zero);
            Expr m = wide_const(t, *c < 0 ? -*c : *c);
            if (m.defined() && a.is_bounded() && in_one_period(a, m)) {
                // Within one period the modulo is a shift, so it keeps the ends in order.
                return Interval(make_op(Op::Mod, a.min, m), make_op(Op::Mod, a.max, m));
            }
            limit = m;
        }
    }
    if (!limit.defined() && b.is_bounded()) {
        limit = (t.is_uint() || is_nonnegative(b)) ? b.max : loosest_max(b.max, neg(b.min));
    }
    Expr hi = make_op(Op::Sub, loosest_max(limit, one), one);
    if (is_nonnegative(a)) hi = tightest_max(hi, a.max);
    return Interval(zero, hi);
}

/// Whether the integer e is at least the least value of t (or, when upper, at most its greatest).
bool provably_within(const Expr &e, Type t, bool upper) {
    if (!e.defined()) return false;
    auto inside = [&](Type from) {
        return upper ? type_max_wide(from) <= type_max_wide(t)
                     : type_min_wide(from) >= type_min_wide(t);
    };
    if (inside(e.type().element_of())) return true;
    if (const auto *c = e.as<Cast>(); c && !c->value.type().is_float()) {
        if (inside(c->value.type().element_of())) return true;
    }
    // The limit is representable in e's type, which reaches past it.
    Expr limit = wide_const(e.type(), upper ? type_max_wide(t) : type_min_wide(t));
    return upper ? provably_le(e, limit) : provably_le(limit, e);
}

Interval interval_cast(Type to, const Interval &i, Type from) {
    to = to.element_of();
    from = from.element_of();
    auto cast_ends = [&](const Interval &j) {
        Expr lo = j.min.defined() ? cast(to, j.min) : Expr();
        Expr hi = j.max.same_as(j.min) ? lo : (j.max.defined() ? cast(to, j.max) : Expr());
        return Interval(lo, hi);
    };
    if (to == from) return i;
    if (i.is_single_point()) return cast_ends(i);
    // Casts to float round monotonically, whatever the source.
    if (to.is_float()) return cast_ends(i);
    if (to.is_bool()) {
        auto lo = const_int(i.min), hi = const_int(i.max);
        if (lo && hi && (*lo > 0 || *hi < 0)) return Interval::single_point(const_true());
        return bool_range();
    }
    if (from.is_float()) {
        // Truncation is monotonic, but values out of the target's range are unspecified.
        auto lo = as_const_float(i.min), hi = as_const_float(i.max);
        if (lo && hi && std::abs(*lo) < 1e30 && std::abs(*hi) < 1e30) {
            Expr l = wide_const(to, Wide(std::trunc(*lo))),
                 h = wide_const(to, Wide(std::trunc(*hi)));
            if (l.defined() && h.defined()) return Interval(l, h);
        }
        return unknown_value(to);
    }
    // Integer to integer: exact when the target holds every value between the ends.
    if (provably_within(i.min, to, false) && provably_within(i.max, to, true)) return cast_ends(i);
    return unknown_value(to);
}

using Kind = IRNodeType;

Kind negated(Kind k) {
    if (k == Kind::LT) return Kind::GE;
    if (k == Kind::LE) return Kind::GT;
    if (k == Kind::GT) return Kind::LE;
    if (k == Kind::GE) return Kind::LT;
    return k == Kind::EQ ? Kind::NE : Kind::EQ;
}

/// The comparison k' such that b k' a reads as a k b.
Kind flipped(Kind k) {
    if (k == Kind::LT) return Kind::GT;
    if (k == Kind::LE) return Kind::GE;
    if (k == Kind::GT) return Kind::LT;
    return k == Kind::GE ? Kind::LE : k;
}

// Comparisons: decided when the intervals do not overlap (or are one equal point), else unknown.
Interval compare_intervals(Kind kind, Interval a, Interval b) {
    auto decided = [](bool v) { return Interval::single_point(v ? const_true() : const_false()); };
    auto lt = [](const Interval &x, const Interval &y) { return provably_le(x.max, y.min, true); };
    auto le = [](const Interval &x, const Interval &y) { return provably_le(x.max, y.min); };
    if (kind == Kind::GT || kind == Kind::GE) {
        std::swap(a, b);
        kind = flipped(kind);
    }
    bool strict = kind == Kind::LT;
    if (kind == Kind::LT || kind == Kind::LE) {
        if (strict ? lt(a, b) : le(a, b)) return decided(true);
        if (strict ? le(b, a) : lt(b, a)) return decided(false);
        return bool_range();
    }
    bool eq = kind == Kind::EQ;
    if (lt(a, b) || lt(b, a)) return decided(!eq);
    if (le(a, b) && le(b, a)) return decided(eq);
    return bool_range();
}

/// An undefined end of a bool interval is false (lower) or true (upper).
Interval bool_ends(const Interval &i) {
    return Interval(i.min.defined() ? i.min : const_false(),
                    i.max.defined() ? i.max : const_true());
}

// Pure functions of one argument of the result's type: monotonic ones map the ends, sin and cos
// give their range.
Interval unary_call(const Call *op, const Interval &a) {
    Type t = op->type.element_of();
    const std::string &name = op->name;
    auto apply = [&](const Expr &e) {
        return e.defined() ? Call::make(t, name, {e}, op->call_type) : Expr();
    };
    if (a.is_single_point()) return Interval::single_point(apply(a.min));
    if (name == intrinsic::abs) {
        if (is_nonnegative(a)) return a;
        if (is_nonpositive(a)) return Interval(neg(a.max), neg(a.min));
        return Interval(make_zero(t), loosest_max(neg(a.min), a.max));
    }
    if (!t.is_float()) return unknown_value(t);
    Expr one = make_one(t), minus_one = make_const(t, -1.0);
    if (name == "sin" || name == "cos") return Interval(minus_one, one);
    bool monotonic = name == "floor" || name == "ceil" || name == "round" || name == "exp" ||
                     name == "tanh" || (name == "sqrt" && is_nonnegative(a));
    if (!monotonic) return Interval::everything();
    Interval r(apply(a.min), apply(a.max));
    if (name == "exp" && !r.min.defined()) r.min = make_zero(t);
    if (name == "tanh") {
        return Interval(r.min.defined() ? r.min : minus_one, r.max.defined() ? r.max : one);
    }
    return r;
}

class Bounds : public IRVisitor {
public:
    explicit Bounds(const Scope &s) : scope(s) {}

    Interval bounds(const Expr &e) {
        include(e);
        return result;
    }

private:
    Scope scope;
    Interval result;

    using IRVisitor::visit;

    void visit(const IntImm *op) override { result = Interval::single_point(Expr(op)); }
    void visit(const UIntImm *op) override { result = Interval::single_point(Expr(op)); }
    void visit(const FloatImm *op) override { result = Interval::single_point(Expr(op)); }

    void visit(const Variable *op) override {
        auto it = scope.find(op->name);
        if (it != scope.end()) {
            result = it->second;
        } else if (op->type.is_scalar()) {
            result = Interval::single_point(Expr(op));
        } else {
            // Bounds are scalars that hold for every lane; a free vector is opaque.
            result = unknown_value(op->type);
        }
    }

    void visit(const Cast *op) override {
        result = simplified(interval_cast(op->type, bounds(op->value), op->value.type()));
    }

    // Binary arithmetic: exact on single points, else the interval rule.
    template <typename Rule>
    void arith(const Expr &a_expr, const Expr &b_expr, Type t, bool can_wrap, Rule rule) {
        Interval a = bounds(a_expr), b = bounds(b_expr);
        Interval r = rule(a, b);
        t = t.element_of();
        if (can_wrap) r = fit_to_type(r, t);
        if (!no_overflow(t)) {
            // Every value of a wrapping type lies in its range, which bounds an unknown side.
            if (!r.min.defined()) r.min = type_min(t);
            if (!r.max.defined()) r.max = type_max(t);
        }
        result = simplified(r);
    }

    void visit(const Add *op) override {
        arith(op->a, op->b, op->type, true, [](const Interval &a, const Interval &b) {
            if (a.is_single_point() && b.is_single_point()) {
                return Interval::single_point(make_op(Op::Add, a.min, b.min));
            }
            return Interval(make_op(Op::Add, a.min, b.min), make_op(Op::Add, a.max, b.max));
        });
    }

    void visit(const Sub *op) override {
        arith(op->a, op->b, op->type, true, [](const Interval &a, const Interval &b) {
            if (a.is_single_point() && b.is_single_point()) {
                return Interval::single_point(make_op(Op::Sub, a.min, b.min));
            }
            return Interval(make_op(Op::Sub, a.min, b.max), make_op(Op::Sub, a.max, b.min));
        });
    }

    void visit(const Mul *op) override { arith(op->a, op->b, op->type, true, interval_mul); }

    void visit(const Div *op) override {
        Type t = op->type;
        arith(op->a, op->b, t, true,
              [t](const Interval &a, const Interval &b) { return interval_div(a, b, t); });
    }

    void visit(const Mod *op) override {
        Type t = op->type;
        arith(op->a, op->b, t, false,
              [t](const Interval &a, const Interval &b) { return interval_mod(a, b, t); });
    }

    void visit(const Min *op) override {
        arith(op->a, op->b, op->type, false, [](const Interval &a, const Interval &b) {
            return Interval(loosest_min(a.min, b.min), tightest_max(a.max, b.max));
        });
    }

    void visit(const Max *op) override {
        arith(op->a, op->b, op->type, false, [](const Interval &a, const Interval &b) {
            return Interval(tightest_min(a.min, b.min), loosest_max(a.max, b.max));
        });
    }

    template <typename Node>
    void comparison(const Node *op) {
        Interval a = bounds(op->a), b = bounds(op->b);
        if (a.is_single_point() && b.is_single_point()) {
            result = simplified(Interval::single_point(Node::make(a.min, b.min)));
            return;
        }
        result = op->a.type().is_bool() ? bool_range() : compare_intervals(Node::node_kind, a, b);
    }

    void visit(const EQ *op) override { comparison(op); }
    void visit(const NE *op) override { comparison(op); }
    void visit(const LT *op) override { comparison(op); }
    void visit(const LE *op) override { comparison(op); }
    void visit(const GT *op) override { comparison(op); }
    void visit(const GE *op) override { comparison(op); }

    // And, Or and Not are monotonic in false < true.
    void visit(const And *op) override {
        Interval a = bool_ends(bounds(op->a)), b = bool_ends(bounds(op->b));
        result =
            simplified(Interval(make_op(Op::Min, a.min, b.min), make_op(Op::Min, a.max, b.max)));
    }

    void visit(const Or *op) override {
        Interval a = bool_ends(bounds(op->a)), b = bool_ends(bounds(op->b));
        result =
            simplified(Interval(make_op(Op::Max, a.min, b.min), make_op(Op::Max, a.max, b.max)));
    }

    void visit(const Not *op) override {
        Interval a = bool_ends(bounds(op->a));
        if (a.is_single_point()) {
            result = simplified(Interval::single_point(Not::make(a.min)));
            return;
        }
        result = simplified(Interval(Not::make(a.max), Not::make(a.min)));
    }

    /// The scope narrowed to the points where `cond` is `truth`, when cond compares variables of
    /// the scope (possibly under !, && or ||); else the scope as it is.
    Scope narrowed(const Expr &cond, bool truth) {
        Scope saved = scope;
        narrow(cond, truth);
        std::swap(saved, scope);
        return saved;
    }

    void narrow(const Expr &cond, bool truth) {
        if (const auto *n = cond.as<Not>()) return narrow(n->a, !truth);
        if (const auto *a = cond.as<And>(); a && truth) {
            narrow(a->a, true);
            return narrow(a->b, true);
        }
        if (const auto *o = cond.as<Or>(); o && !truth) {
            narrow(o->a, false);
            return narrow(o->b, false);
        }
        narrow_comparison<LT>(cond, truth);
        narrow_comparison<LE>(cond, truth);
        narrow_comparison<GT>(cond, truth);
        narrow_comparison<GE>(cond, truth);
        narrow_comparison<EQ>(cond, truth);
        narrow_comparison<NE>(cond, truth);
    }

    template <typename Node>
    void narrow_comparison(const Expr &cond, bool truth) {
        const Node *op = cond.as<Node>();
        if (!op || op->a.type().is_bool() || !op->a.type().is_scalar()) return;
        Kind kind = truth ? Node::node_kind : negated(Node::node_kind);
        narrow_variable(op->a, kind, op->b);
        kind = flipped(kind);
        narrow_variable(op->b, kind, op->a);
    }

    // Where `v kind other` holds, v lies below other's maximum or above its minimum.
    void narrow_variable(const Expr &v, Kind kind, const Expr &other) {
        const auto *var = v.as<Variable>();
        if (!var || !scope.count(var->name) || kind == Kind::NE) return;
        Interval o = bounds(other);
        Interval &i = scope[var->name];
        Expr one = make_one(v.type());
        bool strict = !v.type().is_float();
        if (kind == Kind::LT || kind == Kind::LE || kind == Kind::EQ) {
            Expr hi = kind == Kind::LT && strict ? make_op(Op::Sub, o.max, one) : o.max;
            i.max = simplify_end(tightest_max(i.max, hi));
        }
        if (kind == Kind::GT || kind == Kind::GE || kind == Kind::EQ) {
            Expr lo = kind == Kind::GT && strict ? make_op(Op::Add, o.min, one) : o.min;
            i.min = simplify_end(tightest_min(i.min, lo));
        }
    }

    void visit(const Select *op) override {
        Interval c = bool_ends(bounds(op->condition));
        // A branch matters only where the condition picks it, so each is bounded over that part
        // of the scope (if the part is empty, any bounds will do).
        Scope outer = scope;
        scope = narrowed(op->condition, true);
        Interval t = bounds(op->true_value);
        scope = outer;
        scope = narrowed(op->condition, false);
        Interval f = bounds(op->false_value);
        scope = std::move(outer);
        if (is_const_true(c.min)) {
            result = t;
            return;
        }
        if (is_const_false(c.max)) {
            result = f;
            return;
        }
        if (c.is_single_point()) {
            // A condition that does not depend on the scope picks between the ends exactly.
            auto pick = [&](const Expr &x, const Expr &y) {
                return x.defined() && y.defined() ? Select::make(c.min, x, y) : Expr();
            };
            result = simplified(Interval(pick(t.min, f.min), pick(t.max, f.max)));
            return;
        }
        result = Interval::make_union(t, f);
    }

    void visit(const Load *op) override { result = unknown_value(op->type); }

    void visit(const Ramp *op) override {
        // Lane i holds base + i * stride for i in [0, lanes - 1].
        Type t = op->base.type();
        Interval lanes(make_zero(t), make_const(t, int64_t(op->lanes - 1)));
        Interval base = bounds(op->base), stride = bounds(op->stride);
        Interval offsets = fit_to_type(interval_mul(stride, lanes), t);
        Interval r(make_op(Op::Add, base.min, offsets.min),
                   make_op(Op::Add, base.max, offsets.max));
        result = simplified(fit_to_type(r, t));
    }

    void visit(const Broadcast *op) override { result = bounds(op->value); }

    void visit(const Let *op) override {
        Interval value = bounds(op->value);
        Scope outer = scope;
        scope[op->name] = value;
        result = bounds(op->body);
        scope = std::move(outer);
    }

    void visit(const Call *op) override {
        Type t = op->type.element_of();
        if (op->call_type == Call::Func) {
            result = Interval::everything();
        } else if (op->call_type == Call::Image) {
            result = unknown_value(t);
        } else if (op->name == intrinsic::likely && op->args.size() == 1) {
            result = bounds(op->args[0]);
        } else if (op->name == intrinsic::fma && op->args.size() == 3) {
            // Rounding once rather than twice is still monotonic in each product and sum.
            Interval p = interval_mul(bounds(op->args[0]), bounds(op->args[1]));
            Interval c = bounds(op->args[2]);
            result = simplified(
                Interval(make_op(Op::Add, p.min, c.min), make_op(Op::Add, p.max, c.max)));
        } else if (op->args.size() == 1 && op->args[0].type().element_of() == t) {
            result = simplified(unary_call(op, bounds(op->args[0])));
        } else {
            result = unknown_value(t);
        }
    }
};

} // namespace

bool Interval::is_single_point() const {
    return min.defined() && max.defined() && (min.same_as(max) || equal(min, max));
}

Interval Interval::make_union(const Interval &a, const Interval &b) {
    return simplified(Interval(loosest_min(a.min, b.min), loosest_max(a.max, b.max)));
}

Interval Interval::make_intersection(const Interval &a, const Interval &b) {
    return simplified(Interval(tightest_min(a.min, b.min), tightest_max(a.max, b.max)));
}

std::ostream &operator<<(std::ostream &s, const Interval &i) {
    return s << "[" << (i.min.defined() ? to_string(i.min) : "-inf") << ", "
             << (i.max.defined() ? to_string(i.max) : "+inf") << "]";
}

Interval bounds_of_expr(const Expr &e, const Scope &scope) {
    internal_assert(e.defined(), "bounds_of_expr of an undefined expression");
    return Bounds(scope).bounds(e);
}

} // namespace kiln
