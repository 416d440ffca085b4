#include "lang/IR.h"

#include <cmath>

#include "lang/Error.h"

namespace kiln {

namespace {

template <typename T, typename... Args>
Expr make_expr(Args &&...args) {
    return Expr(
        std::shared_ptr<const BaseExprNode>(std::make_shared<T>(std::forward<Args>(args)...)));
}

template <typename T>
std::shared_ptr<T> new_stmt() {
    return std::make_shared<T>();
}

void check_defined(const Expr &e, const char *node, const char *field) {
    internal_assert(e.defined(), node, ": operand '", field, "' is undefined");
}

void check_defined(const Stmt &s, const char *node, const char *field) {
    internal_assert(s.defined(), node, ": statement '", field, "' is undefined");
}

void check_same_type(const Expr &a, const Expr &b, const char *node) {
    check_defined(a, node, "a");
    check_defined(b, node, "b");
    internal_assert(a.type() == b.type(), node, ": operand types differ: ", a.type(), " vs ",
                    b.type());
}

} // namespace

const char *node_type_name(IRNodeType t) {
    switch (t) {
#define EXPR_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return #Name;
#define STMT_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return #Name;
#include "lang/IRNodes.def"
    }
    return "?";
}

const char *for_type_name(ForType t) {
    switch (t) {
    case ForType::Serial:
        return "for";
    case ForType::Parallel:
        return "parallel";
    case ForType::Vectorized:
        return "vectorized";
    case ForType::Unrolled:
        return "unrolled";
    case ForType::GPUBlock:
        return "gpu_block";
    case ForType::GPUThread:
        return "gpu_thread";
    case ForType::Tensorized:
        return "tensorized";
    }
    return "?";
}

const char *memory_type_name(MemoryType t) {
    switch (t) {
    case MemoryType::Auto:
        return "auto";
    case MemoryType::Stack:
        return "stack";
    case MemoryType::Heap:
        return "heap";
    case MemoryType::Register:
        return "register";
    case MemoryType::GPUShared:
        return "gpu_shared";
    }
    return "?";
}

Expr::Expr(int v) : Expr(IntImm::make(Int(32), v)) {}
Expr::Expr(int64_t v) : Expr(IntImm::make(Int(64), v)) {}
Expr::Expr(float v) : Expr(FloatImm::make(Float(32), v)) {}
Expr::Expr(double v) : Expr(FloatImm::make(Float(64), v)) {}

Expr IntImm::make(Type t, int64_t value) {
    internal_assert(t.is_int() && t.is_scalar(), "IntImm of type ", t);
    if (t.bits < 64) {
        // Wrap into range: sign-extend the low bits.
        uint64_t mask = (uint64_t(1) << t.bits) - 1;
        uint64_t u = uint64_t(value) & mask;
        if (u >> (t.bits - 1)) u |= ~mask;
        value = int64_t(u);
    }
    return make_expr<IntImm>(t, value);
}

Expr UIntImm::make(Type t, uint64_t value) {
    internal_assert((t.is_uint() || t.is_bool()) && t.is_scalar(), "UIntImm of type ", t);
    if (t.bits < 64) value &= (uint64_t(1) << t.bits) - 1;
    return make_expr<UIntImm>(t, value);
}

Expr FloatImm::make(Type t, double value) {
    internal_assert(t.is_float() && t.is_scalar(), "FloatImm of type ", t);
    internal_assert(t.is_bfloat() ? t.bits == 16 : (t.bits == 32 || t.bits == 64), t,
                    " is not supported");
    value = t.round_float(value);
    return make_expr<FloatImm>(t, value);
}

Expr Cast::make(Type t, Expr value) {
    check_defined(value, "Cast", "value");
    internal_assert(t.lanes == value.type().lanes, "Cast: lanes differ: ", value.type(), " to ", t);
    return make_expr<Cast>(t, std::move(value));
}

Expr Variable::make(Type t, const std::string &name, std::shared_ptr<ParameterContents> param,
                    std::shared_ptr<RDomContents> rdom) {
    internal_assert(!name.empty(), "Variable without a name");
    auto v = std::make_shared<Variable>(t, name);
    v->param = std::move(param);
    v->rdom = std::move(rdom);
    return Expr(std::shared_ptr<const BaseExprNode>(std::move(v)));
}

#define KILN_ARITH_MAKE(Name)                                                                      \
    Expr Name::make(Expr a, Expr b) {                                                              \
        check_same_type(a, b, #Name);                                                              \
        internal_assert(!a.type().is_bool(), #Name ": bool operands");                             \
        Type t = a.type();                                                                         \
        return make_expr<Name>(t, std::move(a), std::move(b));                                     \
    }
KILN_ARITH_MAKE(Add)
KILN_ARITH_MAKE(Sub)
KILN_ARITH_MAKE(Mul)
KILN_ARITH_MAKE(Div)
KILN_ARITH_MAKE(Mod)
#undef KILN_ARITH_MAKE

Expr Min::make(Expr a, Expr b) {
    check_same_type(a, b, "Min");
    Type t = a.type();
    return make_expr<Min>(t, std::move(a), std::move(b));
}

Expr Max::make(Expr a, Expr b) {
    check_same_type(a, b, "Max");
    Type t = a.type();
    return make_expr<Max>(t, std::move(a), std::move(b));
}

#define KILN_CMP_MAKE(Name)                                                                        \
    Expr Name::make(Expr a, Expr b) {                                                              \
        check_same_type(a, b, #Name);                                                              \
        Type t = Bool(a.type().lanes);                                                             \
        return make_expr<Name>(t, std::move(a), std::move(b));                                     \
    }
KILN_CMP_MAKE(EQ)
KILN_CMP_MAKE(NE)
KILN_CMP_MAKE(LT)
KILN_CMP_MAKE(LE)
KILN_CMP_MAKE(GT)
KILN_CMP_MAKE(GE)
#undef KILN_CMP_MAKE

#define KILN_LOGIC_MAKE(Name)                                                                      \
    Expr Name::make(Expr a, Expr b) {                                                              \
        check_same_type(a, b, #Name);                                                              \
        internal_assert(a.type().is_bool(), #Name ": operands must be bool, got ", a.type());      \
        Type t = a.type();                                                                         \
        return make_expr<Name>(t, std::move(a), std::move(b));                                     \
    }
KILN_LOGIC_MAKE(And)
KILN_LOGIC_MAKE(Or)
#undef KILN_LOGIC_MAKE

Expr Not::make(Expr a) {
    check_defined(a, "Not", "a");
    internal_assert(a.type().is_bool(), "Not: operand must be bool, got ", a.type());
    Type t = a.type();
    return make_expr<Not>(t, std::move(a));
}

Expr Select::make(Expr condition, Expr true_value, Expr false_value) {
    check_defined(condition, "Select", "condition");
    check_same_type(true_value, false_value, "Select");
    internal_assert(condition.type().is_bool(), "Select: condition must be bool, got ",
                    condition.type());
    internal_assert(condition.type().lanes == 1 ||
                        condition.type().lanes == true_value.type().lanes,
                    "Select: condition lanes ", condition.type().lanes, " vs value lanes ",
                    true_value.type().lanes);
    Type t = true_value.type();
    return make_expr<Select>(t, std::move(condition), std::move(true_value),
                             std::move(false_value));
}

Expr Load::make(Type t, const std::string &name, Expr index, Expr predicate) {
    check_defined(index, "Load", "index");
    internal_assert(index.type().is_int() && index.type().bits == 32, "Load: index must be int32");
    internal_assert(t.lanes == index.type().lanes, "Load: lanes of type ", t, " and index ",
                    index.type(), " differ");
    if (predicate.defined()) {
        internal_assert(predicate.type() == Bool(t.lanes), "Load: predicate type ",
                        predicate.type());
    }
    return make_expr<Load>(t, name, std::move(index), std::move(predicate));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
    check_same_type(base, stride, "Ramp");
    internal_assert(base.type().is_scalar(), "Ramp: base must be scalar");
    internal_assert(lanes > 1, "Ramp: lanes must be > 1, got ", lanes);
    Type t = base.type().with_lanes(lanes);
    return make_expr<Ramp>(t, std::move(base), std::move(stride), lanes);
}

Expr Broadcast::make(Expr value, int lanes) {
    check_defined(value, "Broadcast", "value");
    internal_assert(value.type().is_scalar(), "Broadcast: value must be scalar");
    internal_assert(lanes > 1, "Broadcast: lanes must be > 1, got ", lanes);
    Type t = value.type().with_lanes(lanes);
    return make_expr<Broadcast>(t, std::move(value), lanes);
}

Expr Let::make(const std::string &name, Expr value, Expr body) {
    check_defined(value, "Let", "value");
    check_defined(body, "Let", "body");
    Type t = body.type();
    return make_expr<Let>(t, name, std::move(value), std::move(body));
}

Expr Call::make(Type t, const std::string &name, std::vector<Expr> args, CallType call_type,
                std::shared_ptr<FunctionContents> func, int value_index,
                std::shared_ptr<ParameterContents> param, std::shared_ptr<BufferContents> buffer) {
    for (const Expr &a : args)
        internal_assert(a.defined(), "Call to ", name, ": undefined arg");
    if (call_type == Func) internal_assert(func != nullptr, "Call to Func ", name, " without func");
    if (call_type == Image) {
        internal_assert(param || buffer, "Call to image ", name, " without param or buffer");
    }
    auto c = std::make_shared<Call>(t, name, std::move(args), call_type);
    c->func = std::move(func);
    c->value_index = value_index;
    c->param = std::move(param);
    c->buffer = std::move(buffer);
    return Expr(std::shared_ptr<const BaseExprNode>(std::move(c)));
}

Stmt LetStmt::make(const std::string &name, Expr value, Stmt body) {
    check_defined(value, "LetStmt", "value");
    check_defined(body, "LetStmt", "body");
    auto n = new_stmt<LetStmt>();
    n->name = name;
    n->value = std::move(value);
    n->body = std::move(body);
    return Stmt(std::move(n));
}

Stmt AssertStmt::make(Expr condition, const std::string &message, std::vector<Expr> args,
                      int error_code) {
    for (const Expr &a : args)
        internal_assert(a.defined(), "AssertStmt: undefined message arg");
    check_defined(condition, "AssertStmt", "condition");
    internal_assert(condition.type() == Bool(), "AssertStmt: condition must be scalar bool");
    auto n = new_stmt<AssertStmt>();
    n->condition = std::move(condition);
    n->message = message;
    n->args = std::move(args);
    n->error_code = error_code;
    return Stmt(std::move(n));
}

Stmt For::make(const std::string &name, Expr min, Expr extent, ForType for_type, Stmt body) {
    check_defined(min, "For", "min");
    check_defined(extent, "For", "extent");
    check_defined(body, "For", "body");
    internal_assert(min.type() == Int(32) && extent.type() == Int(32),
                    "For: min and extent must be int32, got ", min.type(), " and ", extent.type());
    auto n = new_stmt<For>();
    n->name = name;
    n->min = std::move(min);
    n->extent = std::move(extent);
    n->for_type = for_type;
    n->body = std::move(body);
    return Stmt(std::move(n));
}

Stmt Provide::make(const std::string &name, std::vector<Expr> values, std::vector<Expr> args) {
    internal_assert(!values.empty(), "Provide to ", name, " without values");
    for (const Expr &v : values)
        internal_assert(v.defined(), "Provide: undefined value");
    for (const Expr &a : args)
        internal_assert(a.defined(), "Provide: undefined arg");
    auto n = new_stmt<Provide>();
    n->name = name;
    n->values = std::move(values);
    n->args = std::move(args);
    return Stmt(std::move(n));
}

Stmt Realize::make(const std::string &name, std::vector<Type> types, MemoryType memory_type,
                   std::vector<Range> bounds, Expr condition, Stmt body) {
    internal_assert(!types.empty(), "Realize of ", name, " without types");
    for (const Range &r : bounds) {
        internal_assert(r.min.defined() && r.extent.defined(), "Realize: undefined bound");
    }
    check_defined(body, "Realize", "body");
    auto n = new_stmt<Realize>();
    n->name = name;
    n->types = std::move(types);
    n->memory_type = memory_type;
    n->bounds = std::move(bounds);
    n->condition = std::move(condition);
    n->body = std::move(body);
    return Stmt(std::move(n));
}

Stmt Store::make(const std::string &name, Expr value, Expr index, Expr predicate) {
    check_defined(value, "Store", "value");
    check_defined(index, "Store", "index");
    internal_assert(index.type().element_of() == Int(32), "Store: index must be int32");
    internal_assert(value.type().lanes == index.type().lanes, "Store: lanes of value ",
                    value.type(), " and index ", index.type(), " differ");
    if (predicate.defined()) {
        internal_assert(predicate.type() == Bool(value.type().lanes), "Store: predicate type ",
                        predicate.type());
    }
    auto n = new_stmt<Store>();
    n->name = name;
    n->value = std::move(value);
    n->index = std::move(index);
    n->predicate = std::move(predicate);
    return Stmt(std::move(n));
}

Stmt Allocate::make(const std::string &name, Type type, MemoryType memory_type,
                    std::vector<Expr> extents, Expr condition, Stmt body) {
    for (const Expr &e : extents) {
        internal_assert(e.defined() && e.type() == Int(32), "Allocate: extents must be int32");
    }
    check_defined(body, "Allocate", "body");
    auto n = new_stmt<Allocate>();
    n->name = name;
    n->type = type;
    n->memory_type = memory_type;
    n->extents = std::move(extents);
    n->condition = std::move(condition);
    n->body = std::move(body);
    return Stmt(std::move(n));
}

Stmt Free::make(const std::string &name) {
    auto n = new_stmt<Free>();
    n->name = name;
    return Stmt(std::move(n));
}

Stmt Block::make(Stmt first, Stmt rest) {
    if (!first.defined()) return rest;
    if (!rest.defined()) return first;
    auto n = new_stmt<Block>();
    n->first = std::move(first);
    n->rest = std::move(rest);
    return Stmt(std::move(n));
}

Stmt Block::make(const std::vector<Stmt> &stmts) {
    Stmt result;
    for (auto it = stmts.rbegin(); it != stmts.rend(); ++it)
        result = make(*it, result);
    return result;
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
    check_defined(condition, "IfThenElse", "condition");
    check_defined(then_case, "IfThenElse", "then_case");
    internal_assert(condition.type() == Bool(), "IfThenElse: condition must be scalar bool, got ",
                    condition.type());
    auto n = new_stmt<IfThenElse>();
    n->condition = std::move(condition);
    n->then_case = std::move(then_case);
    n->else_case = std::move(else_case);
    return Stmt(std::move(n));
}

Stmt Evaluate::make(Expr value) {
    check_defined(value, "Evaluate", "value");
    auto n = new_stmt<Evaluate>();
    n->value = std::move(value);
    return Stmt(std::move(n));
}

Stmt ProducerConsumer::make(const std::string &name, bool is_producer, Stmt body) {
    check_defined(body, "ProducerConsumer", "body");
    auto n = new_stmt<ProducerConsumer>();
    n->name = name;
    n->is_producer = is_producer;
    n->body = std::move(body);
    return Stmt(std::move(n));
}

} // namespace kiln
