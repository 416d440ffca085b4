// Rewriting traversal of the IR. Each visit() returns the rewritten node; the defaults rebuild a
// node only when a child changed and otherwise return the original, so "unchanged" is free to
// detect with same_as(). A statement visit may return an undefined Stmt to remove it.
#pragma once

#include <vector>

#include "lang/IR.h"

namespace kiln {

class IRMutator {
public:
    virtual ~IRMutator() = default;
    virtual Expr mutate(const Expr &e);
    virtual Stmt mutate(const Stmt &s);

protected:
    /// Mutates each element; sets changed when any differs.
    std::vector<Expr> mutate_exprs(const std::vector<Expr> &v, bool *changed);

#define EXPR_NODE(Name) virtual Expr visit(const Name *op);
#define STMT_NODE(Name) virtual Stmt visit(const Name *op);
#include "lang/IRNodes.def"
};

/// Replaces free occurrences of the variable `name` (respecting Let shadowing).
Expr substitute(const std::string &name, const Expr &replacement, const Expr &e);
Stmt substitute(const std::string &name, const Expr &replacement, const Stmt &s);

} // namespace kiln
