#include "lang/IROperator.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "lang/Error.h"
#include "lang/IRPrinter.h"

namespace kiln {

Expr make_const(Type t, int64_t v) {
    Expr e;
    Type s = t.element_of();
    switch (t.code) {
    case Type::Int:
        e = IntImm::make(s, v);
        break;
    case Type::UInt:
        e = UIntImm::make(s, uint64_t(v));
        break;
    case Type::Bool:
        e = UIntImm::make(s, v != 0);
        break;
    case Type::Float:
    case Type::BFloat:
        e = FloatImm::make(s, double(v));
        break;
    }
    return t.is_vector() ? Broadcast::make(e, t.lanes) : e;
}

Expr make_const(Type t, double v) {
    if (!t.is_float()) return make_const(t, int64_t(v));
    Expr e = FloatImm::make(t.element_of(), v);
    return t.is_vector() ? Broadcast::make(e, t.lanes) : e;
}

Expr make_zero(Type t) {
    return make_const(t, int64_t(0));
}
Expr make_one(Type t) {
    return make_const(t, int64_t(1));
}
Expr const_true(int lanes) {
    return make_const(Bool(lanes), int64_t(1));
}
Expr const_false(int lanes) {
    return make_const(Bool(lanes), int64_t(0));
}

Expr type_min(Type t) {
    if (t.is_float()) return make_const(t, -std::numeric_limits<double>::infinity());
    if (t.is_uint() || t.is_bool()) return make_zero(t);
    return make_const(t, t.min_int());
}

Expr type_max(Type t) {
    if (t.is_float()) return make_const(t, std::numeric_limits<double>::infinity());
    if (t.is_uint()) {
        Expr e = UIntImm::make(t.element_of(), t.max_uint());
        return t.is_vector() ? Broadcast::make(e, t.lanes) : e;
    }
    return make_const(t, t.max_int());
}

std::optional<int64_t> as_const_int(const Expr &e) {
    if (!e.defined()) return std::nullopt;
    if (const auto *b = e.as<Broadcast>()) return as_const_int(b->value);
    if (const auto *i = e.as<IntImm>()) return i->value;
    if (const auto *u = e.as<UIntImm>()) return int64_t(u->value);
    return std::nullopt;
}

std::optional<double> as_const_float(const Expr &e) {
    if (!e.defined()) return std::nullopt;
    if (const auto *b = e.as<Broadcast>()) return as_const_float(b->value);
    if (const auto *f = e.as<FloatImm>()) return f->value;
    return std::nullopt;
}

bool is_const(const Expr &e) {
    return as_const_int(e).has_value() || as_const_float(e).has_value();
}

bool is_const(const Expr &e, int64_t v) {
    if (auto i = as_const_int(e)) return *i == v;
    if (auto f = as_const_float(e)) return *f == double(v);
    return false;
}

bool is_const_zero(const Expr &e) {
    return is_const(e, 0);
}
bool is_positive_zero(const Expr &e) {
    std::optional<double> f = as_const_float(e);
    return is_const_zero(e) && !(f && std::signbit(*f));
}
bool is_const_one(const Expr &e) {
    return is_const(e, 1);
}
bool is_const_true(const Expr &e) {
    return e.defined() && e.type().is_bool() && is_const(e, 1);
}
bool is_const_false(const Expr &e) {
    return e.defined() && e.type().is_bool() && is_const(e, 0);
}
bool is_positive_const(const Expr &e) {
    auto i = as_const_int(e);
    return i && *i > 0;
}

Expr cast(Type t, Expr e) {
    internal_assert(e.defined(), "cast of an undefined expression");
    if (e.type().is_vector() && t.is_scalar()) t = t.with_lanes(e.type().lanes);
    if (e.type() == t) return e;
    if (t.is_vector() && e.type().is_scalar()) {
        return Broadcast::make(cast(t.element_of(), std::move(e)), t.lanes);
    }
    // Cast the scalar inside a broadcast, so that a converted scalar operand stays a broadcast.
    if (const Broadcast *b = e.as<Broadcast>()) {
        return Broadcast::make(cast(t.element_of(), b->value), t.lanes);
    }
    // Fold casts of constants right away, so literals keep their exact value.
    if (auto i = as_const_int(e); i && e.type().is_scalar()) {
        if (t.is_float()) {
            return e.type().is_uint() ? make_const(t, double(uint64_t(*i)))
                                      : make_const(t, double(*i));
        }
        if (t.is_bool()) return make_const(t, int64_t(*i != 0));
        return make_const(t, *i);
    }
    if (auto f = as_const_float(e); f && e.type().is_scalar()) {
        if (t.is_float()) return make_const(t, *f);
        if (t.is_bool()) return make_const(t, int64_t(*f != 0));
    }
    return Cast::make(t, std::move(e));
}

namespace {

Expr broadcast_to(Expr e, int lanes) {
    if (e.type().lanes == lanes) return e;
    if (e.type().is_scalar()) return Broadcast::make(std::move(e), lanes);
    user_error("cannot combine vectors of ", e.type().lanes, " and ", lanes,
               " lanes in one expression");
}

// How the user wrote an operation, for messages: "x + 300", "300 + x" or "min(x, 300)".
std::string written(const char *op, const std::string &a, const std::string &b) {
    bool is_call = std::isalpha(static_cast<unsigned char>(op[0]));
    return is_call ? detail::str(op, "(", a, ", ", b, ")") : detail::str(a, " ", op, " ", b);
}

// A C++ integer combined with e must fit in e's type; op and constant_first say how it was
// written, so that the message can quote it.
void check_fits(const Expr &e, int64_t v, const char *op, bool constant_first) {
    Type t = e.type().element_of();
    if (!t.is_int_or_uint() || t.can_represent(v)) return;
    std::string ex = to_string(e), cv = std::to_string(v);
    const char *wider = t.bits < 32 ? "int" : "int64_t";
    user_error("the constant ", v, " does not fit in ", t, ", the type of ", ex, ", in ",
               written(op, constant_first ? cv : ex, constant_first ? ex : cv), "; cast ", ex,
               " to a wider type first, e.g. cast<", wider, ">(", ex, ")");
}

// A C++ literal takes the type of the Expr it is combined with.
Expr literal_like(const Expr &e, int64_t v, const char *op, bool constant_first) {
    check_fits(e, v, op, constant_first);
    Type t = e.type();
    if (t.is_bool()) t = Int(32, t.lanes);
    return make_const(t, v);
}

Expr literal_like(const Expr &e, double v) {
    Type t = e.type();
    if (!t.is_float()) {
        // A float literal makes an integer expression float, as in C.
        return make_const(Float(32, t.lanes), v);
    }
    return make_const(t, v);
}

void check_arith(const Expr &a, const Expr &b, const char *op) {
    if (!a.defined() || !b.defined()) {
        user_error("operator ", op, " applied to an undefined expression");
    }
}

} // namespace

void match_types(Expr &a, Expr &b) {
    if (a.type() == b.type()) return;
    int lanes = std::max(a.type().lanes, b.type().lanes);
    a = broadcast_to(a, lanes);
    b = broadcast_to(b, lanes);
    Type ta = a.type(), tb = b.type();
    if (ta == tb) return;
    if (ta.is_float() && tb.is_float()) {
        Type t = ta.bits >= tb.bits ? ta : tb;
        a = cast(t, a);
        b = cast(t, b);
        return;
    }
    if (ta.is_float()) {
        b = cast(ta, b);
        return;
    }
    if (tb.is_float()) {
        a = cast(tb, a);
        return;
    }
    if (ta.is_bool()) {
        a = cast(tb, a);
        return;
    }
    if (tb.is_bool()) {
        b = cast(ta, b);
        return;
    }
    int bits = std::max(ta.bits, tb.bits);
    Type::Code code = (ta.is_int() || tb.is_int()) ? Type::Int : Type::UInt;
    Type t(code, bits, lanes);
    a = cast(t, a);
    b = cast(t, b);
}

namespace {
// bfloat16 operands are computed on in float32 (exact for every bfloat16 value), the result
// rounded back by the caller: the IR holds no bfloat16 arithmetic.
Expr widened(Expr e) {
    if (!e.type().is_bfloat()) return e;
    Type t = Float(32, e.type().lanes);
    return cast(t, std::move(e));
}

template <typename Node>
Expr arith(Expr a, Expr b, const char *op) {
    check_arith(a, b, op);
    match_types(a, b);
    if (a.type().is_bool()) {
        a = cast(Int(32, a.type().lanes), a);
        b = cast(Int(32, b.type().lanes), b);
    }
    if (a.type().is_bfloat()) {
        Type t = a.type();
        return cast(t, Node::make(widened(std::move(a)), widened(std::move(b))));
    }
    return Node::make(std::move(a), std::move(b));
}

template <typename Node>
Expr compare_op(Expr a, Expr b, const char *op) {
    check_arith(a, b, op);
    match_types(a, b);
    return Node::make(widened(std::move(a)), widened(std::move(b)));
}

Expr to_bool(Expr e, const char *op) {
    if (!e.defined()) user_error("operator ", op, " applied to an undefined expression");
    if (e.type().is_bool()) return e;
    user_error("operator ", op, " needs a bool operand, got ", e, " of type ", e.type(),
               "; compare it with zero first");
}
} // namespace

Expr operator+(Expr a, Expr b) {
    return arith<Add>(std::move(a), std::move(b), "+");
}
Expr operator-(Expr a, Expr b) {
    return arith<Sub>(std::move(a), std::move(b), "-");
}
Expr operator*(Expr a, Expr b) {
    return arith<Mul>(std::move(a), std::move(b), "*");
}
Expr operator/(Expr a, Expr b) {
    return arith<Div>(std::move(a), std::move(b), "/");
}
Expr operator%(Expr a, Expr b) {
    return arith<Mod>(std::move(a), std::move(b), "%");
}
Expr operator-(Expr a) {
    if (!a.defined()) user_error("unary - applied to an undefined expression");
    Expr zero = make_zero(a.type().is_bool() ? Int(32, a.type().lanes) : a.type());
    return zero - std::move(a);
}
Expr operator==(Expr a, Expr b) {
    return compare_op<EQ>(std::move(a), std::move(b), "==");
}
Expr operator!=(Expr a, Expr b) {
    return compare_op<NE>(std::move(a), std::move(b), "!=");
}
Expr operator<(Expr a, Expr b) {
    return compare_op<LT>(std::move(a), std::move(b), "<");
}
Expr operator<=(Expr a, Expr b) {
    return compare_op<LE>(std::move(a), std::move(b), "<=");
}
Expr operator>(Expr a, Expr b) {
    return compare_op<GT>(std::move(a), std::move(b), ">");
}
Expr operator>=(Expr a, Expr b) {
    return compare_op<GE>(std::move(a), std::move(b), ">=");
}
Expr operator&&(Expr a, Expr b) {
    a = to_bool(std::move(a), "&&");
    b = to_bool(std::move(b), "&&");
    match_types(a, b);
    return And::make(std::move(a), std::move(b));
}
Expr operator||(Expr a, Expr b) {
    a = to_bool(std::move(a), "||");
    b = to_bool(std::move(b), "||");
    match_types(a, b);
    return Or::make(std::move(a), std::move(b));
}
Expr operator!(Expr a) {
    return Not::make(to_bool(std::move(a), "!"));
}

Expr &operator+=(Expr &a, Expr b) {
    return a = a + std::move(b);
}
Expr &operator-=(Expr &a, Expr b) {
    return a = a - std::move(b);
}
Expr &operator*=(Expr &a, Expr b) {
    return a = a * std::move(b);
}
Expr &operator/=(Expr &a, Expr b) {
    return a = a / std::move(b);
}

#define KILN_MIXED_OPERATOR(op)                                                                    \
    Expr operator op(Expr a, int b) {                                                              \
        check_arith(a, a, #op);                                                                    \
        Expr lb = literal_like(a, int64_t(b), #op, false);                                         \
        return std::move(a) op lb;                                                                 \
    }                                                                                              \
    Expr operator op(int a, Expr b) {                                                              \
        check_arith(b, b, #op);                                                                    \
        Expr la = literal_like(b, int64_t(a), #op, true);                                          \
        return la op std::move(b);                                                                 \
    }                                                                                              \
    Expr operator op(Expr a, double b) {                                                           \
        check_arith(a, a, #op);                                                                    \
        Expr lb = literal_like(a, b);                                                              \
        return std::move(a) op lb;                                                                 \
    }                                                                                              \
    Expr operator op(double a, Expr b) {                                                           \
        check_arith(b, b, #op);                                                                    \
        Expr la = literal_like(b, a);                                                              \
        return la op std::move(b);                                                                 \
    }                                                                                              \
    Expr operator op(Expr a, float b) {                                                            \
        /* NOLINTNEXTLINE(bugprone-macro-parentheses): op is an operator token, not an operand */  \
        return std::move(a) op double(b);                                                          \
    }                                                                                              \
    Expr operator op(float a, Expr b) {                                                            \
        return double(a) op std::move(b);                                                          \
    }
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

namespace {
template <typename Node>
Expr min_or_max(Expr a, Expr b, const char *op) {
    check_arith(a, b, op);
    match_types(a, b);
    Type t = a.type();
    if (!t.is_bfloat()) return Node::make(std::move(a), std::move(b));
    return cast(t, Node::make(widened(std::move(a)), widened(std::move(b))));
}
} // namespace

Expr min(Expr a, Expr b) {
    return min_or_max<Min>(std::move(a), std::move(b), "min");
}
Expr max(Expr a, Expr b) {
    return min_or_max<Max>(std::move(a), std::move(b), "max");
}
Expr min(Expr a, int b) {
    check_arith(a, a, "min");
    Expr lb = literal_like(a, int64_t(b), "min", false);
    return min(std::move(a), lb);
}
Expr max(Expr a, int b) {
    check_arith(a, a, "max");
    Expr lb = literal_like(a, int64_t(b), "max", false);
    return max(std::move(a), lb);
}
Expr min(int a, Expr b) {
    check_arith(b, b, "min");
    Expr la = literal_like(b, int64_t(a), "min", true);
    return min(la, std::move(b));
}
Expr max(int a, Expr b) {
    check_arith(b, b, "max");
    Expr la = literal_like(b, int64_t(a), "max", true);
    return max(la, std::move(b));
}
Expr min(Expr a, double b) {
    check_arith(a, a, "min");
    Expr lb = literal_like(a, b);
    return min(std::move(a), lb);
}
Expr max(Expr a, double b) {
    check_arith(a, a, "max");
    Expr lb = literal_like(a, b);
    return max(std::move(a), lb);
}
Expr min(double a, Expr b) {
    check_arith(b, b, "min");
    Expr la = literal_like(b, a);
    return min(la, std::move(b));
}
Expr max(double a, Expr b) {
    check_arith(b, b, "max");
    Expr la = literal_like(b, a);
    return max(la, std::move(b));
}
Expr min(Expr a, float b) {
    return min(std::move(a), double(b));
}
Expr max(Expr a, float b) {
    return max(std::move(a), double(b));
}
Expr min(float a, Expr b) {
    return min(double(a), std::move(b));
}
Expr max(float a, Expr b) {
    return max(double(a), std::move(b));
}

Expr clamp(Expr e, Expr lo, Expr hi) {
    if (!e.defined() || !lo.defined() || !hi.defined()) {
        user_error("clamp applied to an undefined expression");
    }
    // Constant bounds are C++ numbers: they must fit in e's type rather than wrap into it.
    for (const Expr &bound : {lo, hi}) {
        auto c = as_const_int(bound);
        Type t = e.type().element_of();
        if (c && t.is_int_or_uint() && !t.can_represent(*c)) {
            std::string ex = to_string(e);
            user_error("clamp(", ex, ", ", lo, ", ", hi, "): the bound ", *c, " does not fit in ",
                       t, ", the type of ", ex, "; cast ", ex, " to a wider type first, e.g. cast<",
                       t.bits < 32 ? "int" : "int64_t", ">(", ex, ")");
        }
    }
    Type t = e.type();
    lo = widened(cast(t, std::move(lo)));
    hi = widened(cast(t, std::move(hi)));
    return cast(t, Max::make(Min::make(widened(std::move(e)), std::move(hi)), std::move(lo)));
}

Expr select(Expr condition, Expr true_value, Expr false_value) {
    if (!condition.defined() || !true_value.defined() || !false_value.defined()) {
        user_error("select applied to an undefined expression");
    }
    if (!condition.type().is_bool()) {
        user_error("select: condition ", condition, " has type ", condition.type(),
                   ", expected bool; compare it with zero first, e.g. select(", condition,
                   " != 0, ...)");
    }
    match_types(true_value, false_value);
    int cond_lanes = condition.type().lanes, value_lanes = true_value.type().lanes;
    if (cond_lanes > 1 && value_lanes > 1 && cond_lanes != value_lanes) {
        user_error("select: condition ", condition, " has ", cond_lanes, " lanes, but the values ",
                   true_value, " and ", false_value, " have ", value_lanes);
    }
    if (condition.type().is_scalar() && true_value.type().is_vector()) {
        condition = Broadcast::make(condition, true_value.type().lanes);
    } else if (condition.type().is_vector() && true_value.type().is_scalar()) {
        true_value = Broadcast::make(true_value, condition.type().lanes);
        false_value = Broadcast::make(false_value, condition.type().lanes);
    }
    return Select::make(std::move(condition), std::move(true_value), std::move(false_value));
}

namespace {
Expr float_arg(Expr e, const char *fn) {
    if (!e.defined()) user_error(fn, " applied to an undefined expression");
    if (e.type().is_float()) return e;
    Type t = Float(32, e.type().lanes); // before e is moved into the call
    return cast(t, std::move(e));
}

Expr math_call(const char *fn, std::vector<Expr> args) {
    Type t = args[0].type();
    for (Expr &a : args)
        a = widened(std::move(a));
    Type computed = args[0].type();
    return cast(t, Call::make(computed, fn, std::move(args), Call::Math));
}
} // namespace

Expr abs(Expr e) {
    if (!e.defined()) user_error("abs applied to an undefined expression");
    if (e.type().is_float()) return math_call("abs", {std::move(e)});
    if (e.type().is_uint() || e.type().is_bool()) return e;
    Expr zero = make_zero(e.type());
    return Select::make(LT::make(e, zero), Sub::make(zero, e), e);
}

Expr exp(Expr e) {
    return math_call("exp", {float_arg(std::move(e), "exp")});
}
Expr log(Expr e) {
    return math_call("log", {float_arg(std::move(e), "log")});
}
Expr sqrt(Expr e) {
    return math_call("sqrt", {float_arg(std::move(e), "sqrt")});
}
Expr sin(Expr e) {
    return math_call("sin", {float_arg(std::move(e), "sin")});
}
Expr cos(Expr e) {
    return math_call("cos", {float_arg(std::move(e), "cos")});
}
Expr tanh(Expr e) {
    return math_call("tanh", {float_arg(std::move(e), "tanh")});
}
Expr floor(Expr e) {
    return math_call("floor", {float_arg(std::move(e), "floor")});
}
Expr ceil(Expr e) {
    return math_call("ceil", {float_arg(std::move(e), "ceil")});
}
Expr round(Expr e) {
    return math_call("round", {float_arg(std::move(e), "round")});
}

Expr pow(Expr base, Expr exponent) {
    base = float_arg(std::move(base), "pow");
    exponent = float_arg(std::move(exponent), "pow");
    match_types(base, exponent);
    return math_call("pow", {std::move(base), std::move(exponent)});
}

Expr fma(Expr a, Expr b, Expr c) {
    a = float_arg(std::move(a), "fma");
    b = float_arg(std::move(b), "fma");
    c = float_arg(std::move(c), "fma");
    match_types(a, b);
    match_types(a, c);
    match_types(b, c);
    return math_call("fma", {std::move(a), std::move(b), std::move(c)});
}

Expr likely(Expr e) {
    if (!e.defined()) user_error("likely applied to an undefined expression");
    Type t = e.type();
    return Call::make(t, intrinsic::likely, {std::move(e)}, Call::Intrinsic);
}

int64_t div_euclid(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return int64_t(0 - uint64_t(a)); // wraps for INT64_MIN instead of trapping
    int64_t q = a / b, r = a % b;
    if (r < 0) q = b > 0 ? q - 1 : q + 1;
    return q;
}

int64_t mod_euclid(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r < 0) r = b > 0 ? r + b : r - b;
    return r;
}

} // namespace kiln
