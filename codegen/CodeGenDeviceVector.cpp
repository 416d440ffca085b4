// OpenCL vector expressions for the device printer (codegen/CodeGenDeviceExpr.h): vectors of 2, 3,
// 4, 8 or 16 lanes print as OpenCL vector types, dense loads as vloadN, and whatever has no vector
// form in OpenCL C (integer division, gathers, predicated loads, ...) as a vector literal of its
// lanes, each printed by the scalar printer.
//
// Bool vectors are masks: a signed integer vector whose lanes are -1 (true) or 0 (false), which
// is what OpenCL's vector comparisons produce; its element width (Code::mask_bits) is that of the
// compared values, and masks are converted where widths must agree (select, &&).
#include <algorithm>
#include <set>

#include "codegen/CodeGenDeviceExpr.h"
#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"

namespace kiln::device {

namespace {

std::string lanes_text(int lanes) {
    return std::to_string(lanes);
}

} // namespace

bool ExprPrinter::native_vector(Type t) const {
    if (cuda()) return false;
    return t.lanes == 2 || t.lanes == 3 || t.lanes == 4 || t.lanes == 8 || t.lanes == 16;
}

std::string ExprPrinter::vector_type_name(Type t, int mask_bits) {
    if (t.is_bool()) return type_name(Int(mask_bits)) + lanes_text(t.lanes);
    return type_name(t.element_of()) + lanes_text(t.lanes);
}

Code ExprPrinter::convert_mask(const Code &m, int bits, int lanes) {
    if (m.mask_bits == bits) return m;
    return {"convert_" + vector_type_name(Bool(lanes), bits) + "(" + m.text + ")", Primary, bits};
}

Code ExprPrinter::lane_of(const std::string &c_name, int lane) {
    auto it = vector_vars.find(c_name);
    if (it == vector_vars.end()) return {c_name + "[" + std::to_string(lane) + "]", Primary};
    std::string component = c_name + ".s" + "0123456789abcdef"[lane];
    // A mask lane is -1 for true: compare, so that the scalar is a C truth value of 0 or 1.
    if (it->second) return {component + " != 0", Equality};
    return {component, Primary};
}

std::string ExprPrinter::vector_variable(const Expr &e) {
    const auto *v = e.as<Variable>();
    const std::string *name = v ? names.find(v->name) : nullptr;
    return name && vector_vars.count(*name) ? *name : "";
}

Code ExprPrinter::vexpr(const Expr &e) {
    Type t = e.type();
    internal_assert(native_vector(t), "device code: ", t, " is not an OpenCL vector type");
    check_no_bfloat16_arithmetic(e);
    switch (e->node_type) {
    case IRNodeType::Broadcast:
        return broadcast_vector(e.as<Broadcast>());
    case IRNodeType::Ramp:
        return ramp_vector(e.as<Ramp>());
    case IRNodeType::Variable: {
        const std::string *name = names.find(e.as<Variable>()->name);
        if (!name) break; // the scalar printer reports it
        auto it = vector_vars.find(*name);
        if (it == vector_vars.end()) break;
        return {*name, Primary, it->second};
    }
    case IRNodeType::Add:
    case IRNodeType::Sub:
    case IRNodeType::Mul:
        return arith_vector(e);
    case IRNodeType::Div:
        if (!t.is_float()) break;
        return {wrap(vexpr(e.as<Div>()->a), Multiplicative) + " / " +
                    wrap(vexpr(e.as<Div>()->b), Multiplicative - 1),
                Multiplicative};
    case IRNodeType::Min:
    case IRNodeType::Max:
        return min_max_vector(e);
    case IRNodeType::EQ:
        return compare_vector(e.as<EQ>()->a, e.as<EQ>()->b, "==", Equality);
    case IRNodeType::NE:
        return compare_vector(e.as<NE>()->a, e.as<NE>()->b, "!=", Equality);
    case IRNodeType::LT:
        return compare_vector(e.as<LT>()->a, e.as<LT>()->b, "<", Relational);
    case IRNodeType::LE:
        return compare_vector(e.as<LE>()->a, e.as<LE>()->b, "<=", Relational);
    case IRNodeType::GT:
        return compare_vector(e.as<GT>()->a, e.as<GT>()->b, ">", Relational);
    case IRNodeType::GE:
        return compare_vector(e.as<GE>()->a, e.as<GE>()->b, ">=", Relational);
    case IRNodeType::And:
        return logical_vector(e.as<And>()->a, e.as<And>()->b, true);
    case IRNodeType::Or:
        return logical_vector(e.as<Or>()->a, e.as<Or>()->b, false);
    case IRNodeType::Not: {
        // ! of a mask lane gives -1 where it was 0, in the same type.
        Code a = vexpr(e.as<Not>()->a);
        return {"!" + wrap(a, Unary), Unary, a.mask_bits};
    }
    case IRNodeType::Select:
        return select_vector(e.as<Select>());
    case IRNodeType::Cast:
        return cast_vector(e.as<Cast>());
    case IRNodeType::Load:
        return load_vector(e.as<Load>());
    case IRNodeType::Let: {
        const auto *op = e.as<Let>();
        return with_let(op, [&] { return vexpr(op->body); });
    }
    case IRNodeType::Call:
        return call_vector(e.as<Call>());
    default:
        break;
    }
    return lanes_constructor(e);
}

namespace {

// Whether every lane of e is the same (its vectors are all broadcasts).
class IsUniform : public IRVisitor {
public:
    bool uniform = true;

protected:
    using IRVisitor::visit;
    void visit(const Ramp *) override { uniform = false; }
    void visit(const Broadcast *) override {} // a scalar inside
    void visit(const Variable *op) override { uniform = uniform && op->type.is_scalar(); }
};

bool is_uniform(const Expr &e) {
    IsUniform u;
    u.include(e);
    return u.uniform;
}

} // namespace

// A vector literal of the lanes, each printed by the scalar printer (one lane, broadcast, when
// they are all the same).
Code ExprPrinter::lanes_constructor(const Expr &e) {
    Type t = e.type();
    std::string s = "(" + vector_type_name(t) + ")(";
    if (is_uniform(e)) {
        Code lane = expr(e, 0);
        s += t.is_bool() ? wrap(lane, LogicalOr) + " ? -1 : 0" : lane.text;
        return {s + ")", Primary, t.is_bool() ? 32 : 0};
    }
    for (int i = 0; i < t.lanes; i++) {
        Code lane = expr(e, i);
        if (i) s += ", ";
        s += t.is_bool() ? wrap(lane, LogicalOr) + " ? -1 : 0" : wrap(lane, Conditional);
    }
    return {s + ")", Primary, t.is_bool() ? 32 : 0};
}

Code ExprPrinter::broadcast_vector(const Broadcast *op) {
    Type t = op->type;
    Code v = expr(op->value, 0);
    if (t.is_bool()) {
        return {"(" + vector_type_name(t) + ")(" + wrap(v, LogicalOr) + " ? -1 : 0)", Primary, 32};
    }
    return {"(" + vector_type_name(t) + ")(" + v.text + ")", Primary};
}

Code ExprPrinter::ramp_vector(const Ramp *op) {
    Type t = op->type.element_of();
    std::optional<int64_t> k = as_const_int(op->stride);
    std::optional<double> f = as_const_float(op->stride);
    if (!k && !f) return lanes_constructor(Expr(op));
    // base + (0, s, 2 s, ...), in the unsigned type for integers so that it wraps; negative
    // offsets are written signed and reinterpreted.
    bool negative = t.is_int() && *k < 0;
    Type offsets_type = t.is_int() && !negative ? t.with_code(Type::UInt) : t;
    std::string offsets = "(" + vector_type_name(offsets_type.with_lanes(op->lanes)) + ")(";
    for (int i = 0; i < op->lanes; i++) {
        Expr lane = t.is_float() ? make_const(t, double(i) * *f)
                                 : make_const(offsets_type, int64_t(uint64_t(*k) * uint64_t(i)));
        // Narrow lanes as plain numbers: the vector literal converts them.
        Code c = !t.is_float() && t.bits < 32 ? Code{std::to_string(*as_const_int(lane))}
                                              : literal(lane);
        offsets += (i ? ", " : "") + c.text;
    }
    offsets += ")";
    if (negative)
        offsets = "as_" + vector_type_name(t.with_code(Type::UInt).with_lanes(op->lanes)) + "(" +
                  offsets + ")";
    Code base = expr(op->base, 0);
    if (t.is_int()) {
        std::string u = vector_type_name(t.with_code(Type::UInt).with_lanes(op->lanes));
        return {"as_" + vector_type_name(op->type) + "((" + u + ")((" +
                    type_name(t.with_code(Type::UInt)) + ")" + wrap(base, Unary) + ") + " +
                    offsets + ")",
                Primary};
    }
    return {"(" + vector_type_name(op->type) + ")(" + base.text + ") + " + offsets, Additive};
}

namespace {

struct VectorBinary {
    Expr a, b;
    const char *op;
    int precedence;
};

VectorBinary vector_arith_parts(const Expr &e) {
    if (const auto *op = e.as<Add>()) return {op->a, op->b, "+", Additive};
    if (const auto *op = e.as<Sub>()) return {op->a, op->b, "-", Additive};
    const auto *op = e.as<Mul>();
    internal_assert(op, "device code: ", e, " is not + - *");
    return {op->a, op->b, "*", Multiplicative};
}

} // namespace

// Vector arithmetic does not promote: unsigned lanes wrap in their own width; signed ones
// compute in the unsigned vector type of the same width (as_uint4 & co. reinterpret the bits).
Code ExprPrinter::arith_vector(const Expr &e) {
    Type t = e.type().element_of();
    if (!t.is_int()) {
        VectorBinary p = vector_arith_parts(e);
        return {wrap(vexpr(p.a), p.precedence) + " " + p.op + " " +
                    wrap(vexpr(p.b), p.precedence - 1),
                p.precedence};
    }
    Code u = in_unsigned_vector(e, t);
    return {"as_" + vector_type_name(e.type()) + "(" + u.text + ")", Primary};
}

Code ExprPrinter::in_unsigned_vector(const Expr &e, Type t) {
    if ((e.as<Add>() || e.as<Sub>() || e.as<Mul>()) && e.type().element_of() == t) {
        VectorBinary p = vector_arith_parts(e);
        Code a = in_unsigned_vector(p.a, t), b = in_unsigned_vector(p.b, t);
        return {wrap(a, p.precedence) + " " + p.op + " " + wrap(b, p.precedence - 1), p.precedence};
    }
    Type u = t.with_code(Type::UInt).with_lanes(e.type().lanes);
    return {"as_" + vector_type_name(u) + "(" + vexpr(e).text + ")", Primary};
}

Code ExprPrinter::min_max_vector(const Expr &e) {
    bool is_min = e.as<Min>() != nullptr;
    Expr ea = is_min ? e.as<Min>()->a : e.as<Max>()->a;
    Expr eb = is_min ? e.as<Min>()->b : e.as<Max>()->b;
    Type t = e.type().element_of();
    if (t.is_bool()) return logical_vector(ea, eb, is_min);
    if (!t.is_float()) {
        return {helper_call(is_min ? "min" : "max", {vexpr(ea), vexpr(eb)}), Primary};
    }
    // a < b ? a : b lane by lane (kiln_min_f32 & co.): PoCL 3.1 turns the vector form with a
    // constant -0.0 into a min that gives -0.0 for min(-0.0, +0.0).
    std::string name = std::string(is_min ? "kiln_min_" : "kiln_max_") + type_suffix(t);
    preamble.use(name, min_max_helper(api, name, type_name(t), is_min));
    return per_lane(name, {ea, eb}, e.type());
}

Code ExprPrinter::compare_vector(const Expr &a, const Expr &b, const char *op, int precedence) {
    Type t = a.type().element_of();
    Code ca = vexpr(a), cb = vexpr(b);
    int lanes = a.type().lanes;
    if (t.is_bool()) {
        int bits = std::max(ca.mask_bits, cb.mask_bits);
        ca = convert_mask(ca, bits, lanes);
        cb = convert_mask(cb, bits, lanes);
        // Masks order true (-1) before false (0): swap the operands of <, <=, >, >=.
        if (precedence == Relational) std::swap(ca, cb);
        return {wrap(ca, Additive) + " " + op + " " + wrap(cb, Additive), precedence, bits};
    }
    return {wrap(ca, Additive) + " " + op + " " + wrap(cb, Additive), precedence, t.bits};
}

Code ExprPrinter::logical_vector(const Expr &a, const Expr &b, bool is_and) {
    Code ca = vexpr(a), cb = vexpr(b);
    int bits = std::max(ca.mask_bits, cb.mask_bits), lanes = a.type().lanes;
    ca = convert_mask(ca, bits, lanes);
    cb = convert_mask(cb, bits, lanes);
    if (is_and) return {wrap(ca, LogicalAnd) + " && " + wrap(cb, LogicalAnd), LogicalAnd, bits};
    auto operand = [](const Code &c) {
        return wrap(c, c.precedence == LogicalAnd ? Equality : LogicalOr);
    };
    return {operand(ca) + " || " + operand(cb), LogicalOr, bits};
}

Code ExprPrinter::select_vector(const Select *op) {
    Type t = op->type;
    Code a = vexpr(op->true_value), b = vexpr(op->false_value);
    int bits = t.is_bool() ? std::max(a.mask_bits, b.mask_bits) : t.bits;
    if (t.is_bool()) {
        a = convert_mask(a, bits, t.lanes);
        b = convert_mask(b, bits, t.lanes);
    }
    // A vector condition selects lane by lane (by the sign bit of a mask as wide as the values).
    Code c = op->condition.type().is_scalar() ? expr(op->condition, 0)
                                              : convert_mask(vexpr(op->condition), bits, t.lanes);
    return {wrap(c, LogicalOr) + " ? " + wrap(a, LogicalOr) + " : " + wrap(b, Conditional),
            Conditional, t.is_bool() ? bits : 0};
}

Code ExprPrinter::cast_vector(const Cast *op) {
    return convert_vector(vexpr(op->value), op->value.type().element_of(), op->type.element_of(),
                          op->type.lanes);
}

Code ExprPrinter::convert_vector(const Code &v, Type from, Type to, int lanes) {
    if (from == to) return v;
    // bfloat16 converts through float32, both ways (lang/Type.h).
    if (from.is_bfloat()) return convert_vector(bfloat16_to_float(v, lanes), Float(32), to, lanes);
    if (to.is_bfloat()) return float_to_bfloat16(convert_vector(v, from, Float(32), lanes), lanes);
    if (to.is_bool()) {
        // A scalar operand may not have a higher rank than the vector's lanes (char4 != 0).
        Code zero = from.is_float() ? float_literal(from, 0.0)
                                    : Code{"(" + vector_type_name(from.with_lanes(lanes)) + ")(0)"};
        return {wrap(v, Additive) + " != " + zero.text, Equality, from.bits};
    }
    std::string target = vector_type_name(to.with_lanes(lanes));
    // A mask's lanes are -1 for true: negated, 1.
    if (from.is_bool()) return {"convert_" + target + "(-" + wrap(v, Unary) + ")", Primary};
    // Saturating for floats to integers (NaN gives 0); integers wrap; to float rounds to nearest.
    std::string sat = from.is_float() && !to.is_float() ? "_sat" : "";
    return {"convert_" + target + sat + "(" + v.text + ")", Primary};
}

bool ExprPrinter::is_dense(const Expr &index) {
    if (const auto *r = index.as<Ramp>()) return is_const_one(r->stride);
    const auto *v = index.as<Variable>();
    const std::string *name = v ? names.find(v->name) : nullptr;
    return name && dense_vars.count(*name);
}

std::optional<Code> ExprPrinter::dense_base(const Expr &index) {
    if (const auto *r = index.as<Ramp>(); r && is_const_one(r->stride)) return expr(r->base, 0);
    if (const auto *v = index.as<Variable>()) {
        const std::string *name = names.find(v->name);
        if (name && dense_vars.count(*name)) return Code{*name + (cuda() ? "[0]" : ".s0")};
    }
    return std::nullopt;
}

Code ExprPrinter::load_vector(const Load *op) {
    Type t = op->type;
    const Memory &m = find_memory(op->name);
    if (op->predicate.defined()) return lanes_constructor(Expr(op));
    std::optional<Code> base = dense_base(op->index);
    if (!base) {
        const auto *b = op->index.as<Broadcast>();
        if (!b || t.is_bool()) return lanes_constructor(Expr(op));
        // Every lane reads the same element.
        return {"(" + vector_type_name(t) + ")(" + m.c_name + "[" + expr(b->value, 0).text + "])",
                Primary};
    }
    std::string load = "vload" + lanes_text(t.lanes) + "(0, " + m.c_name + " + " +
                       wrap(*base, Multiplicative) + ")";
    if (t.is_bool()) return {load + " != (uchar)0", Equality, 8};
    return {load, Primary};
}

Code ExprPrinter::call_vector(const Call *op) {
    if (op->call_type == Call::Intrinsic && op->name == intrinsic::likely) {
        return vexpr(op->args[0]);
    }
    Type arg = op->args.empty() ? op->type : op->args[0].type().element_of();
    bool builtin =
        op->call_type == Call::Math || op->name == intrinsic::abs || op->name == intrinsic::fma;
    if (!builtin) return lanes_constructor(Expr(op));
    if (op->name == "abs" && !arg.is_int() && !arg.is_float()) return vexpr(op->args[0]);
    if (op->name == "round") {
        // A scalar helper (see math()): PoCL 3.1 miscompiles rint of large constants.
        std::string name = "kiln_round_" + type_suffix(arg);
        preamble.use(name, round_helper(name, arg, type_name(arg)));
        return per_lane(name, op->args, op->type);
    }
    // Transcendental functions lane by lane, as the CPU backend calls libm per lane: PoCL 3.1's
    // double8 pow gets some lanes wrong.
    static const std::set<std::string> transcendental = {"exp", "log", "pow", "sin", "cos", "tanh"};
    if (transcendental.count(op->name)) return per_lane(op->name, op->args, op->type);
    if (op->name == "abs" && arg.is_int()) {
        // Not OpenCL's abs: PoCL 3.1 folds abs of a known INT_MIN to 0.
        std::string name = "kiln_abs_" + type_suffix(arg);
        preamble.use(name,
                     abs_helper(api, name, arg, type_name(arg), type_name(op->type.element_of())));
        return per_lane(name, op->args, op->type);
    }
    std::vector<Code> args;
    for (const Expr &a : op->args)
        args.push_back(vexpr(a));
    std::string name = op->name == "abs" && arg.is_float() ? "fabs" : op->name;
    return {helper_call(name, args), Primary};
}

// CUDA has vector types (float4, ...) but no vector arithmetic: vectors are printed lane by lane,
// except that dense, unpredicated loads and stores of 2 or 4 lanes of 32-bit elements move whole
// vectors. A 16-byte access (8 for 2 lanes) needs an address aligned to its size, which the
// printer cannot prove (a buffer's origin is the element at its mins; a wrapped device pointer may
// have any alignment), so the helpers test the address: a vector access where it is aligned,
// element accesses where it is not. In a tile whose rows start at multiples of 4 elements of an
// aligned allocation every access takes the first path.

std::optional<std::string> ExprPrinter::cuda_vector_name(Type t) {
    if (!cuda() || (t.lanes != 2 && t.lanes != 4) || t.bits != 32 || t.is_bool()) return {};
    const char *element = t.is_float() ? "float" : t.is_int() ? "int" : "uint";
    return std::string(element) + std::to_string(t.lanes);
}

std::string ExprPrinter::cuda_vector_helper(Type t, bool store) {
    std::string vector = *cuda_vector_name(t), element = type_name(t.element_of());
    std::string name = std::string(store ? "kiln_store_" : "kiln_load_") +
                       type_suffix(t.element_of()) + "x" + std::to_string(t.lanes);
    std::string bytes = std::to_string(t.lanes * 4 - 1);
    static const char *fields[] = {"x", "y", "z", "w"};
    std::string s;
    if (store) {
        s = "__device__ __forceinline__ void " + name + "(" + element + " *p";
        for (int i = 0; i < t.lanes; i++)
            s += ", " + element + " v" + std::to_string(i);
        s += ") {\n    if (((unsigned long long)p & " + bytes + ") == 0) {\n        " + vector +
             " v;\n";
        for (int i = 0; i < t.lanes; i++)
            s += std::string("        v.") + fields[i] + " = v" + std::to_string(i) + ";\n";
        s += "        *(" + vector + " *)p = v;\n        return;\n    }\n";
        for (int i = 0; i < t.lanes; i++)
            s += "    p[" + std::to_string(i) + "] = v" + std::to_string(i) + ";\n";
        s += "}\n";
    } else {
        s = "__device__ __forceinline__ " + vector + " " + name + "(const " + element +
            " *p) {\n    if (((unsigned long long)p & " + bytes + ") == 0) return *(const " +
            vector + " *)p;\n    " + vector + " v;\n";
        for (int i = 0; i < t.lanes; i++)
            s += std::string("    v.") + fields[i] + " = p[" + std::to_string(i) + "];\n";
        s += "    return v;\n}\n";
    }
    return preamble.use(name, s);
}

std::optional<Code> ExprPrinter::cuda_vector_load(const Load *op, int lane) {
    std::optional<std::string> vector = cuda_vector_name(op->type);
    if (!vector || op->predicate.defined()) return {};
    const Memory &m = find_memory(op->name);
    if (m.type != op->type.element_of()) return {};
    static const char *fields[] = {"x", "y", "z", "w"};
    auto it = declared_loads.find(op);
    if (it == declared_loads.end()) {
        std::optional<Code> base = dense_base(op->index);
        if (!base) return {};
        std::string c_name = names.fresh(op->name + ".vec");
        std::string helper = cuda_vector_helper(op->type, false);
        pending.push_back("const " + *vector + " " + c_name + " = " + helper + "(" + m.c_name +
                          " + " + wrap(*base, Multiplicative) + ");");
        it = declared_loads.emplace(op, c_name).first;
    }
    return Code{it->second + "." + fields[lane], Primary};
}

std::optional<std::string> ExprPrinter::cuda_vector_store(const Store *op, const Memory &m) {
    Type t = op->value.type();
    if (!cuda_vector_name(t) || op->predicate.defined() || m.type != t.element_of()) return {};
    std::optional<Code> base = dense_base(op->index);
    if (!base) return {};
    std::string s =
        cuda_vector_helper(t, true) + "(" + m.c_name + " + " + wrap(*base, Multiplicative);
    // The helper's arguments are all evaluated before it writes: lanes that read the stored
    // memory see it unchanged, as a vector store requires.
    for (int i = 0; i < t.lanes; i++)
        s += ", " + print(op->value, i);
    return s + ");";
}

// A function called lane by lane on vector arguments declared first (variables are used as
// they are).
Code ExprPrinter::per_lane(const std::string &function, const std::vector<Expr> &args,
                           Type result) {
    std::vector<std::string> names_of_args;
    for (const Expr &a : args) {
        if (std::string name = vector_variable(a); !name.empty()) {
            names_of_args.push_back(name);
            continue;
        }
        std::string base = function.compare(0, 5, "kiln_") == 0 ? function.substr(5) : function;
        std::string c_name = names.fresh(base + "_arg");
        std::string d = declaration(c_name, a);
        pending.push_back(d);
        names_of_args.push_back(c_name);
    }
    std::string s = "(" + vector_type_name(result) + ")(";
    for (int i = 0; i < result.lanes; i++) {
        std::vector<Code> lanes;
        for (const std::string &a : names_of_args)
            lanes.push_back(lane_of(a, i));
        s += (i ? ", " : "") + helper_call(function, lanes);
    }
    return {s + ")", Primary};
}

} // namespace kiln::device
