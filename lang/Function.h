// The definition of a Func as data: its pure arguments, pure definition and update definitions.
// Func (Func.h) is the user-facing handle; passes and the reference evaluator read this.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lang/Directive.h"
#include "lang/IR.h"
#include "lang/Var.h"

namespace kiln {

/// One definition of a Func: the values stored at the site given by args. For the pure
/// definition the args are the pure Vars; for an update they may be any expressions of the pure
/// Vars and the RVars of its RDom.
struct Definition {
    std::vector<Expr> args;
    std::vector<Expr> values;
    std::shared_ptr<RDomContents> rdom; ///< the update's reduction domain, if it has one
};

/// Calls to a Func inside its own update definitions point at it without owning it (otherwise
/// every reduction would own itself and leak): hold the Func, or a call to it, while using Exprs
/// taken from its definitions.
struct FunctionContents {
    std::string name;
    std::vector<std::string> args; ///< the pure variables, dimension 0 first
    std::vector<Type> output_types;
    Definition init; ///< empty values until the pure definition is given
    std::vector<Definition> updates;
    std::vector<Expr> shape;           ///< the output extents given to compute(), if any
    std::vector<Directive> directives; ///< scheduling calls, in the order they were made
    /// rfactor rewrites updates; the algorithm as the user wrote it is kept for hashing.
    std::vector<Definition> original_updates;
    bool updates_rewritten = false;
    bool made_by_rfactor = false; ///< an intermediate created by a schedule, not the user
    /// Func::set_estimate: the region a tuner computes this output over, by pure variable name
    /// (min, extent). Not a schedule and not part of the algorithm's hash.
    std::map<std::string, std::pair<int64_t, int64_t>> estimates;

    bool has_pure_definition() const { return !init.values.empty(); }
    int dimensions() const { return int(args.size()); }
};

using FunctionPtr = std::shared_ptr<FunctionContents>;

/// Every Func reachable from the outputs through calls, including the outputs, by name.
/// Raises CompileError naming the cycle for a recursive definition.
std::vector<FunctionPtr> reachable_functions(const std::vector<FunctionPtr> &outputs);

/// e with its calls to `self` made non-owning: a Func owns its definitions, so a definition that
/// owned the Func it belongs to would form a reference cycle and leak.
Expr weaken_self_calls(const Expr &e, const FunctionContents *self);

/// The Funcs called directly by a function's definitions (pure and updates), by name.
std::vector<FunctionPtr> direct_callees(const FunctionPtr &f);

} // namespace kiln
