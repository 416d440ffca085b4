// A scheduling directive as plain data: the primitive a user called on a Func or Stage and its
// arguments. The front end only records directives (after checks that need no loop structure);
// schedule/ interprets them, validates them against the loop nest and lowers them. Because a
// schedule is nothing but this list, it saves to JSON, prints as C++ and replays on a freshly
// built pipeline of the same algorithm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// How a split handles an extent that is not a multiple of the factor.
enum class TailStrategy : uint8_t {
    Auto,         ///< ShiftInwards for pure definitions writing only their own site, else Guard
    GuardWithIf,  ///< the last iteration skips points past the end
    ShiftInwards, ///< the last iteration shifts inwards and recomputes some points
    RoundUp,      ///< compute past the end (the realization is rounded up)
};
const char *tail_strategy_name(TailStrategy t);
bool parse_tail_strategy(const std::string &s, TailStrategy *out);

/// What a prefetch does at the end of the loop it looks ahead in (Halide's names).
enum class PrefetchBoundStrategy : uint8_t {
    Clamp,       ///< the last iterations prefetch the last iteration's region again
    GuardWithIf, ///< the last iterations prefetch nothing
    NonFaulting, ///< no check: the region past the end is prefetched too (prefetches never fault)
};
const char *prefetch_strategy_name(PrefetchBoundStrategy s);
bool parse_prefetch_strategy(const std::string &s, PrefetchBoundStrategy *out);

/// A scheduling primitive: one row of lang/Directives.def. Each enumerator is the name of the
/// Stage or Func method that records it.
enum class Primitive : uint8_t {
#define DIRECTIVE(name, ...) name,
#include "lang/Directives.def"
};

/// What a primitive takes: its row of lang/Directives.def (the columns are explained there).
struct PrimitiveSpec {
    enum class On : uint8_t { Stage, Update, Func };
    enum class TargetFunc : uint8_t { None, Consumer, NewFunc, Prefetched };
    enum class OptionKind : uint8_t { None, Tail, Memory, Prefetch };
    enum class VarKinds : uint8_t { Any, PureOnly, RVarThenVar, Funcs };
    static constexpr size_t Many = SIZE_MAX;

    Primitive primitive;
    const char *name;
    On on;
    size_t min_vars, max_vars;
    size_t ints;
    TargetFunc target;
    OptionKind option;
    VarKinds vars;
};

/// Every primitive's row, in the order of lang/Directives.def.
const std::vector<PrimitiveSpec> &primitive_specs();
const PrimitiveSpec &primitive_spec(Primitive p);
/// The name a Directive records, JSON stores and C++ calls: "split", "gpu_blocks".
const char *primitive_name(Primitive p);
/// The primitive a Directive::primitive names; false for a name that no row has.
bool parse_primitive(const std::string &name, Primitive *out);

/// One recorded scheduling call.
struct Directive {
    std::string func;              ///< the Func called on; for in, the Func or ImageParam wrapped
    int stage = 0;                 ///< 0 for the pure definition, i + 1 for update(i)
    std::string primitive;         ///< the name of a row of lang/Directives.def (primitive_name)
    std::vector<std::string> vars; ///< variable names, in the primitive's order; in: consumers
    std::vector<bool> is_rvar;     ///< per var: whether it names an RVar
    std::vector<int64_t> ints;     ///< factors, bounds
    std::string target;   ///< compute_at/store_at: the consumer; rfactor, in: new Func; prefetch:
                          ///< the Func or ImageParam prefetched
    std::string option;   ///< tail strategy, memory type, prefetch bound strategy
    int64_t sequence = 0; ///< global order of the calls, so a trace can be replayed
    /// A split of an RVar that a later rfactor of its outer part made part of the algorithm (the
    /// update's RDom has the outer and inner RVars themselves): lowering skips it; traces keep
    /// it, so a replay splits and rfactors, and folds it, again.
    bool folded_into_rdom = false;
};

/// A process-wide increasing number for ordering directives across Funcs.
int64_t next_directive_sequence();

} // namespace kiln
