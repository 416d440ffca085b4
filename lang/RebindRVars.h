// Rebinding an expression's RVars from one RDom to another, or to none: RDom::where keeps its
// predicate with its RVars unbound, a definition binds them again when it copies it, and rfactor
// moves a term onto the intermediate's RDom.
#pragma once

#include <memory>

#include "lang/Expr.h"

namespace kiln {

struct RDomContents;

/// e with the RVars of `from` replaced by the RVars of the same names in `to`, or by unbound
/// Variables of their names when `to` is null. A null `from` stands for unbound Variables (neither
/// RVars nor Params) named as RVars of `to`. A Variable whose name `to` lacks is kept as it is.
Expr rebind_rvars(const Expr &e, const RDomContents *from, const std::shared_ptr<RDomContents> &to);

} // namespace kiln
