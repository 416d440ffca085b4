// Linear forms, constant folding and canonical operand order for the simplifier.
#include <cmath>

#include "lang/Error.h"
#include "lang/SimplifyInternal.h"

namespace kiln::simplify_internal {

ConstInterval type_range(Type t) {
    if (t.is_bool()) return {0, 1};
    if (t.is_int()) return {Int128(t.min_int()), Int128(t.max_int())};
    if (t.is_uint()) return {0, Int128(t.max_uint())};
    return {};
}

std::optional<Int128> const_value(const Expr &e) {
    auto v = as_const_int(e);
    if (!v) return std::nullopt;
    if (e.type().is_int()) return Int128(*v);
    return Int128(uint64_t(*v));
}

Int128 floor_div(Int128 a, Int128 b) {
    Int128 q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

Int128 floor_mod(Int128 a, Int128 b) {
    return a - floor_div(a, b) * b;
}

Int128 abs128(Int128 a) {
    return a < 0 ? -a : a;
}

Int128 gcd128(Int128 a, Int128 b) {
    a = abs128(a);
    b = abs128(b);
    while (b != 0) {
        Int128 r = a % b;
        a = b;
        b = r;
    }
    return a;
}

// A coefficient as a signed number in the range of the type's width.
int64_t signed_coefficient(Type t, uint64_t c) {
    if (t.bits >= 64) return int64_t(c);
    uint64_t mask = (uint64_t(1) << t.bits) - 1;
    c &= mask;
    if (c >> (t.bits - 1)) c |= ~mask;
    return int64_t(c);
}

void collect(const Expr &e, uint64_t coefficient, LinearForm &f) {
    if (auto c = as_const_int(e)) {
        f.constant += coefficient * uint64_t(*c);
        return;
    }
    if (const auto *op = e.as<Add>()) {
        collect(op->a, coefficient, f);
        collect(op->b, coefficient, f);
        return;
    }
    if (const auto *op = e.as<Sub>()) {
        collect(op->a, coefficient, f);
        collect(op->b, 0 - coefficient, f);
        return;
    }
    if (const auto *op = e.as<Mul>()) {
        if (auto c = as_const_int(op->b)) return collect(op->a, coefficient * uint64_t(*c), f);
        if (auto c = as_const_int(op->a)) return collect(op->b, coefficient * uint64_t(*c), f);
    }
    f.terms[e] += coefficient;
}

LinearForm linear(const Expr &e) {
    LinearForm f(e.type());
    collect(e, 1, f);
    return f;
}

// The canonical expression of a linear form: terms with positive coefficients in structural
// order, then the subtracted ones, then the constant (added when signed, subtracted when an
// unsigned constant is "negative", so x - 1 stays readable for unsigned x).
Expr rebuild(const LinearForm &f) {
    Type t = f.type;
    std::vector<std::pair<Expr, uint64_t>> positive, negative;
    for (const auto &[term, c] : f.terms) {
        int64_t v = signed_coefficient(t, c);
        if (v > 0) positive.emplace_back(term, uint64_t(v));
        if (v < 0) negative.emplace_back(term, 0 - uint64_t(v));
    }
    auto scaled = [&](const Expr &term, uint64_t m) {
        return m == 1 ? term : Mul::make(term, make_const(t, int64_t(m)));
    };
    int64_t k = signed_coefficient(t, f.constant);
    Expr acc;
    for (const auto &[term, m] : positive) {
        acc = acc.defined() ? Add::make(acc, scaled(term, m)) : scaled(term, m);
    }
    if (!acc.defined() && !negative.empty()) {
        // Start from the constant, so that -x + 5 reads as 5 - x.
        acc = make_const(t, k);
        k = 0;
    }
    for (const auto &[term, m] : negative)
        acc = Sub::make(acc, scaled(term, m));
    if (!acc.defined()) return make_const(t, k);
    if (k == 0) return acc;
    if (t.is_uint() && k < 0) return Sub::make(acc, make_const(t, int64_t(0 - uint64_t(k))));
    return Add::make(acc, make_const(t, k));
}

LinearForm difference(const Expr &a, const Expr &b) {
    LinearForm f(a.type());
    collect(a, 1, f);
    collect(b, uint64_t(-1), f);
    return f;
}

// Splits a linear form into the terms with positive and with negative coefficients (negated),
// each with a zero constant; the constant is returned separately.
void split_signs(const LinearForm &f, LinearForm &positive, LinearForm &negative) {
    for (const auto &[term, c] : f.terms) {
        int64_t v = signed_coefficient(f.type, c);
        if (v > 0) positive.terms[term] = c;
        if (v < 0) negative.terms[term] = 0 - c;
    }
}

bool is_positive_power_of_two(Int128 c) {
    return c > 0 && (c & (c - 1)) == 0;
}

LinearForm scaled_down(const LinearForm &f, Int128 g) {
    LinearForm r(f.type);
    for (const auto &[term, coefficient] : f.terms) {
        r.terms[term] = uint64_t(int64_t(signed_coefficient(f.type, coefficient) / g));
    }
    r.constant = uint64_t(int64_t(signed_coefficient(f.type, f.constant) / g));
    return r;
}

namespace {

double round_to(Type t, double v) {
    return t.round_float(v);
}

// Float to integer casts truncate and saturate, NaN giving zero, as ExprEvaluator documents.
Expr fold_float_to_int(Type t, double f) {
    if (std::isnan(f)) return make_zero(t);
    double v = std::trunc(f);
    if (t.is_int()) {
        double limit = std::ldexp(1.0, t.bits - 1);
        if (v < -limit) return make_const(t, t.min_int());
        if (v >= limit) return make_const(t, t.max_int());
        return make_const(t, int64_t(v));
    }
    if (v <= 0) return make_zero(t);
    if (v >= std::ldexp(1.0, t.bits)) return make_const(t, int64_t(t.max_uint()));
    return make_const(t, int64_t(uint64_t(v)));
}

} // namespace

std::optional<Expr> fold_arith(IRNodeType op, const Expr &a, const Expr &b) {
    Type t = a.type();
    if (t.is_float()) {
        auto x = as_const_float(a), y = as_const_float(b);
        if (!x || !y) return std::nullopt;
        double r;
        switch (op) {
        case IRNodeType::Add:
            r = *x + *y;
            break;
        case IRNodeType::Sub:
            r = *x - *y;
            break;
        case IRNodeType::Mul:
            r = *x * *y;
            break;
        case IRNodeType::Div:
            r = *x / *y;
            break;
        case IRNodeType::Mod:
            r = *x - round_to(t, *y * std::floor(round_to(t, *x / *y)));
            break;
        case IRNodeType::Min:
            return *x < *y ? a : b;
        case IRNodeType::Max:
            return *x > *y ? a : b;
        default:
            internal_error("fold_arith: not an arithmetic node");
        }
        return make_const(t, r);
    }
    auto x = const_value(a), y = const_value(b);
    if (!x || !y) return std::nullopt;
    Int128 r;
    switch (op) {
    case IRNodeType::Add:
        r = *x + *y;
        break;
    case IRNodeType::Sub:
        r = *x - *y;
        break;
    case IRNodeType::Mul:
        // In 64 bits, so that a uint64 product wraps like the IR's instead of growing.
        r = Int128(uint64_t(*x) * uint64_t(*y)); // NOLINT(bugprone-misplaced-widening-cast)
        break;
    case IRNodeType::Div:
        r = *y == 0 ? 0 : floor_div(*x, abs128(*y)) * (*y < 0 ? -1 : 1);
        break;
    case IRNodeType::Mod:
        r = *y == 0 ? 0 : floor_mod(*x, abs128(*y));
        break;
    case IRNodeType::Min:
        return *x < *y ? a : b;
    case IRNodeType::Max:
        return *x > *y ? a : b;
    default:
        internal_error("fold_arith: not an arithmetic node");
    }
    return make_const(t, int64_t(r));
}

std::optional<bool> fold_compare(IRNodeType op, const Expr &a, const Expr &b) {
    int c; // -1, 0, 1, or 2 when unordered (NaN)
    if (a.type().is_float()) {
        auto x = as_const_float(a), y = as_const_float(b);
        if (!x || !y) return std::nullopt;
        c = (std::isnan(*x) || std::isnan(*y)) ? 2 : (*x < *y ? -1 : (*x > *y ? 1 : 0));
    } else {
        auto x = const_value(a), y = const_value(b);
        if (!x || !y) return std::nullopt;
        c = *x < *y ? -1 : (*x > *y ? 1 : 0);
    }
    switch (op) {
    case IRNodeType::EQ:
        return c == 0;
    case IRNodeType::NE:
        return c != 0;
    case IRNodeType::LT:
        return c == -1;
    case IRNodeType::LE:
        return c == -1 || c == 0;
    case IRNodeType::GT:
        return c == 1;
    case IRNodeType::GE:
        return c == 1 || c == 0;
    default:
        internal_error("fold_compare: not a comparison");
    }
}

std::optional<Expr> fold_cast(Type t, const Expr &e) {
    Type s = e.type();
    if (auto v = const_value(e)) {
        if (t.is_bool()) return make_const(t, int64_t(*v != 0));
        if (t.is_float()) {
            // Convert from the integer directly: via double, an int64 could round twice.
            double f = s.is_int()
                           ? (t.bits <= 32 ? double(float(int64_t(*v))) : double(int64_t(*v)))
                           : (t.bits <= 32 ? double(float(uint64_t(*v))) : double(uint64_t(*v)));
            return make_const(t, f);
        }
        return make_const(t, int64_t(*v));
    }
    if (auto f = as_const_float(e)) {
        if (t.is_bool()) return make_const(t, int64_t(*f != 0));
        if (t.is_float()) return make_const(t, *f);
        return fold_float_to_int(t, *f);
    }
    return std::nullopt;
}

Expr make_bool(bool v, int lanes) {
    return v ? const_true(lanes) : const_false(lanes);
}

// Both operands of a commutative node in a canonical order: constants last, otherwise by the
// structural order.
bool should_swap(const Expr &a, const Expr &b) {
    bool ca = is_const(a), cb = is_const(b);
    if (ca != cb) return ca;
    return compare(a, b) > 0;
}

} // namespace kiln::simplify_internal
