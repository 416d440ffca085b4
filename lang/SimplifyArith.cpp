// The simplifier's rules for + - * / %, casts and ramps. Sums are rebuilt from linear forms, so
// that equal affine expressions come out structurally equal.
#include <cmath>

#include "lang/SimplifyInternal.h"

namespace kiln::simplify_internal {

namespace {

// A ramp from simplified parts. Each lane is base + i * stride, so a stride of zero makes every
// lane the same: that is a broadcast, which the broadcast rules know how to fold (a ramp of stride
// 0 would hide a vector zero from x * 0 and x + 0). For floats, i * +0.0 is +0.0 and
// -0.0 + +0.0 is +0.0, so every lane is base + 0.0, not base; i * -0.0 is -0.0, which adds
// nothing to any base.
Expr make_ramp(const Expr &base, const Expr &stride, int lanes) {
    if (!is_const_zero(stride)) return Ramp::make(base, stride, lanes);
    if (!stride.type().is_float() || std::signbit(*as_const_float(stride))) {
        return Broadcast::make(base, lanes);
    }
    Expr lane = fold_arith(IRNodeType::Add, base, stride).value_or(Add::make(base, stride));
    return Broadcast::make(lane, lanes);
}

} // namespace

// a + b or a - b on ramps and broadcasts: per lane, (base + i*s) + b = (base + b) + i*s.
std::optional<Expr> Simplifier::ramp_add_rule(const Expr &a, const Expr &b, bool subtract) {
    auto combine = [&](const Expr &x, const Expr &y) {
        return subtract ? mutate(Sub::make(x, y)) : mutate(Add::make(x, y));
    };
    const auto *ra = a.as<Ramp>(), *rb = b.as<Ramp>();
    const auto *ba = a.as<Broadcast>(), *bb = b.as<Broadcast>();
    if (ra && rb) {
        return make_ramp(combine(ra->base, rb->base), combine(ra->stride, rb->stride), ra->lanes);
    }
    if (ra && bb) return make_ramp(combine(ra->base, bb->value), ra->stride, ra->lanes);
    if (ba && rb) {
        Expr stride =
            subtract ? mutate(Sub::make(make_zero(rb->stride.type()), rb->stride)) : rb->stride;
        return make_ramp(combine(ba->value, rb->base), stride, rb->lanes);
    }
    return std::nullopt;
}

// A ramp of integers whose lanes all lie in one block [q * c, (q + 1) * c): its base is r modulo
// some m that divides c (from its linear form: m divides c and every coefficient), and
// r + stride * (lanes - 1) < m, so no lane crosses a multiple of m, let alone of c. Then
// (base + i * s) / c is base / c in every lane and (base + i * s) % c is base % c + i * s: a
// vectorized x / c and x % c (a blocked layout's index) stay a broadcast and a dense ramp
// instead of becoming gathers. m must be a power of two unless the type cannot overflow, so that
// the residue survives wrapping.
std::optional<Expr> Simplifier::ramp_in_one_block_rule(const Expr &a, const Expr &b, bool divide) {
    const auto *ramp = a.as<Ramp>();
    const auto *block = b.as<Broadcast>();
    if (!ramp || !block || !a.type().is_int()) return std::nullopt;
    auto s = const_value(ramp->stride), c = const_value(block->value);
    if (!s || !c || *s < 0 || *c <= 0) return std::nullopt;
    Type t = ramp->base.type();
    auto [modulus, remainder] = alignment(ramp->base);
    Int128 m = gcd128(*c, modulus);
    if (!assumes_no_overflow(t) && !is_positive_power_of_two(m)) return std::nullopt;
    Int128 r = floor_mod(remainder, m);
    if (r + *s * (ramp->lanes - 1) >= m) return std::nullopt;
    if (divide) return Broadcast::make(this->divide(ramp->base, *c), ramp->lanes);
    return make_ramp(modulo(ramp->base, *c), ramp->stride, ramp->lanes);
}

namespace {

// The alignment of a value that is one of two values (min, max, select): what both share.
// A min of a tile's start and the last tile's start (a shifted tail), both multiples of 16, is
// a multiple of 16.
std::pair<Int128, Int128> either_alignment(std::pair<Int128, Int128> a,
                                           std::pair<Int128, Int128> b) {
    Int128 d = a.second - b.second;
    Int128 m = gcd128(gcd128(a.first, b.first), d < 0 ? -d : d);
    return {m, m == 0 ? a.second : floor_mod(a.second, m)};
}

} // namespace

std::pair<Int128, Int128> Simplifier::alignment(const Expr &e) {
    Type t = e.type();
    LinearForm f = linear(e);
    Int128 modulus = 0, remainder = signed_coefficient(t, f.constant);
    for (const auto &[term, coefficient] : f.terms) {
        Int128 k = signed_coefficient(t, coefficient);
        Int128 m = 1, r = 0;
        if (const auto *v = term.as<Variable>()) {
            if (auto it = let_alignments.find(v->name); it != let_alignments.end()) {
                std::tie(m, r) = it->second;
            }
        } else if (const auto *mn = term.as<Min>()) {
            std::tie(m, r) = either_alignment(alignment(mn->a), alignment(mn->b));
        } else if (const auto *mx = term.as<Max>()) {
            std::tie(m, r) = either_alignment(alignment(mx->a), alignment(mx->b));
        } else if (const auto *sel = term.as<Select>()) {
            std::tie(m, r) =
                either_alignment(alignment(sel->true_value), alignment(sel->false_value));
        }
        // Any value is 0 modulo 1: give up what could overflow.
        const Int128 limit = Int128(1) << 62;
        if (m == 0 || m > limit) m = 1, r = 0;
        // The final modulus divides k * m and the running one, so the remainder counts only
        // modulo them.
        Int128 km = k < 0 ? -k * m : k * m;
        if (km == 0) continue;
        modulus = gcd128(modulus, km);
        remainder = floor_mod(remainder + floor_mod(k * r, km), modulus);
    }
    return {modulus, remainder};
}

// An integer vector sum of one ramp, broadcasts and a constant, k ramp(b, s) + sum of
// c_j x(v_j) + K, is lane by lane (k b + sum of c_j v_j + K) + i k s: one ramp whose base is that
// scalar sum. Exact under wrapping too. A dense index that arrived in pieces (a fused loop's
// coordinates recombined, plus broadcast offsets) so becomes the one ramp the code generator
// loads and stores as a dense vector. Only where every term folds: a sum with other terms keeps
// its form.
std::optional<Expr> Simplifier::ramp_of_linear_form(const LinearForm &f) {
    Type t = f.type;
    if (!t.is_vector() || !t.is_int_or_uint()) return std::nullopt;
    const Ramp *ramp = nullptr;
    uint64_t k = 0;
    LinearForm base(t.element_of());
    for (const auto &[term, coefficient] : f.terms) {
        if (const auto *r = term.as<Ramp>(); r && !ramp) {
            ramp = r;
            k = coefficient;
        } else if (const auto *b = term.as<Broadcast>()) {
            collect(b->value, coefficient, base);
        } else {
            return std::nullopt;
        }
    }
    if (!ramp || (f.terms.size() == 1 && f.constant == 0)) return std::nullopt;
    base.constant += f.constant;
    collect(ramp->base, k, base);
    Expr scale = make_const(t.element_of(), signed_coefficient(t, k));
    return make_ramp(mutate(rebuild(base)), mutate(Mul::make(ramp->stride, scale)), t.lanes);
}

namespace {

// x % c and x / c in one linear form, for a constant c > 0, the quotient's coefficient k c: k x,
// and what is left of the remainder's. Exact for every type (x / c * c + x % c is x, and the
// coefficients are a ring's). A loop fused from two (fuse(c, x, f): c = f % 4, x = f / 4) and
// vectorized indexes a buffer whose dimension c has extent 4 at c + 4 x: recombined, that is the
// dense ramp of f instead of a gather.
bool recombine_div_mod(LinearForm &f) {
    Type t = f.type;
    for (auto it = f.terms.begin(); it != f.terms.end(); ++it) {
        const auto *m = it->first.as<Mod>();
        if (!m) continue;
        auto c = const_value(m->b);
        if (!c || *c <= 0) continue;
        auto d = f.terms.find(Div::make(m->a, m->b));
        if (d == f.terms.end()) continue;
        // kD (x / c) + kM (x % c) = k (x / c * c + x % c) + (kM - k) (x % c) for kD = k c: k is
        // kM where kM c = kD in the type's arithmetic (the whole pair goes), else kD / c.
        uint64_t k = it->second;
        if (signed_coefficient(t, k * uint64_t(int64_t(*c))) != signed_coefficient(t, d->second)) {
            const Int128 kd = signed_coefficient(t, d->second);
            if (kd % *c != 0) continue;
            k = uint64_t(int64_t(kd / *c));
        }
        Expr x = m->a;
        it->second -= k;
        if (signed_coefficient(t, it->second) == 0) f.terms.erase(it);
        f.terms.erase(d);
        collect(x, k, f);
        return true;
    }
    return false;
}

} // namespace

Expr Simplifier::visit(const Add *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (auto r = fold_arith(IRNodeType::Add, a, b)) return *r;
    if (auto r = broadcast_rule<Add>(a, b)) return *r;
    if (auto r = ramp_add_rule(a, b, false)) return *r;
    if (op->type.is_float()) return unchanged_or(op, a, b);
    LinearForm f(op->type);
    collect(a, 1, f);
    collect(b, 1, f);
    if (recombine_div_mod(f)) return mutate(rebuild(f));
    if (auto r = ramp_of_linear_form(f)) return *r;
    return rebuild(f);
}

Expr Simplifier::visit(const Sub *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (auto r = fold_arith(IRNodeType::Sub, a, b)) return *r;
    if (auto r = broadcast_rule<Sub>(a, b)) return *r;
    if (auto r = ramp_add_rule(a, b, true)) return *r;
    if (op->type.is_float()) {
        if (is_const_zero(b) && !std::signbit(*as_const_float(b))) return a;
        return unchanged_or(op, a, b);
    }
    LinearForm f = difference(a, b);
    if (recombine_div_mod(f)) return mutate(rebuild(f));
    if (auto r = ramp_of_linear_form(f)) return *r;
    return rebuild(f);
}

Expr Simplifier::visit(const Mul *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (auto r = fold_arith(IRNodeType::Mul, a, b)) return *r;
    if (auto r = broadcast_rule<Mul>(a, b)) return *r;
    if (should_swap(a, b)) std::swap(a, b);
    Type t = op->type;
    // x4(x) * x4(7) is x4(x * 7), the product taken once, on the scalar; not for a sum, which
    // the scalar product would distribute into more terms.
    if (const auto *ba = a.as<Broadcast>(); ba && is_const(b) && t.is_int_or_uint()) {
        LinearForm v = linear(ba->value);
        if (v.terms.size() == 1 && v.constant == 0)
            return Broadcast::make(mutate(Mul::make(ba->value, b.as<Broadcast>()->value)), t.lanes);
    }
    if (const auto *ramp = a.as<Ramp>(); ramp && b.as<Broadcast>()) {
        Expr s = b.as<Broadcast>()->value;
        return make_ramp(mutate(Mul::make(ramp->base, s)), mutate(Mul::make(ramp->stride, s)),
                         ramp->lanes);
    }
    if (t.is_float()) {
        if (is_const_one(b)) return a;
        return unchanged_or(op, a, b);
    }
    LinearForm f(t);
    if (is_const(b)) {
        collect(Mul::make(a, b), 1, f);
        return rebuild(f);
    }
    // A product of two non-constant terms: pull the constant factors out, so that
    // (x * 2) * (y * 3) becomes (x * y) * 6.
    LinearForm la = linear(a), lb = linear(b);
    uint64_t coefficient = 1;
    auto single_term = [&](const LinearForm &l, Expr &e) {
        if (l.terms.size() != 1 || signed_coefficient(t, l.constant) != 0) return;
        e = l.terms.begin()->first;
        coefficient *= l.terms.begin()->second;
    };
    single_term(la, a);
    single_term(lb, b);
    if (should_swap(a, b)) std::swap(a, b);
    f.terms[Mul::make(a, b)] = coefficient;
    return rebuild(f);
}

Expr Simplifier::visit(const Div *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (auto r = fold_arith(IRNodeType::Div, a, b)) return *r;
    if (auto r = broadcast_rule<Div>(a, b)) return *r;
    if (auto r = ramp_in_one_block_rule(a, b, true)) return *r;
    Type t = op->type;
    if (t.is_float()) {
        if (is_const_one(b)) return a;
        return unchanged_or(op, a, b);
    }
    if (is_const_zero(a) || is_const_zero(b)) return make_zero(t); // x / 0 is 0 in the IR
    if (is_const_one(b)) return a;
    if (t.is_int() && is_const(b, -1)) return rebuild(difference(make_zero(t), a));
    auto c = const_value(b);
    if (!c || *c <= 0) return unchanged_or(op, a, b);
    return divide(a, *c);
}

// a / c for a constant c > 0.
Expr Simplifier::divide(const Expr &a, Int128 c) {
    Type t = a.type();
    ConstInterval i = bounds_of(a);
    if (i.min && i.max && floor_div(*i.min, c) == floor_div(*i.max, c)) {
        return make_const(t, int64_t(floor_div(*i.min, c)));
    }
    const Int128 limit = Int128(1) << 62;
    // (x / c1) / c2 is x / (c1 * c2) for positive divisors.
    if (const auto *inner = a.as<Div>()) {
        auto c1 = const_value(inner->b);
        if (c1 && *c1 > 0 && *c1 < limit && c < limit &&
            *c1 * c <= *type_range(t.element_of()).max) {
            return divide(inner->a, *c1 * c);
        }
    }
    if (!assumes_no_overflow(t)) return Div::make(a, make_const(t, int64_t(c)));
    // (c * q + r) / c is q + r / c in Euclidean division: move the multiples of c out.
    LinearForm f = linear(a), quotient(t), rest(t);
    for (const auto &[term, coefficient] : f.terms) {
        int64_t v = signed_coefficient(t, coefficient);
        if (v % c == 0) {
            quotient.terms[term] = uint64_t(int64_t(v / c));
        } else {
            rest.terms[term] = coefficient;
        }
    }
    Int128 k = signed_coefficient(t, f.constant);
    quotient.constant = uint64_t(int64_t(floor_div(k, c)));
    rest.constant = uint64_t(int64_t(floor_mod(k, c)));
    if (!quotient.terms.empty() || quotient.constant != 0) {
        if (!rest.terms.empty()) {
            Expr r = divide(rebuild(rest), c);
            collect(r, 1, quotient);
        }
        return rebuild(quotient);
    }
    // (g * x) / (g * c) is x / c.
    Int128 g = gcd128(c, k);
    for (const auto &[term, coefficient] : f.terms) {
        g = gcd128(g, signed_coefficient(t, coefficient));
    }
    if (g > 1) return divide(rebuild(scaled_down(f, g)), c / g);
    return Div::make(a, make_const(t, int64_t(c)));
}

Expr Simplifier::visit(const Mod *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (auto r = fold_arith(IRNodeType::Mod, a, b)) return *r;
    if (auto r = broadcast_rule<Mod>(a, b)) return *r;
    if (auto r = ramp_in_one_block_rule(a, b, false)) return *r;
    Type t = op->type;
    if (t.is_float()) return unchanged_or(op, a, b);
    if (is_const_zero(a) || is_const_zero(b) || is_const_one(b)) return make_zero(t);
    if (t.is_int() && is_const(b, -1)) return make_zero(t);
    auto c = const_value(b);
    if (!c || *c <= 0) return unchanged_or(op, a, b);
    return modulo(a, *c);
}

// a % c for a constant c > 0.
Expr Simplifier::modulo(const Expr &a, Int128 c) {
    Type t = a.type();
    ConstInterval i = bounds_of(a);
    if (i.min && i.max && floor_div(*i.min, c) == floor_div(*i.max, c)) {
        // The result is a - q * c, which lies in [0, c) and so cannot wrap.
        LinearForm f = linear(a);
        f.constant -= uint64_t(int64_t(floor_div(*i.min, c) * c));
        return rebuild(f);
    }
    // (x % c1) % c2 is x % c2 when c2 divides c1.
    if (const auto *inner = a.as<Mod>()) {
        auto c1 = const_value(inner->b);
        if (c1 && *c1 > 0 && *c1 % c == 0) return modulo(inner->a, c);
    }
    // Dropping multiples of c is exact when no overflow is assumed, and also under wrapping
    // when c is a power of two: it then divides 2^bits, so wrapping keeps the residue.
    if (!assumes_no_overflow(t) && !is_positive_power_of_two(c)) {
        return Mod::make(a, make_const(t, int64_t(c)));
    }
    LinearForm f = linear(a), rest(t);
    bool changed = false;
    for (const auto &[term, coefficient] : f.terms) {
        if (signed_coefficient(t, coefficient) % c == 0) {
            changed = true;
        } else {
            rest.terms[term] = coefficient;
        }
    }
    Int128 k = signed_coefficient(t, f.constant);
    rest.constant = uint64_t(int64_t(floor_mod(k, c)));
    if (changed || floor_mod(k, c) != k) return modulo(rebuild(rest), c);
    // (g * x) % (g * c) is (x % c) * g.
    Int128 g = gcd128(c, k);
    for (const auto &[term, coefficient] : f.terms) {
        g = gcd128(g, signed_coefficient(t, coefficient));
    }
    if (g > 1) {
        Expr m = modulo(rebuild(scaled_down(f, g)), c / g);
        LinearForm r(t);
        collect(m, uint64_t(int64_t(g)), r);
        return rebuild(r);
    }
    return Mod::make(a, make_const(t, int64_t(c)));
}

Expr Simplifier::visit(const Cast *op) {
    Expr v = mutate(op->value);
    Type t = op->type;
    if (v.type() == t) return v;
    if (auto r = fold_cast(t.element_of(), v)) {
        return t.is_vector() ? Broadcast::make(*r, t.lanes) : *r;
    }
    if (const auto *b = v.as<Broadcast>()) {
        return Broadcast::make(mutate(Cast::make(t.element_of(), b->value)), t.lanes);
    }
    // cast(t, cast(u, x)) is cast(t, x) when every value x takes is representable in u.
    if (const auto *inner = v.as<Cast>()) {
        Type u = v.type(), s = inner->value.type();
        if (u.is_int_or_uint() && s.is_int_or_uint()) {
            ConstInterval i = bounds_of(inner->value), r = type_range(u.element_of());
            if (i.min && i.max && *i.min >= *r.min && *i.max <= *r.max) {
                if (s == t) return inner->value;
                return Cast::make(t, inner->value);
            }
        }
    }
    if (v.same_as(op->value)) return Expr(op);
    return Cast::make(t, v);
}

Expr Simplifier::visit(const Ramp *op) {
    Expr base = mutate(op->base), stride = mutate(op->stride);
    if (!is_const_zero(stride) && base.same_as(op->base) && stride.same_as(op->stride)) {
        return Expr(op);
    }
    return make_ramp(base, stride, op->lanes);
}

Expr Simplifier::visit(const Call *op) {
    Expr e = IRMutator::visit(op);
    // likely() of a constant is the constant, so that if (likely(true)) folds.
    const auto *call = e.as<Call>();
    if (call && call->call_type == Call::Intrinsic && call->name == intrinsic::likely &&
        is_const(call->args[0])) {
        return call->args[0];
    }
    return e;
}

} // namespace kiln::simplify_internal
