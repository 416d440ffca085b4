// Read-only traversal of the IR. Override visit() for the nodes of interest and call the base
// version to keep walking into children.
#pragma once

#include "lang/IR.h"

namespace kiln {

class IRVisitor {
public:
    virtual ~IRVisitor() = default;
    /// Visits an expression or statement; undefined handles are skipped.
    void include(const Expr &e);
    void include(const Stmt &s);

protected:
#define EXPR_NODE(Name) virtual void visit(const Name *op);
#define STMT_NODE(Name) virtual void visit(const Name *op);
#include "lang/IRNodes.def"
};

} // namespace kiln
