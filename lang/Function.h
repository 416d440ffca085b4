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
    /// RDom::where's predicate, copied when the update was defined: the update stores its values
    /// only at the points of the domain where it is true. Undefined: at every point.
    Expr predicate;
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
    /// Func::in: the wrappers of this Func by the name of the consumer that reads them ("" for
    /// the wrapper read by every consumer; a wrapper of several consumers is under each name).
    /// Schedule state, not algorithm: lowering redirects the consumers' calls
    /// (schedule/ApplyWrappers.h); the definitions here are never rewritten. A wrapper's own
    /// call to this Func does not own it (it owns the wrapper), as with self-calls.
    std::map<std::string, std::shared_ptr<FunctionContents>> wrappers;
    /// On a wrapper made by in(): the name of the Func or ImageParam it wraps; else empty.
    std::string wrapped;
    /// Func::set_estimate: the region a tuner computes this output over, by pure variable name
    /// (min, extent). Not a schedule and not part of the algorithm's hash.
    std::map<std::string, std::pair<int64_t, int64_t>> estimates;
    /// Func::output_buffers: the buffers an output is written into, one per value, made when
    /// first asked for; what a caller promises about them (Dimension::set_stride and the
    /// others). Not part of the algorithm's hash, as an ImageParam's promises are not.
    std::vector<std::shared_ptr<ParameterContents>> output_buffers;

    bool has_pure_definition() const { return !init.values.empty(); }
    int dimensions() const { return int(args.size()); }
};

using FunctionPtr = std::shared_ptr<FunctionContents>;

/// The name of the buffer holding value `index` of f: f's name, or `name.index` where f has
/// several values (a Tuple).
std::string buffer_name(const FunctionContents &f, int index);

/// Every Func reachable from the outputs through calls, including the outputs, by name.
/// Raises CompileError naming the cycle for a recursive definition.
std::vector<FunctionPtr> reachable_functions(const std::vector<FunctionPtr> &outputs);

/// e with its calls to `self` made non-owning: a Func owns its definitions, so a definition that
/// owned the Func it belongs to would form a reference cycle and leak.
Expr weaken_self_calls(const Expr &e, const FunctionContents *self);

/// The Funcs called directly by a function's definitions (pure and updates), by name.
std::vector<FunctionPtr> direct_callees(const FunctionPtr &f);

/// The ImageParams called directly by a function's definitions (pure and updates), by name.
std::vector<std::shared_ptr<ParameterContents>> direct_image_params(const FunctionPtr &f);

/// One step of in()'s rule: the wrapper that `consumer` reads in place of the Func or ImageParam
/// named `wrapped`, whose wrappers these are, or null. The wrapper kept under the consumer's name
/// if there is one; else the wrapper for every consumer, unless the consumer is itself a wrapper
/// of `wrapped` (a wrapper reads what it wraps); never the consumer itself. The wrapper read may
/// have a wrapper of its own for the consumer (f.in(g).in(g)): apply the rule again to it.
FunctionPtr wrapper_read_by(const std::map<std::string, FunctionPtr> &wrappers,
                            const std::string &wrapped, const FunctionContents &consumer);

/// reachable_functions, then the in() wrappers of those Funcs and of the ImageParams they call,
/// and the wrappers' own wrappers: every Func whose directives belong to the pipeline's schedule
/// (ScheduleTrace captures, replays and removes these). A wrapper is listed when it exists,
/// whether or not one of its consumers is in this pipeline.
std::vector<FunctionPtr> scheduled_functions(const std::vector<FunctionPtr> &outputs);

} // namespace kiln
