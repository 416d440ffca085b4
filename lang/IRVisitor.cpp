#include "lang/IRVisitor.h"

#include "lang/Error.h"

namespace kiln {

void IRVisitor::include(const Expr &e) {
    if (!e.defined()) return;
    switch (e->node_type) {
#define EXPR_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        visit(static_cast<const Name *>(e.get()));                                                 \
        return;
#include "lang/IRNodes.def"
    default:
        internal_error("statement node in an expression");
    }
}

void IRVisitor::include(const Stmt &s) {
    if (!s.defined()) return;
    switch (s->node_type) {
#define STMT_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        visit(static_cast<const Name *>(s.get()));                                                 \
        return;
#include "lang/IRNodes.def"
    default:
        internal_error("expression node in a statement");
    }
}

void IRVisitor::visit(const IntImm *) {}
void IRVisitor::visit(const UIntImm *) {}
void IRVisitor::visit(const FloatImm *) {}
void IRVisitor::visit(const Variable *) {}
void IRVisitor::visit(const Cast *op) {
    include(op->value);
}

#define KILN_VISIT_BINARY(Name)                                                                    \
    void IRVisitor::visit(const Name *op) {                                                        \
        include(op->a);                                                                            \
        include(op->b);                                                                            \
    }
KILN_VISIT_BINARY(Add)
KILN_VISIT_BINARY(Sub)
KILN_VISIT_BINARY(Mul)
KILN_VISIT_BINARY(Div)
KILN_VISIT_BINARY(Mod)
KILN_VISIT_BINARY(Min)
KILN_VISIT_BINARY(Max)
KILN_VISIT_BINARY(EQ)
KILN_VISIT_BINARY(NE)
KILN_VISIT_BINARY(LT)
KILN_VISIT_BINARY(LE)
KILN_VISIT_BINARY(GT)
KILN_VISIT_BINARY(GE)
KILN_VISIT_BINARY(And)
KILN_VISIT_BINARY(Or)
#undef KILN_VISIT_BINARY

void IRVisitor::visit(const Not *op) {
    include(op->a);
}
void IRVisitor::visit(const Select *op) {
    include(op->condition);
    include(op->true_value);
    include(op->false_value);
}
void IRVisitor::visit(const Load *op) {
    include(op->index);
    include(op->predicate);
}
void IRVisitor::visit(const Ramp *op) {
    include(op->base);
    include(op->stride);
}
void IRVisitor::visit(const Broadcast *op) {
    include(op->value);
}
void IRVisitor::visit(const Let *op) {
    include(op->value);
    include(op->body);
}
void IRVisitor::visit(const Call *op) {
    for (const Expr &a : op->args)
        include(a);
}
void IRVisitor::visit(const LetStmt *op) {
    include(op->value);
    include(op->body);
}
void IRVisitor::visit(const AssertStmt *op) {
    include(op->condition);
    for (const Expr &a : op->args)
        include(a);
}
void IRVisitor::visit(const For *op) {
    include(op->min);
    include(op->extent);
    include(op->body);
}
void IRVisitor::visit(const Provide *op) {
    for (const Expr &v : op->values)
        include(v);
    for (const Expr &a : op->args)
        include(a);
}
void IRVisitor::visit(const Realize *op) {
    for (const Range &r : op->bounds) {
        include(r.min);
        include(r.extent);
    }
    include(op->condition);
    include(op->body);
}
void IRVisitor::visit(const Store *op) {
    include(op->value);
    include(op->index);
    include(op->predicate);
}
void IRVisitor::visit(const Allocate *op) {
    for (const Expr &e : op->extents)
        include(e);
    include(op->condition);
    include(op->body);
}
void IRVisitor::visit(const Free *) {}
void IRVisitor::visit(const Block *op) {
    include(op->first);
    include(op->rest);
}
void IRVisitor::visit(const IfThenElse *op) {
    include(op->condition);
    include(op->then_case);
    include(op->else_case);
}
void IRVisitor::visit(const Evaluate *op) {
    include(op->value);
}
void IRVisitor::visit(const ProducerConsumer *op) {
    include(op->body);
}

} // namespace kiln
