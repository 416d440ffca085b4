// Constant intervals of integer expressions, for the simplifier's rules that need to know that
// x lies in [0, 7] or that x % 8 < 8.
#include <algorithm>

#include "lang/SimplifyInternal.h"

namespace kiln::simplify_internal {

namespace {

// The interval of a value of type t computed as `math` in unbounded integers. A type that wraps
// only keeps the interval when it fits; a type assumed not to overflow keeps it intersected with
// the type's range.
ConstInterval fit(Type t, ConstInterval math) {
    ConstInterval r = type_range(t.element_of());
    if (assumes_no_overflow(t)) {
        if (math.min) r.min = std::max(*r.min, *math.min);
        if (math.max) r.max = std::min(*r.max, *math.max);
        if (*r.min > *r.max) return type_range(t.element_of());
        return r;
    }
    if (math.min && math.max && *math.min >= *r.min && *math.max <= *r.max) return math;
    return r;
}

std::optional<Int128> add_opt(std::optional<Int128> a, std::optional<Int128> b) {
    if (a && b) return *a + *b;
    return std::nullopt;
}

ConstInterval add(const ConstInterval &a, const ConstInterval &b) {
    return {add_opt(a.min, b.min), add_opt(a.max, b.max)};
}

ConstInterval negate(const ConstInterval &a) {
    ConstInterval r;
    if (a.max) r.min = -*a.max;
    if (a.min) r.max = -*a.min;
    return r;
}

ConstInterval mul(const ConstInterval &a, const ConstInterval &b) {
    // Endpoints of fitted intervals are below 2^64; bounding both by 2^63 keeps products exact.
    const Int128 limit = Int128(1) << 63;
    auto small = [&](const ConstInterval &i) {
        return i.min && i.max && abs128(*i.min) <= limit && abs128(*i.max) <= limit;
    };
    if ((a.min == 0 && a.max == 0) || (b.min == 0 && b.max == 0)) return ConstInterval::point(0);
    if (!small(a) || !small(b)) return {};
    Int128 p[] = {*a.min * *b.min, *a.min * *b.max, *a.max * *b.min, *a.max * *b.max};
    return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

ConstInterval hull(const ConstInterval &a, const ConstInterval &b) {
    ConstInterval r;
    if (a.min && b.min) r.min = std::min(*a.min, *b.min);
    if (a.max && b.max) r.max = std::max(*a.max, *b.max);
    return r;
}

// A cast keeps the interval of its value when the value fits the new type, and otherwise
// wraps into anything of the new type.
ConstInterval fit_cast(Type t, const ConstInterval &value) {
    ConstInterval r = type_range(t.element_of());
    if (value.min && value.max && *value.min >= *r.min && *value.max <= *r.max) return value;
    return r;
}

ConstInterval div_bounds(const ConstInterval &a, const ConstInterval &b) {
    if (b.min && b.max && *b.min == *b.max && *b.min != 0) {
        Int128 c = *b.min;
        // Euclidean division by c < 0 is -floor(a / |c|), decreasing in a.
        Int128 d = abs128(c);
        ConstInterval q;
        if (a.min) q.min = floor_div(*a.min, d);
        if (a.max) q.max = floor_div(*a.max, d);
        return c > 0 ? q : negate(q);
    }
    if (!a.min || !a.max) return {};
    if (*a.min >= 0 && b.min && *b.min >= 0) return {0, *a.max};
    // |a / b| <= |a| whenever b != 0, and a / 0 is 0.
    Int128 m = std::max(abs128(*a.min), abs128(*a.max));
    return {-m, m};
}

} // namespace

ConstInterval Simplifier::bounds_of(const Expr &e) {
    Type t = e.type().element_of();
    if (!t.is_int_or_uint() && !t.is_bool()) return {};
    if (auto v = const_value(e)) return ConstInterval::point(*v);
    switch (e->node_type) {
    case IRNodeType::Variable: {
        ConstInterval r = type_range(t);
        auto it = var_bounds.find(e.as<Variable>()->name);
        if (it == var_bounds.end()) return r;
        if (it->second.min) r.min = std::max(*r.min, *it->second.min);
        if (it->second.max) r.max = std::min(*r.max, *it->second.max);
        return *r.min <= *r.max ? r : type_range(t);
    }
    case IRNodeType::Broadcast:
        return bounds_of(e.as<Broadcast>()->value);
    case IRNodeType::Ramp: {
        const auto *op = e.as<Ramp>();
        ConstInterval lanes{0, op->lanes - 1};
        return fit(t, add(bounds_of(op->base), mul(bounds_of(op->stride), lanes)));
    }
    case IRNodeType::Add: {
        const auto *op = e.as<Add>();
        return fit(t, add(bounds_of(op->a), bounds_of(op->b)));
    }
    case IRNodeType::Sub: {
        const auto *op = e.as<Sub>();
        return fit(t, add(bounds_of(op->a), negate(bounds_of(op->b))));
    }
    case IRNodeType::Mul: {
        const auto *op = e.as<Mul>();
        return fit(t, mul(bounds_of(op->a), bounds_of(op->b)));
    }
    case IRNodeType::Div: {
        const auto *op = e.as<Div>();
        return fit(t, div_bounds(bounds_of(op->a), bounds_of(op->b)));
    }
    case IRNodeType::Mod: {
        const auto *op = e.as<Mod>();
        ConstInterval a = bounds_of(op->a), b = bounds_of(op->b);
        // Euclidean: the result lies in [0, |b|), and in [0, a] when a >= 0.
        ConstInterval r{0, type_range(t).max};
        if (b.min && b.max)
            r.max = std::max<Int128>(0, std::max(abs128(*b.min), abs128(*b.max)) - 1);
        if (a.min && *a.min >= 0 && a.max) r.max = std::min(*r.max, *a.max);
        return fit(t, r);
    }
    case IRNodeType::Min: {
        const auto *op = e.as<Min>();
        ConstInterval a = bounds_of(op->a), b = bounds_of(op->b);
        ConstInterval r;
        if (a.min && b.min) r.min = std::min(*a.min, *b.min);
        r.max = a.max && b.max ? std::min(*a.max, *b.max) : (a.max ? a.max : b.max);
        return fit(t, r);
    }
    case IRNodeType::Max: {
        const auto *op = e.as<Max>();
        ConstInterval a = bounds_of(op->a), b = bounds_of(op->b);
        ConstInterval r;
        r.min = a.min && b.min ? std::max(*a.min, *b.min) : (a.min ? a.min : b.min);
        if (a.max && b.max) r.max = std::max(*a.max, *b.max);
        return fit(t, r);
    }
    case IRNodeType::Select: {
        const auto *op = e.as<Select>();
        return hull(bounds_of(op->true_value), bounds_of(op->false_value));
    }
    case IRNodeType::Cast: {
        const auto *op = e.as<Cast>();
        Type s = op->value.type();
        if (s.is_float()) return type_range(t);
        return fit_cast(t, bounds_of(op->value));
    }
    case IRNodeType::Let: {
        const auto *op = e.as<Let>();
        std::optional<ConstInterval> b;
        if (op->value.type().is_int_or_uint()) b = bounds_of(op->value);
        ScopedName scope(*this, op->name, Expr(), b);
        return bounds_of(op->body);
    }
    case IRNodeType::Call: {
        const auto *op = e.as<Call>();
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::likely) {
            return bounds_of(op->args[0]);
        }
        return type_range(t);
    }
    default:
        return type_range(t);
    }
}

// The interval of a - b in unbounded integers, where a and b are integer expressions.
ConstInterval Simplifier::difference_bounds(const Expr &a, const Expr &b) {
    ConstInterval d = add(bounds_of(a), negate(bounds_of(b)));
    if (!assumes_no_overflow(a.type())) return d;
    LinearForm f = difference(a, b);
    if (f.terms.empty()) return ConstInterval::point(signed_coefficient(f.type, f.constant));
    ConstInterval l = bounds_of(rebuild(f));
    if (l.min && (!d.min || *l.min > *d.min)) d.min = l.min;
    if (l.max && (!d.max || *l.max < *d.max)) d.max = l.max;
    return d;
}

bool Simplifier::prove_le(const Expr &a, const Expr &b) {
    ConstInterval d = difference_bounds(a, b);
    return d.max && *d.max <= 0;
}

} // namespace kiln::simplify_internal
