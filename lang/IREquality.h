// Structural comparison and hashing of IR: two trees are equal when they have the same node kinds,
// types, names and constants in the same shape, whether or not they share nodes.
#pragma once

#include <cstddef>

#include "lang/IR.h"

namespace kiln {

/// A total order on expressions (negative, zero or positive), used for canonical operand order.
int compare(const Expr &a, const Expr &b);
int compare(const Stmt &a, const Stmt &b);

bool equal(const Expr &a, const Expr &b);
bool equal(const Stmt &a, const Stmt &b);

/// A structural hash consistent with equal().
size_t structural_hash(const Expr &e);
size_t structural_hash(const Stmt &s);

/// Orders expressions structurally, for use as a std::map key.
struct ExprLess {
    bool operator()(const Expr &a, const Expr &b) const { return compare(a, b) < 0; }
};

} // namespace kiln
