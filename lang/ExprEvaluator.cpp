#include "lang/ExprEvaluator.h"

#include <bit>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"

namespace kiln {

namespace {

// The low `bits` bits of v, sign-extended (signed) or zero-extended (unsigned) to 64 bits.
uint64_t wrap_bits(uint64_t v, int bits, bool is_signed) {
    if (bits >= 64) return v;
    uint64_t mask = (uint64_t(1) << bits) - 1;
    v &= mask;
    if (is_signed && (v >> (bits - 1))) v |= ~mask;
    return v;
}

// Float to integer conversion truncates toward zero. Out-of-range values saturate to the type's
// limits and NaN gives zero (what LLVM's fptosi.sat does), so the result is always defined.
uint64_t float_to_int_bits(double f, Type t) {
    if (std::isnan(f)) return 0;
    double v = std::trunc(f);
    if (t.is_int()) {
        double limit = std::ldexp(1.0, t.bits - 1); // 2^(bits-1), exact in a double
        if (v < -limit) return uint64_t(t.min_int());
        if (v >= limit) return uint64_t(t.max_int());
        return uint64_t(int64_t(v));
    }
    double limit = std::ldexp(1.0, t.bits);
    if (v <= 0) return 0;
    if (v >= limit) return t.max_uint();
    return uint64_t(v);
}

double round_to(Type t, double v) {
    return t.round_float(v);
}

bool is_signed(Type t) {
    return t.is_int();
}

} // namespace

Value Value::make_int(Type t, int64_t v) {
    internal_assert(t.is_scalar(), "Value::make_int: type ", t, " is not scalar");
    // Convert directly from the 64-bit integer: going through double first could round twice.
    if (t.is_float()) return make_float(t, t.bits <= 32 ? double(float(v)) : double(v));
    Value r;
    r.type = t;
    if (t.is_bool()) {
        r.bits = v != 0;
        return r;
    }
    r.bits = wrap_bits(uint64_t(v), t.bits, is_signed(t));
    return r;
}

Value Value::make_uint(Type t, uint64_t v) {
    internal_assert(t.is_scalar(), "Value::make_uint: type ", t, " is not scalar");
    if (t.is_float()) return make_float(t, t.bits <= 32 ? double(float(v)) : double(v));
    return make_int(t, int64_t(v));
}

Value Value::make_float(Type t, double v) {
    internal_assert(t.is_scalar() && t.is_float(), "Value::make_float: type ", t,
                    " is not a scalar float");
    Value r;
    r.type = t;
    r.f = round_to(t, v);
    return r;
}

Value Value::make_bool(bool v) {
    return make_int(Bool(), v);
}

Value Value::cast_to(Type t) const {
    internal_assert(t.is_scalar(), "Value::cast_to: type ", t, " is not scalar");
    if (t.is_bool()) return make_bool(type.is_float() ? f != 0 : bits != 0);
    if (type.is_float()) {
        if (t.is_float()) return make_float(t, f);
        Value r;
        r.type = t;
        r.bits = float_to_int_bits(f, t);
        return r;
    }
    if (t.is_float()) {
        return type.is_int() ? make_int(t, as_int()) : make_uint(t, bits);
    }
    return make_int(t, int64_t(bits));
}

double Value::as_double() const {
    if (type.is_float()) return f;
    if (type.is_int()) return double(as_int());
    return double(bits);
}

bool Value::operator==(const Value &o) const {
    if (type != o.type) return false;
    if (type.is_float()) {
        if (std::isnan(f) || std::isnan(o.f)) return std::isnan(f) && std::isnan(o.f);
        // Bit for bit, so that -0.0 and 0.0 differ (NaNs are equal to each other above).
        return std::bit_cast<uint64_t>(f) == std::bit_cast<uint64_t>(o.f);
    }
    return bits == o.bits;
}

std::string Value::to_string() const {
    std::ostringstream s;
    if (type.is_bool()) return bits ? "true" : "false";
    if (type.is_float()) {
        s << std::setprecision(type.bits <= 32 ? 9 : 17) << f;
        if (type.bits == 32) s << "f";
        if (type.is_bfloat()) s << "bf";
        return s.str();
    }
    if (type != Int(32)) s << "(" << type << ")";
    if (type.is_int()) {
        s << as_int();
    } else {
        s << bits;
    }
    return s.str();
}

std::ostream &operator<<(std::ostream &s, const Value &v) {
    return s << v.to_string();
}

namespace {

// Integer operations work on the 64-bit payloads and wrap the result into the type.
Value int_binary(IRNodeType op, Type t, const Value &a, const Value &b) {
    uint64_t x = a.bits, y = b.bits;
    bool s = is_signed(t);
    switch (op) {
    case IRNodeType::Add:
        return Value::make_uint(t, x + y);
    case IRNodeType::Sub:
        return Value::make_uint(t, x - y);
    case IRNodeType::Mul:
        return Value::make_uint(t, x * y);
    case IRNodeType::Div:
        if (s) return Value::make_int(t, div_euclid(int64_t(x), int64_t(y)));
        return Value::make_uint(t, y == 0 ? 0 : x / y);
    case IRNodeType::Mod:
        if (s) return Value::make_int(t, mod_euclid(int64_t(x), int64_t(y)));
        return Value::make_uint(t, y == 0 ? 0 : x % y);
    case IRNodeType::Min:
        if (s) return int64_t(x) < int64_t(y) ? a : b;
        return x < y ? a : b;
    case IRNodeType::Max:
        if (s) return int64_t(x) > int64_t(y) ? a : b;
        return x > y ? a : b;
    default:
        break;
    }
    internal_error("int_binary: unexpected operator ", node_type_name(op));
}

// Float operations compute in double and round to the declared precision; for float32 this is
// exactly the correctly rounded float32 result of + - * /.
Value float_binary(IRNodeType op, Type t, const Value &a, const Value &b) {
    double x = a.f, y = b.f;
    switch (op) {
    case IRNodeType::Add:
        return Value::make_float(t, x + y);
    case IRNodeType::Sub:
        return Value::make_float(t, x - y);
    case IRNodeType::Mul:
        return Value::make_float(t, x * y);
    case IRNodeType::Div:
        return Value::make_float(t, x / y);
    case IRNodeType::Mod: {
        // a - b * floor(a / b), each step rounded to the type, as Halide defines float modulo.
        double q = round_to(t, x / y);
        double p = round_to(t, y * std::floor(q));
        return Value::make_float(t, x - p);
    }
    // min(a, b) is select(a < b, a, b) and max(a, b) is select(a > b, a, b), also for NaN.
    case IRNodeType::Min:
        return x < y ? a : b;
    case IRNodeType::Max:
        return x > y ? a : b;
    default:
        break;
    }
    internal_error("float_binary: unexpected operator ", node_type_name(op));
}

bool compare_values(IRNodeType op, const Value &a, const Value &b) {
    int c; // -1, 0 or 1; 2 means unordered (a NaN)
    if (a.type.is_float()) {
        if (std::isnan(a.f) || std::isnan(b.f)) {
            c = 2;
        } else {
            c = a.f < b.f ? -1 : (a.f > b.f ? 1 : 0);
        }
    } else if (a.type.is_int()) {
        c = a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    } else {
        c = a.bits < b.bits ? -1 : (a.bits > b.bits ? 1 : 0);
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
        break;
    }
    internal_error("compare_values: unexpected operator ", node_type_name(op));
}

Value math_call(const Call *op, const std::vector<Value> &args) {
    Type t = op->type.element_of();
    const std::string &n = op->name;
    auto arg = [&](size_t i) {
        internal_assert(i < args.size(), "math call ", n, " needs at least ", i + 1, " arguments");
        return args[i].f;
    };
    if (n == intrinsic::abs && !args.empty() && !args[0].type.is_float()) {
        // Integer abs has an unsigned result, so abs(INT_MIN) is representable.
        const Value &a = args[0];
        uint64_t m = a.type.is_int() && a.as_int() < 0 ? 0 - a.bits : a.bits;
        return Value::make_uint(t, m);
    }
    internal_assert(t.is_float(), "math call ", n, " of non-float type ", op->type);
    for (const Value &a : args) {
        internal_assert(a.type == t, "math call ", n, ": argument of type ", a.type,
                        " for result type ", t);
    }
    bool f32 = t.bits == 32;
    double r;
    if (n == "exp") {
        r = f32 ? std::exp(float(arg(0))) : std::exp(arg(0));
    } else if (n == "log") {
        r = f32 ? std::log(float(arg(0))) : std::log(arg(0));
    } else if (n == "sqrt") {
        r = f32 ? std::sqrt(float(arg(0))) : std::sqrt(arg(0));
    } else if (n == "pow") {
        r = f32 ? std::pow(float(arg(0)), float(arg(1))) : std::pow(arg(0), arg(1));
    } else if (n == "sin") {
        r = f32 ? std::sin(float(arg(0))) : std::sin(arg(0));
    } else if (n == "cos") {
        r = f32 ? std::cos(float(arg(0))) : std::cos(arg(0));
    } else if (n == "tanh") {
        r = f32 ? std::tanh(float(arg(0))) : std::tanh(arg(0));
    } else if (n == "floor") {
        r = std::floor(arg(0));
    } else if (n == "ceil") {
        r = std::ceil(arg(0));
    } else if (n == "round") {
        r = std::nearbyint(arg(0)); // half to even in the default rounding mode
    } else if (n == "abs") {
        r = std::fabs(arg(0));
    } else if (n == "fma") {
        r = f32 ? std::fma(float(arg(0)), float(arg(1)), float(arg(2)))
                : std::fma(arg(0), arg(1), arg(2));
    } else {
        internal_error("ExprEvaluator: unknown math function ", n);
    }
    return Value::make_float(t, r);
}

// Restores a variable binding when a Let body has been evaluated, also when it throws.
class BindingGuard {
public:
    BindingGuard(std::map<std::string, Value> &vars, const std::string &name, Value v)
        : vars(vars), name(name) {
        auto it = vars.find(name);
        if (it != vars.end()) previous = it->second;
        vars[name] = v;
    }
    ~BindingGuard() {
        if (previous) {
            vars[name] = *previous;
        } else {
            vars.erase(name);
        }
    }
    BindingGuard(const BindingGuard &) = delete;
    BindingGuard &operator=(const BindingGuard &) = delete;

private:
    std::map<std::string, Value> &vars;
    const std::string &name;
    std::optional<Value> previous;
};

} // namespace

Value ExprEvaluator::eval(const Expr &e, int lane) {
    internal_assert(e.defined(), "ExprEvaluator: undefined expression");
    Type t = e.type();
    // A scalar inside a vector expression (a select condition, a let value) has one lane,
    // whatever lane of the vector is being evaluated.
    if (t.is_scalar()) lane = 0;
    internal_assert(lane >= 0 && lane < t.lanes, "ExprEvaluator: lane ", lane, " of ", e, " with ",
                    t.lanes, " lanes");
    Type et = t.element_of();
    switch (e->node_type) {
    case IRNodeType::IntImm:
        return Value::make_int(et, e.as<IntImm>()->value);
    case IRNodeType::UIntImm:
        return Value::make_uint(et, e.as<UIntImm>()->value);
    case IRNodeType::FloatImm:
        return Value::make_float(et, e.as<FloatImm>()->value);
    case IRNodeType::Cast:
        return eval(e.as<Cast>()->value, lane).cast_to(et);
    case IRNodeType::Variable: {
        const auto *op = e.as<Variable>();
        auto it = vars.find(op->name);
        internal_assert(it != vars.end(), "ExprEvaluator: variable '", op->name, "' is unbound");
        internal_assert(it->second.type == et, "ExprEvaluator: variable '", op->name, "' of type ",
                        t, " is bound to a value of type ", it->second.type);
        return it->second;
    }
#define KILN_EVAL_ARITH(Name)                                                                      \
    case IRNodeType::Name: {                                                                       \
        const auto *op = e.as<Name>();                                                             \
        Value a = eval(op->a, lane), b = eval(op->b, lane);                                        \
        if (et.is_float()) return float_binary(IRNodeType::Name, et, a, b);                        \
        return int_binary(IRNodeType::Name, et, a, b);                                             \
    }
        KILN_EVAL_ARITH(Add)
        KILN_EVAL_ARITH(Sub)
        KILN_EVAL_ARITH(Mul)
        KILN_EVAL_ARITH(Div)
        KILN_EVAL_ARITH(Mod)
        KILN_EVAL_ARITH(Min)
        KILN_EVAL_ARITH(Max)
#undef KILN_EVAL_ARITH
#define KILN_EVAL_CMP(Name)                                                                        \
    case IRNodeType::Name: {                                                                       \
        const auto *op = e.as<Name>();                                                             \
        Value a = eval(op->a, lane), b = eval(op->b, lane);                                        \
        return Value::make_bool(compare_values(IRNodeType::Name, a, b));                           \
    }
        KILN_EVAL_CMP(EQ)
        KILN_EVAL_CMP(NE)
        KILN_EVAL_CMP(LT)
        KILN_EVAL_CMP(LE)
        KILN_EVAL_CMP(GT)
        KILN_EVAL_CMP(GE)
#undef KILN_EVAL_CMP
    case IRNodeType::And: {
        const auto *op = e.as<And>();
        bool a = eval(op->a, lane).as_bool(), b = eval(op->b, lane).as_bool();
        return Value::make_bool(a && b);
    }
    case IRNodeType::Or: {
        const auto *op = e.as<Or>();
        bool a = eval(op->a, lane).as_bool(), b = eval(op->b, lane).as_bool();
        return Value::make_bool(a || b);
    }
    case IRNodeType::Not:
        return Value::make_bool(!eval(e.as<Not>()->a, lane).as_bool());
    case IRNodeType::Select: {
        const auto *op = e.as<Select>();
        bool c = eval(op->condition, lane).as_bool();
        // Both branches are evaluated, so that on_load sees the loads of the untaken one too.
        Value tv = eval(op->true_value, lane), fv = eval(op->false_value, lane);
        return c ? tv : fv;
    }
    case IRNodeType::Load: {
        const auto *op = e.as<Load>();
        internal_assert(on_load != nullptr, "ExprEvaluator: load from '", op->name,
                        "' without an on_load handler");
        if (op->predicate.defined() && !eval(op->predicate, lane).as_bool()) {
            return Value::make_int(et, 0); // a masked lane is not read
        }
        Value index = eval(op->index, lane);
        Value v = on_load(op, index.as_int());
        internal_assert(v.type == et, "ExprEvaluator: on_load for '", op->name,
                        "' returned a value of type ", v.type, ", expected ", et);
        return v;
    }
    case IRNodeType::Ramp: {
        const auto *op = e.as<Ramp>();
        Value base = eval(op->base, 0), stride = eval(op->stride, 0);
        Value offset = et.is_float() ? Value::make_float(et, double(lane) * stride.f)
                                     : Value::make_uint(et, uint64_t(lane) * stride.bits);
        if (et.is_float()) return float_binary(IRNodeType::Add, et, base, offset);
        return int_binary(IRNodeType::Add, et, base, offset);
    }
    case IRNodeType::Broadcast:
        return eval(e.as<Broadcast>()->value, 0);
    case IRNodeType::Let: {
        const auto *op = e.as<Let>();
        BindingGuard guard(vars, op->name, eval(op->value, lane));
        return eval(op->body, lane);
    }
    case IRNodeType::Call: {
        const auto *op = e.as<Call>();
        if (op->call_type == Call::Intrinsic && op->name == intrinsic::likely) {
            internal_assert(op->args.size() == 1, "likely takes one argument, got ",
                            op->args.size());
            return eval(op->args[0], lane);
        }
        std::vector<Value> args;
        args.reserve(op->args.size());
        for (const Expr &a : op->args)
            args.push_back(eval(a, lane));
        if (op->call_type == Call::Math ||
            (op->call_type == Call::Intrinsic &&
             (op->name == intrinsic::abs || op->name == intrinsic::fma))) {
            return math_call(op, args);
        }
        internal_assert(op->call_type == Call::Func || op->call_type == Call::Image,
                        "ExprEvaluator: unknown intrinsic '", op->name, "'");
        internal_assert(on_call != nullptr, "ExprEvaluator: call to '", op->name,
                        "' without an on_call handler");
        Value v = on_call(op, args);
        internal_assert(v.type == et, "ExprEvaluator: on_call for '", op->name,
                        "' returned a value of type ", v.type, ", expected ", et);
        return v;
    }
    default:
        break;
    }
    internal_error("ExprEvaluator: cannot evaluate ", node_type_name(e->node_type));
}

std::vector<Value> ExprEvaluator::eval_lanes(const Expr &e) {
    internal_assert(e.defined(), "ExprEvaluator: undefined expression");
    std::vector<Value> out;
    out.reserve(e.type().lanes);
    for (int i = 0; i < e.type().lanes; i++)
        out.push_back(eval(e, i));
    return out;
}

} // namespace kiln
