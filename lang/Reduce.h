// TVM-style definitions: compute() builds a Func from a shape and a lambda, and the inline
// reducers sum, maximum, minimum, argmax and argmin reduce an expression over the RDom whose
// RVars it uses. Each reducer becomes an anonymous Func over the free Vars of its argument, so
// `compute({M, N}, [&](Var i, Var j) { return sum(A(k, j) * B(i, k)); })` is the same algorithm
// as an update definition over k.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lang/Func.h"

namespace kiln {

Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var)> &body,
             const std::string &name = "");
Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var)> &body,
             const std::string &name = "");
Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var, Var)> &body,
             const std::string &name = "");
Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var, Var, Var)> &body,
             const std::string &name = "");
/// Any number of dimensions: the lambda receives one Var per dimension of the shape.
Func compute(const std::vector<Expr> &shape,
             const std::function<Expr(const std::vector<Var> &)> &body,
             const std::string &name = "");

/// The sum of e over its RDom, in e's type.
Expr sum(const Expr &e, const std::string &name = "");
/// The largest value of e over its RDom (the type's lowest value when the RDom is empty).
Expr maximum(const Expr &e, const std::string &name = "");
/// The smallest value of e over its RDom (the type's highest value when the RDom is empty).
Expr minimum(const Expr &e, const std::string &name = "");
/// The coordinates of the first largest value of e over its RDom (one int32 per RDom dimension),
/// followed by that value.
Tuple argmax(const Expr &e, const std::string &name = "");
/// The coordinates of the first smallest value of e over its RDom, followed by that value.
Tuple argmin(const Expr &e, const std::string &name = "");

} // namespace kiln
