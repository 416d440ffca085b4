#include "codegen/CodeGenDeviceExpr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "lang/BFloat16.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"

namespace kiln::device {

std::string wrap(const Code &c, int loosest) {
    return c.precedence > loosest ? "(" + c.text + ")" : c.text;
}

std::string type_suffix(Type t) {
    switch (t.code) {
    case Type::Int:
        return "i" + std::to_string(t.bits);
    case Type::UInt:
        return "u" + std::to_string(t.bits);
    case Type::Float:
        return "f" + std::to_string(t.bits);
    case Type::Bool:
        return "b";
    case Type::BFloat:
        return "bf" + std::to_string(t.bits);
    }
    return "?";
}

// ---- Preamble ------------------------------------------------------------------------------

const std::string &Preamble::use(const std::string &name, const std::string &definition) {
    return definitions.emplace(name, definition).first->first;
}

void Preamble::use_type(Type t) {
    if (t.is_bfloat()) t = UInt(16); // held as its bits
    if (t.is_float() && t.bits == 64) fp64 = true;
    bool plain = t.is_bool() || t.is_float() || (t.is_int() && t.bits == 32);
    if (api == GpuApi::CUDA && !plain) typedefs.insert(int(t.code) * 100 + t.bits);
}

std::string Preamble::text() const {
    std::string s;
    if (api == GpuApi::OpenCL) {
        // The IR rounds every operation; OpenCL C would otherwise contract a * b + c into fma.
        s += "#pragma OPENCL FP_CONTRACT OFF\n";
        if (fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    } else {
        // No header is included (NVRTC compiles this anywhere), so the stdint names are ours.
        static const std::pair<int, const char *> names[] = {
            {Type::Int * 100 + 8, "typedef signed char int8_t;"},
            {Type::Int * 100 + 16, "typedef short int16_t;"},
            {Type::Int * 100 + 64, "typedef long long int64_t;"},
            {Type::UInt * 100 + 8, "typedef unsigned char uint8_t;"},
            {Type::UInt * 100 + 16, "typedef unsigned short uint16_t;"},
            {Type::UInt * 100 + 32, "typedef unsigned int uint32_t;"},
            {Type::UInt * 100 + 64, "typedef unsigned long long uint64_t;"},
        };
        for (const auto &[key, line] : names) {
            if (typedefs.count(key)) s += std::string(line) + "\n";
        }
    }
    for (const auto &[name, d] : definitions)
        s += "\n" + d;
    return s;
}

// ---- Names ---------------------------------------------------------------------------------

namespace {

bool is_upper_case(const std::string &s) {
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
}

// OpenCL vector type names such as float4 or uchar16.
bool is_vector_type_name(const std::string &s) {
    static const char *scalars[] = {"char", "uchar", "short", "ushort", "int",  "uint",
                                    "long", "ulong", "float", "double", "half", "bool"};
    for (const char *t : scalars) {
        std::string p = t;
        if (s.size() > p.size() && s.compare(0, p.size(), p) == 0 &&
            std::all_of(s.begin() + p.size(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return true;
    }
    return false;
}

// Prefixes of names that the dialects or kiln's helpers use.
bool has_reserved_prefix(const std::string &s) {
    static const char *prefixes[] = {"kiln_",  "__",   "convert_", "as_",   "vload",
                                     "vstore", "get_", "atomic_",  "atom_", "async_"};
    for (const char *p : prefixes) {
        if (s.compare(0, std::string(p).size(), p) == 0) return true;
    }
    return false;
}

} // namespace

bool NameTable::is_reserved(const std::string &name) {
    static const std::set<std::string> words = {
        // C, C++ and the alternative operator spellings
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
        "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
        "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
        "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "class",
        "namespace", "template", "typename", "this", "new", "delete", "operator", "private",
        "public", "protected", "virtual", "friend", "try", "catch", "throw", "using", "explicit",
        "mutable", "nullptr", "constexpr", "decltype", "noexcept", "static_assert", "alignas",
        "alignof", "thread_local", "char16_t", "char32_t", "wchar_t", "export", "and", "or", "not",
        "xor", "bitand", "bitor", "compl", "not_eq", "and_eq", "or_eq", "xor_eq", "asm",
        "const_cast", "dynamic_cast", "reinterpret_cast", "static_cast", "typeid", "main",
        "concept", "requires", "co_await", "co_return", "co_yield",
        // OpenCL C
        "kernel", "global", "local", "constant", "private", "read_only", "write_only", "read_write",
        "uniform", "pipe", "half", "uchar", "ushort", "uint", "ulong", "size_t", "ptrdiff_t",
        "intptr_t", "uintptr_t", "image1d_t", "image2d_t", "image3d_t", "sampler_t", "event_t",
        "barrier", "mem_fence", "read_mem_fence", "write_mem_fence", "select", "vec_step", "printf",
        "prefetch", "shuffle", "shuffle2",
        // CUDA
        "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "int8_t", "int16_t",
        "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
        // math functions of both dialects
        "exp", "expf", "exp2", "exp10", "expm1", "log", "logf", "log2", "log10", "log1p", "sqrt",
        "sqrtf", "rsqrt", "cbrt", "pow", "powf", "pown", "powr", "sin", "sinf", "cos", "cosf",
        "tan", "tanf", "tanh", "tanhf", "sinh", "cosh", "asin", "acos", "atan", "atan2", "floor",
        "floorf", "ceil", "ceilf", "round", "roundf", "rint", "rintf", "trunc", "truncf", "fabs",
        "fabsf", "fma", "fmaf", "fmin", "fmax", "fmod", "mad", "min", "max", "abs", "clamp", "sign",
        "mix", "step", "isnan", "isinf", "isfinite", "signbit", "ldexp", "frexp", "hypot", "nan",
        "copysign", "isless", "any", "all", "bitselect", "upsample", "remainder", "mul24", "mad24",
        "hadd", "rotate", "clz", "popcount", "native_exp", "half_exp", "dot", "cross", "length",
        "normalize", "sincos", "modf", "fract", "erf", "erfc", "lgamma", "tgamma"};
    return words.count(name) || is_upper_case(name) || is_vector_type_name(name) ||
           has_reserved_prefix(name);
}

std::string NameTable::fresh(const std::string &ir_name) {
    std::string base;
    for (char c : ir_name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        base += ok ? c : '_';
    }
    if (base.empty() || (base[0] >= '0' && base[0] <= '9')) base = "v" + base;
    // A reserved prefix, or all capitals (macro-like: "A", "B_PANEL"), would stay reserved with
    // any "_<n>" suffix; a lowercase prefix makes the spelling free.
    if (has_reserved_prefix(base) || is_upper_case(base)) base = "v_" + base;
    std::string name = base;
    for (int i = 1; is_reserved(name) || used.count(name); i++) {
        name = base + "_" + std::to_string(i);
    }
    used.insert(name);
    return name;
}

void NameTable::pop(const std::string &ir_name) {
    auto it = bound.find(ir_name);
    internal_assert(it != bound.end() && !it->second.empty(), "device code: unbalanced scope of '",
                    ir_name, "'");
    it->second.pop_back();
}

const std::string *NameTable::find(const std::string &ir_name) const {
    auto it = bound.find(ir_name);
    if (it == bound.end() || it->second.empty()) return nullptr;
    return &it->second.back();
}

// ---- Types and literals ----------------------------------------------------------------------

std::string ExprPrinter::type_name(Type t) {
    // bfloat16 is held as its bits, in memory and in registers: C has no type for it (CUDA's
    // __nv_bfloat16 needs a header).
    if (t.is_bfloat()) return type_name(UInt(16));
    preamble.use_type(t);
    if (t.is_bool()) return "bool";
    if (t.is_float()) return t.bits == 32 ? "float" : "double";
    if (cuda()) {
        if (t.is_int() && t.bits == 32) return "int";
        return std::string(t.is_int() ? "int" : "uint") + std::to_string(t.bits) + "_t";
    }
    static const char *names[] = {"char", "short", "int", "long"};
    int i = t.bits == 8 ? 0 : t.bits == 16 ? 1 : t.bits == 32 ? 2 : 3;
    return std::string(t.is_uint() ? "u" : "") + names[i];
}

std::string ExprPrinter::memory_type_name(Type t) {
    if (t.is_bool() && !cuda()) return "uchar";
    return type_name(t);
}

std::string ExprPrinter::unsigned_name(Type t) {
    return type_name(UInt(t.bits == 64 ? 64 : 32));
}

Code ExprPrinter::int_literal(Type t, int64_t v) {
    if (t.bits < 32) {
        return {"(" + type_name(t) + ")" + std::to_string(v), Unary};
    }
    std::string suffix = t.bits == 64 ? (cuda() ? "LL" : "L") : "";
    if (v == t.min_int()) {
        // The literal of the magnitude would not fit the type.
        return {"(" + std::to_string(v + 1) + suffix + " - 1)", Primary};
    }
    return {std::to_string(v) + suffix, v < 0 ? Unary : Primary};
}

Code ExprPrinter::uint_literal(Type t, uint64_t v) {
    if (t.is_bool()) return {v ? "true" : "false", Primary};
    if (t.bits < 32) return {"(" + type_name(t) + ")" + std::to_string(v), Unary};
    std::string suffix = t.bits == 64 ? (cuda() ? "ull" : "ul") : "u";
    return {std::to_string(v) + suffix, Primary};
}

Code ExprPrinter::float_literal(Type t, double v) {
    if (t.is_bfloat()) {
        // v is a bfloat16 value already (FloatImm rounds it): its bits.
        char bits[16];
        std::snprintf(bits, sizeof(bits), "0x%04x", unsigned(bfloat16_bits_of(float(v))));
        return {"(" + type_name(t) + ")" + bits, Unary};
    }
    type_name(t);
    bool f32 = t.bits == 32;
    if (std::isnan(v) || std::isinf(v)) {
        std::string text;
        if (cuda()) {
            text =
                f32 ? (std::isnan(v) ? "__int_as_float(0x7fffffff)" : "__int_as_float(0x7f800000)")
                    : (std::isnan(v) ? "__longlong_as_double(0x7ff8000000000000LL)"
                                     : "__longlong_as_double(0x7ff0000000000000LL)");
        } else {
            text = std::isnan(v) ? "NAN" : "INFINITY";
            if (!f32) text = "(double)" + text;
        }
        if (std::isinf(v) && v < 0) return {"-" + text, Unary};
        return {text, f32 || cuda() ? Primary : Unary};
    }
    // The shortest text that reads back as the same value in the constant's precision.
    char buf[64];
    auto res = f32 ? std::to_chars(buf, buf + sizeof(buf), float(v))
                   : std::to_chars(buf, buf + sizeof(buf), v);
    std::string s(buf, res.ptr);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    if (f32) s += "f";
    return {s, std::signbit(v) ? Unary : Primary};
}

Code ExprPrinter::literal(const Expr &e) {
    if (const auto *i = e.as<IntImm>()) return int_literal(i->type, i->value);
    if (const auto *u = e.as<UIntImm>()) return uint_literal(u->type, u->value);
    const auto *f = e.as<FloatImm>();
    internal_assert(f, "device code: ", e, " is not a constant");
    return float_literal(f->type, f->value);
}

// ---- Expressions -----------------------------------------------------------------------------

Code ExprPrinter::expr(const Expr &e, int lane) {
    internal_assert(e.defined(), "device code: undefined expression");
    check_no_bfloat16_arithmetic(e);
    if (e.type().is_scalar()) lane = 0;
    switch (e->node_type) {
    case IRNodeType::IntImm:
    case IRNodeType::UIntImm:
    case IRNodeType::FloatImm:
        return literal(e);
    case IRNodeType::Cast:
        return cast(e.as<Cast>(), lane);
    case IRNodeType::Variable:
        return variable(e.as<Variable>(), lane);
    case IRNodeType::Add:
    case IRNodeType::Sub:
    case IRNodeType::Mul:
        return arith(e, lane);
    case IRNodeType::Div:
    case IRNodeType::Mod:
        return div_mod(e, lane);
    case IRNodeType::Min:
    case IRNodeType::Max:
        return min_max(e, lane);
    case IRNodeType::EQ:
        return compare(e.as<EQ>()->a, e.as<EQ>()->b, "==", Equality, lane);
    case IRNodeType::NE:
        return compare(e.as<NE>()->a, e.as<NE>()->b, "!=", Equality, lane);
    case IRNodeType::LT:
        return compare(e.as<LT>()->a, e.as<LT>()->b, "<", Relational, lane);
    case IRNodeType::LE:
        return compare(e.as<LE>()->a, e.as<LE>()->b, "<=", Relational, lane);
    case IRNodeType::GT:
        return compare(e.as<GT>()->a, e.as<GT>()->b, ">", Relational, lane);
    case IRNodeType::GE:
        return compare(e.as<GE>()->a, e.as<GE>()->b, ">=", Relational, lane);
    case IRNodeType::And:
        return logical(e.as<And>()->a, e.as<And>()->b, true, lane);
    case IRNodeType::Or:
        return logical(e.as<Or>()->a, e.as<Or>()->b, false, lane);
    case IRNodeType::Not:
        return {"!" + wrap(expr(e.as<Not>()->a, lane), Unary), Unary};
    case IRNodeType::Select:
        return select(e.as<Select>(), lane);
    case IRNodeType::Load:
        return load(e.as<Load>(), lane);
    case IRNodeType::Ramp:
        return ramp_lane(e.as<Ramp>(), lane);
    case IRNodeType::Broadcast:
        return expr(e.as<Broadcast>()->value, 0);
    case IRNodeType::Let:
        return let(e.as<Let>(), lane);
    case IRNodeType::Call:
        return call(e.as<Call>(), lane);
    default:
        break;
    }
    internal_error("device code: cannot print ", node_type_name(e->node_type));
}

Code ExprPrinter::variable(const Variable *op, int lane) {
    const std::string *name = names.find(op->name);
    internal_assert(name, "device code: variable '", op->name,
                    "' is not in scope (free variables of a kernel must be its scalar arguments)");
    if (op->type.is_vector()) return lane_of(*name, lane);
    return {*name, Primary};
}

namespace {

struct BinaryParts {
    Expr a, b;
    const char *op;
    int precedence;
};

BinaryParts arith_parts(const Expr &e) {
    if (const auto *op = e.as<Add>()) return {op->a, op->b, "+", Additive};
    if (const auto *op = e.as<Sub>()) return {op->a, op->b, "-", Additive};
    const auto *op = e.as<Mul>();
    internal_assert(op, "device code: ", e, " is not + - *");
    return {op->a, op->b, "*", Multiplicative};
}

bool is_arith(const Expr &e) {
    return e.as<Add>() || e.as<Sub>() || e.as<Mul>();
}

} // namespace

// Integer + - * on types that C promotes to int, or whose overflow C leaves undefined, compute in
// the unsigned type of 32 (or 64) bits, where C wraps, and convert back; chains of them stay
// unsigned until the end, so `x * w + y` prints as (int)((uint)x * (uint)w + (uint)y).
Code ExprPrinter::arith(const Expr &e, int lane) {
    Type t = e.type().element_of();
    BinaryParts p = arith_parts(e);
    if (t.is_float() || (t.is_uint() && t.bits >= 32)) {
        Code a = expr(p.a, lane), b = expr(p.b, lane);
        return {wrap(a, p.precedence) + " " + p.op + " " + wrap(b, p.precedence - 1), p.precedence};
    }
    Code u = in_unsigned(e, t, lane);
    return {"(" + type_name(t) + ")" + wrap(u, Primary), Unary};
}

Code ExprPrinter::in_unsigned(const Expr &e, Type t, int lane) {
    if (e.type().is_scalar()) lane = 0;
    if (is_arith(e) && e.type().element_of() == t) {
        BinaryParts p = arith_parts(e);
        Code a = in_unsigned(p.a, t, lane);
        std::optional<int64_t> k = as_const_int(p.b);
        std::string op = p.op;
        Code b;
        if (k && *k < 0 && *k != t.min_int() && op != "*") {
            // x + -3 reads better as x - 3u.
            op = op == "+" ? "-" : "+";
            b = uint_literal(UInt(t.bits == 64 ? 64 : 32), uint64_t(-*k));
        } else {
            b = in_unsigned(p.b, t, lane);
        }
        return {wrap(a, p.precedence) + " " + op + " " + wrap(b, p.precedence - 1), p.precedence};
    }
    Type u = UInt(t.bits == 64 ? 64 : 32);
    if (const auto *b = e.as<Broadcast>()) return in_unsigned(b->value, t, 0);
    if (const auto *r = e.as<Ramp>()) return in_unsigned(ramp_lane_expr(r, lane), t, 0);
    if (const auto *c = e.as<Call>();
        c && c->call_type == Call::Intrinsic &&
        (c->name == intrinsic::gpu_block_id || c->name == intrinsic::gpu_thread_id)) {
        // Block and thread indices are unsigned already (CUDA) or size_t (OpenCL).
        Code id = expr(e, 0);
        std::string text = id.text.substr(std::string("(int)").size());
        if (cuda()) return {text, Primary};
        return {"(" + type_name(u) + ")" + text, Unary};
    }
    if (const auto *l = e.as<Let>()) {
        return with_let(l, [&] { return in_unsigned(l->body, t, lane); });
    }
    if (std::optional<int64_t> k = as_const_int(e); k && (*k >= 0 || t.is_uint())) {
        return uint_literal(u, uint64_t(*k));
    }
    return {"(" + type_name(u) + ")" + wrap(expr(e, lane), Unary), Unary};
}

std::string ExprPrinter::helper_call(const std::string &name, const std::vector<Code> &args) {
    std::string s = name + "(";
    for (size_t i = 0; i < args.size(); i++) {
        if (i) s += ", ";
        s += wrap(args[i], Conditional);
    }
    return s + ")";
}

Code ExprPrinter::div_mod(const Expr &e, int lane) {
    bool is_mod = e.as<Mod>() != nullptr;
    Expr ea = is_mod ? e.as<Mod>()->a : e.as<Div>()->a;
    Expr eb = is_mod ? e.as<Mod>()->b : e.as<Div>()->b;
    Type t = e.type().element_of();
    Code a = expr(ea, lane);
    if (t.is_float() && !is_mod) {
        return {wrap(a, Multiplicative) + " / " + wrap(expr(eb, lane), Multiplicative - 1),
                Multiplicative};
    }
    std::optional<int64_t> k = as_const_int(eb);
    if (t.is_float() || !k || *k <= 0) {
        std::string name = std::string(is_mod ? "kiln_mod_" : "kiln_div_") + type_suffix(t);
        std::string definition =
            t.is_float() ? float_mod_helper(api, name, t, type_name(t))
                         : div_helper(api, name, t, type_name(t), unsigned_name(t), is_mod);
        preamble.use(name, definition);
        return {helper_call(name, {a, expr(eb, lane)}), Primary};
    }
    bool power_of_two = (*k & (*k - 1)) == 0;
    if (power_of_two) {
        // Euclidean division by 2^s is an arithmetic shift and modulo a mask, for any sign of a
        // (narrow types are promoted to int first, sign and all).
        int shift = __builtin_ctzll(uint64_t(*k));
        if (is_mod) {
            Code mask = t.bits < 32   ? Code{std::to_string(*k - 1)}
                        : t.is_uint() ? uint_literal(t, uint64_t(*k - 1))
                                      : int_literal(t, *k - 1);
            return {wrap(a, Shift) + " & " + mask.text, BitAnd};
        }
        if (shift == 0) return a;
        return {wrap(a, Additive) + " >> " + std::to_string(shift), Shift};
    }
    if (t.is_uint()) {
        Code b = uint_literal(t, uint64_t(*k));
        return {wrap(a, Multiplicative) + (is_mod ? " % " : " / ") + wrap(b, Unary),
                Multiplicative};
    }
    std::string name = std::string(is_mod ? "kiln_mod_" : "kiln_div_") + type_suffix(t);
    preamble.use(name, div_helper(api, name, t, type_name(t), unsigned_name(t), is_mod));
    return {helper_call(name, {a, expr(eb, lane)}), Primary};
}

Code ExprPrinter::min_max(const Expr &e, int lane) {
    bool is_min = e.as<Min>() != nullptr;
    Expr ea = is_min ? e.as<Min>()->a : e.as<Max>()->a;
    Expr eb = is_min ? e.as<Min>()->b : e.as<Max>()->b;
    Type t = e.type().element_of();
    if (t.is_bool()) return logical(ea, eb, is_min, lane);
    Code a = expr(ea, lane), b = expr(eb, lane);
    if (t.is_int_or_uint() && t.bits >= 32) {
        // The dialects' own integer min and max (their arguments are exactly int, uint, ...).
        return {helper_call(is_min ? "min" : "max", {a, b}), Primary};
    }
    // Floats: select(a < b, a, b) as the IR defines it, NaN included (fmin would differ); narrow
    // integers: typed helpers, as C has promoted their values to int.
    std::string name = std::string(is_min ? "kiln_min_" : "kiln_max_") + type_suffix(t);
    preamble.use(name, min_max_helper(api, name, type_name(t), is_min));
    return {helper_call(name, {a, b}), Primary};
}

Code ExprPrinter::compare(const Expr &a, const Expr &b, const char *op, int precedence, int lane) {
    Code ca = expr(a, lane), cb = expr(b, lane);
    return {wrap(ca, Additive) + " " + op + " " + wrap(cb, Additive), precedence};
}

Code ExprPrinter::logical(const Expr &a, const Expr &b, bool is_and, int lane) {
    Code ca = expr(a, lane), cb = expr(b, lane);
    if (is_and) return {wrap(ca, LogicalAnd) + " && " + wrap(cb, LogicalAnd), LogicalAnd};
    // a && b inside || gets parentheses for the reader's sake.
    auto operand = [](const Code &c) {
        return wrap(c, c.precedence == LogicalAnd ? Equality : LogicalOr);
    };
    return {operand(ca) + " || " + operand(cb), LogicalOr};
}

Code ExprPrinter::select(const Select *op, int lane) {
    Code c = expr(op->condition, lane), a = expr(op->true_value, lane),
         b = expr(op->false_value, lane);
    return {wrap(c, LogicalOr) + " ? " + wrap(a, LogicalOr) + " : " + wrap(b, Conditional),
            Conditional};
}

Code ExprPrinter::cast(const Cast *op, int lane) {
    return convert(expr(op->value, lane), op->value.type().element_of(), op->type.element_of());
}

Code ExprPrinter::convert(const Code &v, Type from, Type to) {
    if (from == to) return v;
    // bfloat16 converts through float32, both ways (lang/Type.h).
    if (from.is_bfloat()) return convert(bfloat16_to_float(v, 1), Float(32), to);
    if (to.is_bfloat()) return float_to_bfloat16(convert(v, from, Float(32)), 1);
    if (to.is_bool()) {
        Code zero = from.is_float() ? float_literal(from, 0.0) : Code{"0"};
        return {wrap(v, Additive) + " != " + zero.text, Equality};
    }
    if (from.is_float() && !to.is_float()) return float_to_int(v, from, to);
    // Integer casts wrap (C converts modulo 2^bits on every compiler of these dialects); integer
    // to float rounds to nearest even; float64 to float32 rounds to nearest even.
    return {"(" + type_name(to) + ")" + wrap(v, Unary), Unary};
}

Code ExprPrinter::float_to_int(const Code &v, Type from, Type to) {
    if (!cuda()) {
        // OpenCL's saturating conversion truncates, saturates and maps NaN to 0.
        return {"convert_" + type_name(to) + "_sat(" + v.text + ")", Primary};
    }
    std::string name = "kiln_" + type_suffix(from) + "_to_" + type_suffix(to);
    Code lo = to.is_int() ? int_literal(to, to.min_int()) : Code{"0"};
    Code hi = to.is_int() ? int_literal(to, to.max_int()) : uint_literal(to, to.max_uint());
    preamble.use(name, float_to_int_helper(name, from, to, type_name(from), type_name(to), lo.text,
                                           hi.text));
    return {helper_call(name, {v}), Primary};
}

namespace {

/// "" for scalars, "x4" for 4 lanes: the lanes part of a helper's name.
std::string lanes_suffix(int lanes) {
    return lanes == 1 ? "" : "x" + std::to_string(lanes);
}

} // namespace

Code ExprPrinter::bfloat16_conversion(const Code &v, int lanes, bool to_float) {
    auto name_of = [&](Type t) {
        return lanes == 1 ? type_name(t) : vector_type_name(t.with_lanes(lanes));
    };
    const std::string bf16 = "bf16" + lanes_suffix(lanes), f32 = "f32" + lanes_suffix(lanes);
    const std::string name = "kiln_" + (to_float ? bf16 + "_to_" + f32 : f32 + "_to_" + bf16);
    auto helper = to_float ? bfloat16_to_float_helper : float_to_bfloat16_helper;
    preamble.use(
        name, helper(api, name, lanes, name_of(UInt(16)), name_of(UInt(32)), name_of(Float(32))));
    return {helper_call(name, {v}), Primary};
}

Code ExprPrinter::bfloat16_to_float(const Code &v, int lanes) {
    return bfloat16_conversion(v, lanes, true);
}

Code ExprPrinter::float_to_bfloat16(const Code &v, int lanes) {
    return bfloat16_conversion(v, lanes, false);
}

void check_no_bfloat16_arithmetic(const Expr &e) {
    Type operand = e.type();
    switch (e->node_type) {
    case IRNodeType::Add:
    case IRNodeType::Sub:
    case IRNodeType::Mul:
    case IRNodeType::Div:
    case IRNodeType::Mod:
    case IRNodeType::Min:
    case IRNodeType::Max:
    case IRNodeType::Ramp:
        break;
    case IRNodeType::EQ:
        operand = e.as<EQ>()->a.type();
        break;
    case IRNodeType::NE:
        operand = e.as<NE>()->a.type();
        break;
    case IRNodeType::LT:
        operand = e.as<LT>()->a.type();
        break;
    case IRNodeType::LE:
        operand = e.as<LE>()->a.type();
        break;
    case IRNodeType::GT:
        operand = e.as<GT>()->a.type();
        break;
    case IRNodeType::GE:
        operand = e.as<GE>()->a.type();
        break;
    case IRNodeType::Call: {
        const auto *c = e.as<Call>();
        bool math =
            c->call_type == Call::Math || c->name == intrinsic::abs || c->name == intrinsic::fma;
        if (!math) return;
        if (!c->args.empty() && c->args[0].type().is_bfloat()) operand = c->args[0].type();
        break;
    }
    default:
        return;
    }
    internal_assert(!operand.is_bfloat(), "device code: ", e,
                    " computes on bfloat16, which only Load, Store, Cast, Select and Broadcast "
                    "may hold (the operators compute on it in float32: lang/Type.h)");
}

const Memory &ExprPrinter::find_memory(const std::string &ir_name) const {
    auto it = memory.find(ir_name);
    internal_assert(it != memory.end() && !it->second.empty(), "device code: '", ir_name,
                    "' is neither a buffer argument of the kernel nor an allocation in scope");
    return it->second.back();
}

Code ExprPrinter::load(const Load *op, int lane) {
    if (std::optional<Code> c = cuda_vector_load(op, lane)) return *c;
    const Memory &m = find_memory(op->name);
    Code index = expr(op->index, lane);
    Code c{m.c_name + "[" + index.text + "]", Primary};
    if (!cuda() && m.type.is_bool()) c = {"(bool)" + c.text, Unary};
    if (!op->predicate.defined()) return c;
    // A masked-off lane is not read and is 0, as in the evaluator.
    Code p = expr(op->predicate, lane);
    Code zero = literal(make_zero(op->type.element_of()));
    return {wrap(p, LogicalOr) + " ? " + wrap(c, LogicalOr) + " : " + wrap(zero, Conditional),
            Conditional};
}

Code ExprPrinter::ramp_lane(const Ramp *op, int lane) {
    return expr(ramp_lane_expr(op, lane), 0);
}

Expr ramp_lane_expr(const Ramp *op, int lane) {
    Type t = op->base.type();
    // Lane i is base + i * stride in the IR's arithmetic; for floats lane 0 is base + 0.0,
    // which differs from base when base is -0.0.
    if (lane == 0 && !t.is_float()) return op->base;
    Expr offset;
    if (std::optional<int64_t> s = as_const_int(op->stride)) {
        offset = make_const(t, int64_t(uint64_t(*s) * uint64_t(lane)));
    } else if (std::optional<double> f = as_const_float(op->stride)) {
        offset = make_const(t, double(lane) * *f);
    } else {
        offset = Mul::make(op->stride, t.is_float() ? make_const(t, double(lane))
                                                    : make_const(t, int64_t(lane)));
    }
    if (!t.is_float() && is_const_zero(offset)) return op->base;
    return Add::make(op->base, offset);
}

std::string ExprPrinter::lanes_list(const Expr &e) {
    std::string s = "{";
    for (int i = 0; i < e.type().lanes; i++) {
        if (i) s += ", ";
        s += wrap(expr(e, i), Conditional);
    }
    return s + "}";
}

std::string ExprPrinter::declaration(const std::string &c_name, const Expr &e) {
    Type t = e.type();
    if (t.is_scalar()) return "const " + type_name(t) + " " + c_name + " = " + print(e) + ";";
    if (native_vector(t)) {
        Code v = vexpr(e);
        vector_vars[c_name] = t.is_bool() ? v.mask_bits : 0;
        if (is_dense(e)) dense_vars.insert(c_name);
        return "const " + vector_type_name(t, v.mask_bits) + " " + c_name + " = " + v.text + ";";
    }
    std::string lanes = lanes_list(e);
    if (is_dense(e)) dense_vars.insert(c_name); // a ramp's lanes: a dense index
    return "const " + type_name(t) + " " + c_name + "[" + std::to_string(t.lanes) + "] = " + lanes +
           ";";
}

Code ExprPrinter::let(const Let *op, int lane) {
    return with_let(op, [&] { return expr(op->body, lane); });
}

Code ExprPrinter::with_let(const Let *op, const std::function<Code()> &body) {
    std::string c_name;
    auto it = declared_lets.find(op);
    if (it != declared_lets.end()) {
        c_name = it->second;
    } else {
        c_name = names.fresh(op->name);
        std::string d = declaration(c_name, op->value);
        pending.push_back(d);
        declared_lets[op] = c_name;
    }
    names.push(op->name, c_name);
    Code result = body();
    names.pop(op->name);
    return result;
}

Code ExprPrinter::call(const Call *op, int lane) {
    if (op->call_type == Call::Intrinsic) {
        if (op->name == intrinsic::likely) {
            internal_assert(op->args.size() == 1, "device code: likely takes one argument");
            return expr(op->args[0], lane);
        }
        if (op->name == intrinsic::gpu_block_id || op->name == intrinsic::gpu_thread_id) {
            std::optional<int64_t> d =
                op->args.size() == 1 ? as_const_int(op->args[0]) : std::nullopt;
            internal_assert(d && *d >= 0 && *d <= 2, "device code: ", op->name,
                            " needs a constant dimension 0, 1 or 2");
            bool block = op->name == intrinsic::gpu_block_id;
            if (cuda()) {
                return {std::string("(int)") + (block ? "blockIdx." : "threadIdx.") + "xyz"[*d],
                        Unary};
            }
            return {std::string("(int)") + (block ? "get_group_id(" : "get_local_id(") +
                        std::to_string(*d) + ")",
                    Unary};
        }
        internal_assert(op->name == intrinsic::abs || op->name == intrinsic::fma,
                        "device code: intrinsic '", op->name, "' cannot appear in an expression");
        return math(op, lane);
    }
    internal_assert(op->call_type == Call::Math, "device code: call to '", op->name,
                    "' should have been lowered to a Load");
    return math(op, lane);
}

Code ExprPrinter::math(const Call *op, int lane) {
    static const std::map<std::string, int> arity = {
        {"exp", 1},  {"log", 1},   {"sqrt", 1}, {"pow", 2},   {"sin", 1}, {"cos", 1},
        {"tanh", 1}, {"floor", 1}, {"ceil", 1}, {"round", 1}, {"abs", 1}, {"fma", 3}};
    auto it = arity.find(op->name);
    internal_assert(it != arity.end(), "device code: unknown math function '", op->name, "'");
    internal_assert(int(op->args.size()) == it->second, "device code: ", op->name, " takes ",
                    it->second, " arguments, got ", op->args.size());
    std::vector<Code> args;
    for (const Expr &a : op->args)
        args.push_back(expr(a, lane));
    Type t = op->type.element_of(), arg = op->args[0].type().element_of();
    if (op->name == "abs" && !arg.is_float()) {
        if (!arg.is_int()) return args[0];
        // The result is unsigned, so abs(INT_MIN) is 2^(bits-1).
        std::string name = "kiln_abs_" + type_suffix(arg);
        preamble.use(name, abs_helper(api, name, arg, type_name(arg), type_name(t)));
        return {helper_call(name, args), Primary};
    }
    internal_assert(t.is_float(), "device code: math function ", op->name, " of type ", op->type);
    if (op->name == "round" && !cuda()) {
        std::string name = "kiln_round_" + type_suffix(t);
        preamble.use(name, round_helper(name, t, type_name(t)));
        return {helper_call(name, args), Primary};
    }
    std::string name = op->name == "round" ? "rint" : op->name == "abs" ? "fabs" : op->name;
    // CUDA names the float32 versions with an f suffix; OpenCL overloads one name.
    if (cuda() && t.bits == 32) name += "f";
    return {helper_call(name, args), Primary};
}

// ---- Helper definitions ------------------------------------------------------------------------

namespace {

std::string helper_prefix(GpuApi api) {
    return api == GpuApi::CUDA ? "static __device__ inline " : "static inline ";
}

} // namespace

std::string div_helper(GpuApi api, const std::string &name, Type t, const std::string &type,
                       const std::string &domain, bool is_mod) {
    std::string s = helper_prefix(api) + type + " " + name + "(" + type + " a, " + type + " b) {\n";
    if (t.is_uint()) {
        return s + "    return b == 0 ? 0 : a " + (is_mod ? "%" : "/") + " b;\n}\n";
    }
    if (is_mod) {
        // Euclidean: the result lies in [0, |b|); x % -1 is 0 (C's INT_MIN % -1 traps).
        return s + "    if (b == 0 || b == -1) return 0;\n" + "    " + type + " r = a % b;\n" +
               "    return r < 0 ? (b > 0 ? r + b : r - b) : r;\n}\n";
    }
    // Rounds toward negative infinity for b > 0 (Euclidean); INT_MIN / -1 wraps.
    return s + "    if (b == 0) return 0;\n" + "    if (b == -1) return (" + type + ")((" + domain +
           ")0 - (" + domain + ")a);\n" + "    " + type + " q = a / b, r = a % b;\n" +
           "    return r < 0 ? (b > 0 ? q - 1 : q + 1) : q;\n}\n";
}

std::string float_mod_helper(GpuApi api, const std::string &name, Type t, const std::string &type) {
    std::string floor_name = api == GpuApi::CUDA && t.bits == 32 ? "floorf" : "floor";
    // a - b * floor(a / b), each step rounded to the type (no contraction).
    return helper_prefix(api) + type + " " + name + "(" + type + " a, " + type + " b) {\n" +
           "    const " + type + " q = " + floor_name + "(a / b);\n" + "    return a - b * q;\n}\n";
}

std::string round_helper(const std::string &name, Type t, const std::string &type) {
    // rint(x), written out: PoCL crashes on rint of a constant that is not below 2^23 in
    // magnitude (or NaN). Adding and subtracting 2^23 (2^52) rounds half to even in the default
    // rounding mode; larger magnitudes, infinities and NaN are their own rounding.
    std::string big = t.bits == 32 ? "8388608.0f" : "4503599627370496.0";
    return helper_prefix(GpuApi::OpenCL) + type + " " + name + "(" + type + " x) {\n" +
           "    // rint(x): round half to even.\n" + "    if (!(fabs(x) < " + big +
           ")) return x;\n" + "    return copysign(fabs(x) + " + big + " - " + big + ", x);\n}\n";
}

std::string min_max_helper(GpuApi api, const std::string &name, const std::string &type,
                           bool is_min) {
    return helper_prefix(api) + type + " " + name + "(" + type + " a, " + type +
           " b) {\n    return a " + (is_min ? "<" : ">") + " b ? a : b;\n}\n";
}

std::string abs_helper(GpuApi api, const std::string &name, Type t, const std::string &type,
                       const std::string &result) {
    std::string domain = t.bits == 64 ? (api == GpuApi::CUDA ? "uint64_t" : "ulong")
                                      : (api == GpuApi::CUDA ? "uint32_t" : "uint");
    return helper_prefix(api) + result + " " + name + "(" + type + " x) {\n" + "    return (" +
           result + ")(x < 0 ? (" + domain + ")0 - (" + domain + ")x : (" + domain + ")x);\n}\n";
}

std::string bfloat16_to_float_helper(GpuApi api, const std::string &name, int lanes,
                                     const std::string &bits_type, const std::string &uint_type,
                                     const std::string &float_type) {
    std::string wide = lanes == 1 ? "(" + uint_type + ")x" : "convert_" + uint_type + "(x)";
    std::string as_float = api == GpuApi::CUDA ? "__uint_as_float" : "as_" + float_type;
    return helper_prefix(api) + float_type + " " + name + "(" + bits_type + " x) {\n" +
           "    // Exact: the bits are the upper half of a float32.\n" + "    return " + as_float +
           "(" + wide + " << 16);\n}\n";
}

std::string float_to_bfloat16_helper(GpuApi api, const std::string &name, int lanes,
                                     const std::string &bits_type, const std::string &uint_type,
                                     const std::string &float_type) {
    std::string as_uint = api == GpuApi::CUDA ? "__float_as_uint" : "as_" + uint_type;
    std::string bits = "(u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded";
    std::string narrow = lanes == 1 ? "(" + bits_type + ")(" + bits + ")"
                                    : "convert_" + bits_type + "(" + bits + ")";
    return helper_prefix(api) + bits_type + " " + name + "(" + float_type + " x) {\n" +
           "    // To nearest even in integer arithmetic, as bfloat16_bits_of "
           "(lang/BFloat16.h):\n" +
           "    // denormals kept, overflow to infinity, a NaN stays a quiet NaN with its sign.\n" +
           "    const " + uint_type + " u = " + as_uint + "(x);\n" + "    const " + uint_type +
           " rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;\n" + "    return " + narrow +
           ";\n}\n";
}

std::string float_to_int_helper(const std::string &name, Type from, Type to,
                                const std::string &from_type, const std::string &to_type,
                                const std::string &min_text, const std::string &max_text) {
    // Exact decimal text of 2^bits or 2^(bits-1): the first value that does not fit.
    char limit[64];
    std::snprintf(limit, sizeof(limit), "%.1f",
                  std::ldexp(1.0, to.is_int() ? to.bits - 1 : to.bits));
    std::string suffix = from.bits == 32 ? "f" : "";
    std::string s = helper_prefix(GpuApi::CUDA) + to_type + " " + name + "(" + from_type +
                    " x) {\n    // Truncates toward zero, saturates out-of-range values, NaN "
                    "gives 0.\n";
    if (to.is_int()) {
        return s + "    if (x != x) return 0;\n" + "    if (x <= -" + limit + suffix + ") return " +
               min_text + ";\n" + "    if (x >= " + limit + suffix + ") return " + max_text +
               ";\n" + "    return (" + to_type + ")x;\n}\n";
    }
    return s + "    if (!(x > 0" + std::string(from.bits == 32 ? ".0f" : ".0") + ")) return 0;\n" +
           "    if (x >= " + limit + suffix + ") return " + max_text + ";\n" + "    return (" +
           to_type + ")x;\n}\n";
}

} // namespace kiln::device
