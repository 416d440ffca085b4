// Handles to immutable, shared IR nodes: Expr (a value) and Stmt (an effect).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lang/Type.h"

namespace kiln {

/// One enumerator per node kind, in the order of IRNodes.def.
enum class IRNodeType : uint8_t {
#define EXPR_NODE(Name) Name,
#define STMT_NODE(Name) Name,
#include "lang/IRNodes.def"
};

const char *node_type_name(IRNodeType t);

struct IRNode : std::enable_shared_from_this<IRNode> {
    explicit IRNode(IRNodeType t) : node_type(t) {}
    virtual ~IRNode() = default;
    IRNode(const IRNode &) = delete;
    IRNode &operator=(const IRNode &) = delete;
    const IRNodeType node_type;
};

struct BaseExprNode : IRNode {
    BaseExprNode(IRNodeType t, Type ty) : IRNode(t), type(ty) {}
    const Type type;
};

struct BaseStmtNode : IRNode {
    using IRNode::IRNode;
};

/// Base of the two handle types: a shared pointer to a const node with a checked downcast.
template <typename Node>
class IRHandle {
public:
    IRHandle() = default;
    explicit IRHandle(std::shared_ptr<const Node> n) : ptr(std::move(n)) {}
    /// A handle to a node that is already owned by another handle (as in a visitor).
    explicit IRHandle(const Node *n)
        : ptr(n ? std::static_pointer_cast<const Node>(n->shared_from_this()) : nullptr) {}

    bool defined() const { return ptr != nullptr; }
    const Node *get() const { return ptr.get(); }
    const Node *operator->() const { return ptr.get(); }
    /// The node as type T, or null when it is another kind.
    template <typename T>
    const T *as() const {
        if (ptr && ptr->node_type == T::node_kind) return static_cast<const T *>(ptr.get());
        return nullptr;
    }
    /// Identity (not structural) comparison: the same shared node.
    bool same_as(const IRHandle &o) const { return ptr == o.ptr; }

protected:
    std::shared_ptr<const Node> ptr;
};

struct IntImm;

/// An expression: a value of some Type computed from variables, constants, loads and calls.
class Expr : public IRHandle<BaseExprNode> {
public:
    using IRHandle::IRHandle;
    /// An int32 constant, so that `f(x) = x + 1` reads naturally.
    Expr(int v);
    Expr(int64_t v);
    Expr(float v);
    Expr(double v);
    Type type() const { return ptr->type; }
};

/// A statement: a loop, a store, an allocation and the like. Produced by lowering.
class Stmt : public IRHandle<BaseStmtNode> {
public:
    using IRHandle::IRHandle;
};

/// A half-open interval [min, min + extent) in one dimension.
struct Range {
    Expr min, extent;
    Range() = default;
    Range(Expr m, Expr e) : min(std::move(m)), extent(std::move(e)) {}
};

/// How a loop runs.
/// Tensorized: the loop nest is replaced by a matrix-unit intrinsic when lowering
/// (schedule/Tensorize.h); no Tensorized loop is left in lowered code.
enum class ForType : uint8_t {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    GPUBlock,
    GPUThread,
    Tensorized
};
const char *for_type_name(ForType t);

/// Where an allocation lives.
enum class MemoryType : uint8_t { Auto, Stack, Heap, Register, GPUShared };
const char *memory_type_name(MemoryType t);

} // namespace kiln
