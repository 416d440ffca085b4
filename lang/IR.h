// The kiln IR: expression and statement nodes. Each node is a small immutable struct with public
// fields and a static make() that checks its invariants and computes its type.
//
// Semantics
// ---------
// - Integer arithmetic wraps modulo 2^bits (two's complement for signed types); there is no
//   undefined behaviour on overflow. Shifts and bit operations are not part of the language.
// - Integer division and modulo are Euclidean: for b > 0, a / b rounds toward negative infinity
//   and a % b lies in [0, b). For b < 0, a % b lies in [0, |b|) and a == (a / b) * b + a % b.
//   Division or modulo by zero yields zero (no trap), as in Halide.
// - Floating point follows IEEE 754 with round-to-nearest-even in the declared precision (float32
//   operations round to float32), without contraction into fused multiply-add unless written as
//   fma(); a fast-math target flag relaxes this.
// - Casts from float to integer truncate toward zero and saturate: a value out of range gives the
//   type's minimum or maximum, NaN gives zero (LLVM's fptosi.sat/fptoui.sat; every layer, from
//   the evaluator and the simplifier to both backends, does this). Casts between integer types
//   wrap. Casts to bool compare with zero.
// - Comparisons produce bool; And/Or take bool operands and evaluate both (no short circuit).
// - Select evaluates both branches; a Load in an untaken branch must still be in bounds, so
//   boundary conditions clamp indices rather than guard loads.
// - Evaluation order of pure expressions is unobservable. Update definitions of a Func apply in
//   the order written, each one over its whole domain, reduction variables innermost-first in
//   the order given by the RDom (the first dimension varies fastest).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lang/Expr.h"

namespace kiln {

struct FunctionContents;
struct ParameterContents;
struct BufferContents;
struct RDomContents;

template <IRNodeType K>
struct ExprNode : BaseExprNode {
    static constexpr IRNodeType node_kind = K;
    explicit ExprNode(Type t) : BaseExprNode(K, t) {}
};

template <IRNodeType K>
struct StmtNode : BaseStmtNode {
    static constexpr IRNodeType node_kind = K;
    StmtNode() : BaseStmtNode(K) {}
};

struct IntImm : ExprNode<IRNodeType::IntImm> {
    int64_t value;
    IntImm(Type t, int64_t v) : ExprNode(t), value(v) {}
    /// A signed integer constant; the value is wrapped into the type's range.
    static Expr make(Type t, int64_t value);
};

struct UIntImm : ExprNode<IRNodeType::UIntImm> {
    uint64_t value;
    UIntImm(Type t, uint64_t v) : ExprNode(t), value(v) {}
    /// An unsigned integer or bool constant; the value is wrapped into the type's range.
    static Expr make(Type t, uint64_t value);
};

struct FloatImm : ExprNode<IRNodeType::FloatImm> {
    double value;
    FloatImm(Type t, double v) : ExprNode(t), value(v) {}
    /// A float constant; for float32 the value is rounded to float32.
    static Expr make(Type t, double value);
};

struct Cast : ExprNode<IRNodeType::Cast> {
    Expr value;
    Cast(Type t, Expr v) : ExprNode(t), value(std::move(v)) {}
    static Expr make(Type t, Expr value);
};

/// A named scalar: a loop variable, a let-bound name, a Param or an RVar.
struct Variable : ExprNode<IRNodeType::Variable> {
    std::string name;
    std::shared_ptr<ParameterContents> param; ///< set when the variable is a Param
    std::shared_ptr<RDomContents> rdom;       ///< set when the variable is an RVar
    Variable(Type t, std::string n) : ExprNode(t), name(std::move(n)) {}
    static Expr make(Type t, const std::string &name,
                     std::shared_ptr<ParameterContents> param = nullptr,
                     std::shared_ptr<RDomContents> rdom = nullptr);
};

#define KILN_BINARY_NODE(Name)                                                                     \
    struct Name : ExprNode<IRNodeType::Name> {                                                     \
        Expr a, b;                                                                                 \
        Name(Type t, Expr x, Expr y) : ExprNode(t), a(std::move(x)), b(std::move(y)) {}            \
        static Expr make(Expr a, Expr b);                                                          \
    };
KILN_BINARY_NODE(Add)
KILN_BINARY_NODE(Sub)
KILN_BINARY_NODE(Mul)
KILN_BINARY_NODE(Div)
KILN_BINARY_NODE(Mod)
KILN_BINARY_NODE(Min)
KILN_BINARY_NODE(Max)
KILN_BINARY_NODE(EQ)
KILN_BINARY_NODE(NE)
KILN_BINARY_NODE(LT)
KILN_BINARY_NODE(LE)
KILN_BINARY_NODE(GT)
KILN_BINARY_NODE(GE)
KILN_BINARY_NODE(And)
KILN_BINARY_NODE(Or)
#undef KILN_BINARY_NODE

struct Not : ExprNode<IRNodeType::Not> {
    Expr a;
    Not(Type t, Expr x) : ExprNode(t), a(std::move(x)) {}
    static Expr make(Expr a);
};

struct Select : ExprNode<IRNodeType::Select> {
    Expr condition, true_value, false_value;
    Select(Type t, Expr c, Expr tv, Expr fv)
        : ExprNode(t), condition(std::move(c)), true_value(std::move(tv)),
          false_value(std::move(fv)) {}
    static Expr make(Expr condition, Expr true_value, Expr false_value);
};

/// A load from a flattened buffer. A defined predicate masks lanes that must not be read.
struct Load : ExprNode<IRNodeType::Load> {
    std::string name;
    Expr index;
    Expr predicate; ///< undefined means every lane is read
    Load(Type t, std::string n, Expr i, Expr p)
        : ExprNode(t), name(std::move(n)), index(std::move(i)), predicate(std::move(p)) {}
    static Expr make(Type t, const std::string &name, Expr index, Expr predicate = Expr());
};

/// The vector [base, base + stride, ..., base + (lanes - 1) * stride].
struct Ramp : ExprNode<IRNodeType::Ramp> {
    Expr base, stride;
    int lanes;
    Ramp(Type t, Expr b, Expr s, int l)
        : ExprNode(t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
    static Expr make(Expr base, Expr stride, int lanes);
};

/// A scalar repeated across lanes.
struct Broadcast : ExprNode<IRNodeType::Broadcast> {
    Expr value;
    int lanes;
    Broadcast(Type t, Expr v, int l) : ExprNode(t), value(std::move(v)), lanes(l) {}
    static Expr make(Expr value, int lanes);
};

struct Let : ExprNode<IRNodeType::Let> {
    std::string name;
    Expr value, body;
    Let(Type t, std::string n, Expr v, Expr b)
        : ExprNode(t), name(std::move(n)), value(std::move(v)), body(std::move(b)) {}
    static Expr make(const std::string &name, Expr value, Expr body);
};

/// A call: to a Func (before lowering), to an input image, to a pure math function such as exp,
/// or to a compiler intrinsic.
struct Call : ExprNode<IRNodeType::Call> {
    enum CallType : uint8_t { Func, Image, Math, Intrinsic };
    std::string name;
    std::vector<Expr> args;
    CallType call_type;
    int value_index = 0;                      ///< which value of a multi-valued Func
    std::shared_ptr<FunctionContents> func;   ///< for Func calls
    std::shared_ptr<ParameterContents> param; ///< for Image calls to an ImageParam
    std::shared_ptr<BufferContents> buffer;   ///< for Image calls to a concrete Buffer
    Call(Type t, std::string n, std::vector<Expr> a, CallType ct)
        : ExprNode(t), name(std::move(n)), args(std::move(a)), call_type(ct) {}
    static Expr make(Type t, const std::string &name, std::vector<Expr> args, CallType call_type,
                     std::shared_ptr<FunctionContents> func = nullptr, int value_index = 0,
                     std::shared_ptr<ParameterContents> param = nullptr,
                     std::shared_ptr<BufferContents> buffer = nullptr);
};

/// Names of the intrinsics, so that passes do not spell strings.
namespace intrinsic {
inline constexpr const char *likely = "likely"; ///< a hint: the argument is usually true
inline constexpr const char *abs = "abs";       ///< absolute value, unsigned result for ints
inline constexpr const char *fma = "fma";       ///< fused multiply-add, one rounding
/// (element) -> int32 0, in Evaluate: a hint to bring the element's cache line into the caches
/// (schedule/InjectPrefetch.h); its argument is a call to a Func or image element, a Load after
/// storage flattening, whose address is prefetched and which is never loaded.
inline constexpr const char *prefetch = "prefetch";
/// (c, c_row_stride, a, a_row_stride, b, b_k4_stride, rows, cols, k4, zero_first,
/// b_column_tile_stride) -> int32 0, in Evaluate (schedule/Tensorize.h): c[rows x cols] +=
/// a[rows x 4 k4] . b[k4 x cols x 4] on the CPU's matrix unit (c = a . b where the bool
/// zero_first holds), where c (int32 or float32), a and b (8-bit or bfloat16) are Loads of the
/// tiles' first elements, whose addresses are taken and which are never loaded; strides count
/// elements; b holds 4 bytes of consecutive k of a column together, and its second tile of 16
/// columns starts b_column_tile_stride elements after its first (16 columns further where b is
/// contiguous); rows, cols (at most 32: 2 x 2 tiles) and k4 are constants.
inline constexpr const char *tile_matmul = "tile_matmul";
// Device code (see schedule/LoweredFunc.h, DeviceKernel):
inline constexpr const char *gpu_block_id = "gpu_block_id";   ///< (int32 dim) -> int32
inline constexpr const char *gpu_thread_id = "gpu_thread_id"; ///< (int32 dim) -> int32
inline constexpr const char *gpu_barrier = "gpu_barrier";     ///< () -> int32 0, in Evaluate
} // namespace intrinsic

struct LetStmt : StmtNode<IRNodeType::LetStmt> {
    std::string name;
    Expr value;
    Stmt body;
    static Stmt make(const std::string &name, Expr value, Stmt body);
};

/// Fails the pipeline when the condition is false. The message is a printf format whose
/// conversions (%d for int32, %lld for int64, %f for floats) take the values of args.
struct AssertStmt : StmtNode<IRNodeType::AssertStmt> {
    Expr condition;
    std::string message;
    std::vector<Expr> args;
    int error_code = -10; ///< kiln_error_assertion_failed unless a more specific code applies
    static Stmt make(Expr condition, const std::string &message, std::vector<Expr> args = {},
                     int error_code = -10);
};

struct For : StmtNode<IRNodeType::For> {
    std::string name;
    Expr min, extent;
    ForType for_type;
    Stmt body;
    static Stmt make(const std::string &name, Expr min, Expr extent, ForType for_type, Stmt body);
};

/// Writes values of a Func at a multi-dimensional site (before storage flattening).
struct Provide : StmtNode<IRNodeType::Provide> {
    std::string name;
    std::vector<Expr> values;
    std::vector<Expr> args;
    static Stmt make(const std::string &name, std::vector<Expr> values, std::vector<Expr> args);
};

/// Allocates a multi-dimensional region of a Func for the body (before storage flattening).
struct Realize : StmtNode<IRNodeType::Realize> {
    std::string name;
    std::vector<Type> types;
    MemoryType memory_type;
    std::vector<Range> bounds;
    Expr condition;
    Stmt body;
    static Stmt make(const std::string &name, std::vector<Type> types, MemoryType memory_type,
                     std::vector<Range> bounds, Expr condition, Stmt body);
};

struct Store : StmtNode<IRNodeType::Store> {
    std::string name;
    Expr value, index;
    Expr predicate; ///< undefined means every lane is written
    static Stmt make(const std::string &name, Expr value, Expr index, Expr predicate = Expr());
};

/// A flat allocation of product(extents) elements, live in the body.
struct Allocate : StmtNode<IRNodeType::Allocate> {
    std::string name;
    Type type;
    MemoryType memory_type;
    std::vector<Expr> extents;
    Expr condition;
    Stmt body;
    static Stmt make(const std::string &name, Type type, MemoryType memory_type,
                     std::vector<Expr> extents, Expr condition, Stmt body);
};

struct Free : StmtNode<IRNodeType::Free> {
    std::string name;
    static Stmt make(const std::string &name);
};

struct Block : StmtNode<IRNodeType::Block> {
    Stmt first, rest;
    static Stmt make(Stmt first, Stmt rest);
    /// A block of several statements; undefined ones are skipped.
    static Stmt make(const std::vector<Stmt> &stmts);
};

struct IfThenElse : StmtNode<IRNodeType::IfThenElse> {
    Expr condition;
    Stmt then_case, else_case; ///< else_case may be undefined
    static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
};

struct Evaluate : StmtNode<IRNodeType::Evaluate> {
    Expr value;
    static Stmt make(Expr value);
};

/// Marks the region that produces (or consumes) a Func, for readability and for passes.
struct ProducerConsumer : StmtNode<IRNodeType::ProducerConsumer> {
    std::string name;
    bool is_producer;
    Stmt body;
    static Stmt make(const std::string &name, bool is_producer, Stmt body);
};

} // namespace kiln
