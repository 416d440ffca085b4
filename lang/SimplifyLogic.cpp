// The simplifier's rules for min and max, comparisons, boolean logic and select.
#include <algorithm>

#include "lang/SimplifyInternal.h"

namespace kiln::simplify_internal {

// Whether `kept` makes `e` redundant in a min (is_min) or max chain: kept <= e for a min.
bool Simplifier::dominates(const Expr &kept, const Expr &e, bool is_min) {
    if (equal(kept, e)) return true;
    // min(a, max(a, b)) is a, and max(a, min(a, b)) is a.
    std::vector<Expr> inner;
    if (is_min && e.as<Max>()) flatten<Max>(e, inner);
    if (!is_min && e.as<Min>()) flatten<Min>(e, inner);
    for (const Expr &x : inner) {
        if (equal(x, kept)) return true;
    }
    return is_min ? prove_le(kept, e) : prove_le(e, kept);
}

template <typename Op>
Expr Simplifier::visit_min_max(const Op *op, bool is_min) {
    Expr a = mutate(op->a), b = mutate(op->b);
    IRNodeType kind = is_min ? IRNodeType::Min : IRNodeType::Max;
    if (auto r = fold_arith(kind, a, b)) return *r;
    if (equal(a, b)) return a;
    if (auto r = broadcast_rule<Op>(a, b)) return *r;
    // Float min and max are not commutative when a NaN is involved.
    if (!op->type.is_int_or_uint()) return unchanged_or(op, a, b);
    // Each operand remembers its side: operands of one side were already pruned against each
    // other when that side was simplified, so long chains only compare across sides.
    std::vector<std::pair<Expr, int>> operands, kept;
    std::vector<Expr> side;
    for (int s = 0; s < 2; s++) {
        side.clear();
        flatten<Op>(s == 0 ? a : b, side);
        for (const Expr &e : side)
            operands.emplace_back(e, s);
    }
    Expr constant;
    for (const auto &[e, s] : operands) {
        if (!is_const(e)) continue;
        constant = constant.defined() ? *fold_arith(kind, constant, e) : e;
    }
    std::erase_if(operands, [](const auto &o) { return is_const(o.first); });
    if (constant.defined()) operands.emplace_back(constant, 2);
    bool small = operands.size() <= 8;
    auto redundant = [&](const std::pair<Expr, int> &k, const std::pair<Expr, int> &e) {
        bool compare = small || k.second != e.second || k.second == 2 || e.second == 2;
        return compare && dominates(k.first, e.first, is_min);
    };
    for (const auto &e : operands) {
        if (std::any_of(kept.begin(), kept.end(), [&](const auto &k) { return redundant(k, e); })) {
            continue;
        }
        std::erase_if(kept, [&](const auto &k) { return redundant(e, k); });
        kept.push_back(e);
    }
    std::vector<Expr> result;
    for (const auto &k : kept)
        result.push_back(k.first);
    return rebuild_chain<Op>(result);
}

Expr Simplifier::visit(const Min *op) {
    return visit_min_max(op, true);
}
Expr Simplifier::visit(const Max *op) {
    return visit_min_max(op, false);
}

// Simplifies a < b (LT), a <= b (LE), a == b (EQ) or a != b (NE) on simplified operands.
Expr Simplifier::compare_rule(IRNodeType kind, const Expr &a, const Expr &b) {
    int lanes = a.type().lanes;
    if (auto r = fold_compare(kind, a, b)) return make_bool(*r, lanes);
    Type t = a.type();
    auto make = [&](const Expr &x, const Expr &y) {
        switch (kind) {
        case IRNodeType::LT:
            return LT::make(x, y);
        case IRNodeType::LE:
            return LE::make(x, y);
        case IRNodeType::EQ:
            return EQ::make(x, y);
        default:
            return NE::make(x, y);
        }
    };
    const auto *ba = a.as<Broadcast>(), *bb = b.as<Broadcast>();
    if (ba && bb) return Broadcast::make(compare_rule(kind, ba->value, bb->value), lanes);
    if (t.is_float()) return make(a, b);
    if (equal(a, b)) return make_bool(kind == IRNodeType::LE || kind == IRNodeType::EQ, lanes);
    if (t.is_bool()) {
        if (kind == IRNodeType::EQ || kind == IRNodeType::NE) {
            return should_swap(a, b) ? make(b, a) : make(a, b);
        }
        return make(a, b);
    }
    ConstInterval d = difference_bounds(a, b);
    bool below = d.max && *d.max < 0, at_most = d.max && *d.max <= 0;
    bool above = d.min && *d.min > 0, at_least = d.min && *d.min >= 0;
    switch (kind) {
    case IRNodeType::LT:
        if (below || at_least) return make_bool(below, lanes);
        break;
    case IRNodeType::LE:
        if (at_most || above) return make_bool(at_most, lanes);
        break;
    case IRNodeType::EQ:
        if (below || above) return make_bool(false, lanes);
        break;
    default:
        if (below || above) return make_bool(true, lanes);
        break;
    }
    // Move every term to the side where its coefficient is positive and the constant to the
    // right: x + 3 < y + 5 becomes x < y + 2. Exact for == and != (they only need a - b to be
    // zero modulo 2^bits), and for < and <= when no overflow is assumed.
    bool equality = kind == IRNodeType::EQ || kind == IRNodeType::NE;
    if (!equality && !assumes_no_overflow(t)) return make(a, b);
    LinearForm f = difference(a, b), lhs(t), rhs(t);
    split_signs(f, lhs, rhs);
    if (lhs.terms.empty() && rhs.terms.empty()) {
        bool zero = signed_coefficient(t, f.constant) == 0;
        return make_bool(kind == IRNodeType::NE ? !zero : zero, lanes);
    }
    if (lhs.terms.empty()) {
        // k - N < 0 becomes k < N, and N == k keeps the constant on the right.
        Expr k = make_const(t, signed_coefficient(t, f.constant));
        return equality ? make(rebuild(rhs), k) : make(k, rebuild(rhs));
    }
    rhs.constant = 0 - f.constant;
    return make(rebuild(lhs), rebuild(rhs));
}

Expr Simplifier::visit(const LT *op) {
    return compare_rule(IRNodeType::LT, mutate(op->a), mutate(op->b));
}

Expr Simplifier::visit(const LE *op) {
    return compare_rule(IRNodeType::LE, mutate(op->a), mutate(op->b));
}

// a > b is b < a, and a >= b is b <= a, also for floats.
Expr Simplifier::visit(const GT *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    return compare_rule(IRNodeType::LT, b, a);
}

Expr Simplifier::visit(const GE *op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    return compare_rule(IRNodeType::LE, b, a);
}

Expr Simplifier::visit(const EQ *op) {
    return compare_rule(IRNodeType::EQ, mutate(op->a), mutate(op->b));
}

Expr Simplifier::visit(const NE *op) {
    return compare_rule(IRNodeType::NE, mutate(op->a), mutate(op->b));
}

Expr Simplifier::visit(const Not *op) {
    Expr a = mutate(op->a);
    return negation(a);
}

// !a for a simplified a.
Expr Simplifier::negation(const Expr &a) {
    int lanes = a.type().lanes;
    if (is_const_true(a)) return const_false(lanes);
    if (is_const_false(a)) return const_true(lanes);
    if (const auto *n = a.as<Not>()) return n->a;
    if (const auto *b = a.as<Broadcast>()) return Broadcast::make(negation(b->value), lanes);
    if (const auto *e = a.as<EQ>()) return NE::make(e->a, e->b);
    if (const auto *e = a.as<NE>()) return EQ::make(e->a, e->b);
    // !(a < b) is b <= a only without NaN.
    if (const auto *e = a.as<LT>(); e && !e->a.type().is_float()) {
        return compare_rule(IRNodeType::LE, e->b, e->a);
    }
    if (const auto *e = a.as<LE>(); e && !e->a.type().is_float()) {
        return compare_rule(IRNodeType::LT, e->b, e->a);
    }
    return Not::make(a);
}

template <typename Op>
Expr Simplifier::visit_and_or(const Op *op, bool is_and) {
    Expr a = mutate(op->a), b = mutate(op->b);
    int lanes = op->type.lanes;
    std::vector<Expr> operands, kept;
    flatten<Op>(a, operands);
    flatten<Op>(b, operands);
    // The absorbing element (false for &&, true for ||) wins; the identity drops out.
    for (const Expr &e : operands) {
        if (is_and ? is_const_false(e) : is_const_true(e)) return make_bool(!is_and, lanes);
        if (is_and ? is_const_true(e) : is_const_false(e)) continue;
        bool duplicate =
            std::any_of(kept.begin(), kept.end(), [&](const Expr &k) { return equal(k, e); });
        if (!duplicate) kept.push_back(e);
    }
    if (kept.empty()) return make_bool(is_and, lanes);
    // x && !x is false, and x || !x is true.
    for (const Expr &e : kept) {
        const auto *n = e.as<Not>();
        if (!n) continue;
        for (const Expr &k : kept) {
            if (equal(k, n->a)) return make_bool(!is_and, lanes);
        }
    }
    return rebuild_chain<Op>(kept);
}

Expr Simplifier::visit(const And *op) {
    return visit_and_or(op, true);
}
Expr Simplifier::visit(const Or *op) {
    return visit_and_or(op, false);
}

Expr Simplifier::visit(const Select *op) {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (is_const_true(c)) return t;
    if (is_const_false(c)) return f;
    if (equal(t, f)) return t;
    if (const auto *n = c.as<Not>()) {
        c = n->a;
        std::swap(t, f);
    }
    // select(c, select(c, a, b), d) is select(c, a, d), and likewise on the false side.
    if (const auto *s = t.as<Select>(); s && equal(s->condition, c)) t = s->true_value;
    if (const auto *s = f.as<Select>(); s && equal(s->condition, c)) f = s->false_value;
    if (equal(t, f)) return t;
    if (c.type() == t.type()) {
        if (is_const_true(t) && is_const_false(f)) return c;
        if (is_const_false(t) && is_const_true(f)) return negation(c);
    }
    // select(a < b, a, b) is min(a, b) and select(a < b, b, a) is max(a, b) for integers.
    if (t.type().is_int_or_uint() && c.type().lanes == t.type().lanes) {
        Expr x, y;
        if (const auto *lt = c.as<LT>()) {
            x = lt->a;
            y = lt->b;
        } else if (const auto *le = c.as<LE>()) {
            x = le->a;
            y = le->b;
        }
        if (x.defined() && equal(x, t) && equal(y, f)) return mutate(Min::make(t, f));
        if (x.defined() && equal(x, f) && equal(y, t)) return mutate(Max::make(t, f));
    }
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
        return Expr(op);
    }
    return Select::make(c, t, f);
}

} // namespace kiln::simplify_internal
