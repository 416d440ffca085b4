// Func: a function over an integer grid, defined by a pure definition and any number of update
// definitions. `f(x, y) = ...` defines it; `f(x, y) += ...`, `f(r.x) = max(f(r.x), ...)` update it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lang/Buffer.h"
#include "lang/Directive.h"
#include "lang/Function.h"
#include "lang/IR.h"
#include "lang/Param.h"
#include "lang/Var.h"

namespace kiln {

class Func;
class ImageParam;

/// A variable named in a schedule: a pure Var or an RVar.
class VarOrRVar {
public:
    VarOrRVar(const Var &v) : var_name(v.name()), rvar(false) {}
    VarOrRVar(const RVar &r) : var_name(r.name()), rvar(true) {}
    VarOrRVar(const RDom &r) : VarOrRVar(RVar(r)) {}
    VarOrRVar(const std::string &name, bool is_rvar) : var_name(name), rvar(is_rvar) {}
    const std::string &name() const { return var_name; }
    bool is_rvar() const { return rvar; }

private:
    std::string var_name;
    bool rvar;
};

/// Several values computed together at each point (for argmax and multi-output Funcs).
class Tuple {
public:
    Tuple(std::initializer_list<Expr> values) : exprs(values) {}
    explicit Tuple(std::vector<Expr> values) : exprs(std::move(values)) {}
    const Expr &operator[](size_t i) const;
    size_t size() const { return exprs.size(); }
    const std::vector<Expr> &as_vector() const { return exprs; }

private:
    std::vector<Expr> exprs;
};

/// `f(args)` on the left or right of a definition.
class FuncRef {
public:
    FuncRef(FunctionPtr f, std::vector<Expr> args) : func(std::move(f)), args(std::move(args)) {}

    /// Defines the Func (pure definition) or adds an update definition.
    FuncRef &operator=(const Expr &e);
    FuncRef &operator=(const Tuple &t);
    FuncRef &operator=(const FuncRef &other);
    /// Update definitions; without a pure definition the initial value is the identity
    /// (0 for += and -=, 1 for *= and /=).
    FuncRef &operator+=(const Expr &e);
    FuncRef &operator-=(const Expr &e);
    FuncRef &operator*=(const Expr &e);
    FuncRef &operator/=(const Expr &e);

    /// The value at this site; the Func must be defined and single-valued.
    operator Expr() const;
    /// One value of a multi-valued Func.
    Expr operator[](int i) const;

private:
    FunctionPtr func;
    std::vector<Expr> args;

    void define(std::vector<Expr> values);
    void update_with(const Expr &e, const char *op, int identity);
};

/// A stage of a Func: its pure definition (index 0) or update i (index i + 1). Schedules of
/// update definitions are written on stages.
class Stage {
public:
    Stage(FunctionPtr f, int index) : func(std::move(f)), index(index) {}
    const FunctionPtr &function() const { return func; }
    int stage_index() const { return index; }
    /// "f" for the pure definition, "f.update(0)" for the first update.
    std::string name() const;

    // Loop transformations of this stage (recorded as directives; see lang/Directive.h).
    Stage &split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner, int factor,
                 TailStrategy tail = TailStrategy::Auto);
    Stage &fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused);
    /// Loop order, innermost first (as in Halide).
    Stage &reorder(const std::vector<VarOrRVar> &vars);
    template <typename... Vs>
    Stage &reorder(const VarOrRVar &a, const VarOrRVar &b, const Vs &...rest) {
        return reorder(std::vector<VarOrRVar>{a, b, VarOrRVar(rest)...});
    }
    Stage &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
                const VarOrRVar &xi, const VarOrRVar &yi, int xfactor, int yfactor,
                TailStrategy tail = TailStrategy::Auto);
    /// Tiles in place: the outer loops keep the names x and y.
    Stage &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xi, const VarOrRVar &yi,
                int xfactor, int yfactor, TailStrategy tail = TailStrategy::Auto);
    Stage &tile(const std::vector<VarOrRVar> &vars, const std::vector<VarOrRVar> &outers,
                const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
                TailStrategy tail = TailStrategy::Auto);
    Stage &vectorize(const VarOrRVar &var);
    /// Splits by the factor and vectorizes the inner loop.
    Stage &vectorize(const VarOrRVar &var, int factor, TailStrategy tail = TailStrategy::Auto);
    Stage &unroll(const VarOrRVar &var);
    Stage &unroll(const VarOrRVar &var, int factor, TailStrategy tail = TailStrategy::Auto);
    Stage &parallel(const VarOrRVar &var);
    Stage &serial(const VarOrRVar &var);
    /// Maps the loop nest from `var` inward onto the target's matrix unit (Intel AMX on x86):
    /// an update `c(j, i) += i32(a(r.x + 4 * r.y, i)) * i32(b(r.x, j, r.y))` of 8-bit inputs
    /// (b in the unit's layout: 4 consecutive k per column) whose loops inside `var` are the
    /// rows i (at most 32), the columns j (at most 32, dense in c), r.x (4) and r.y (any
    /// constant) becomes up to 2 x 2 tiles of 16 x 16 sums, one tile multiply each per 64 values
    /// of k, kept in tile registers across the whole reduction. See docs/ARCHITECTURE.md
    /// (the pass `tensorize`, and the AMX code under "Code generation and running").
    Stage &tensorize(const VarOrRVar &var);

    // GPU loops (Halide's names). The loops named become loops over GPU blocks or over the
    // threads of a block, in the dimension given by their position: x first, then y, then z.
    Stage &gpu_blocks(const VarOrRVar &x);
    Stage &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y);
    Stage &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z);
    Stage &gpu_threads(const VarOrRVar &x);
    Stage &gpu_threads(const VarOrRVar &x, const VarOrRVar &y);
    Stage &gpu_threads(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z);
    /// Runs the stage on the GPU in a single thread.
    Stage &gpu_single_thread();

    /// Software prefetch (Halide's): at the top of each iteration of loop `at`, prefetch into
    /// the cache the region of `f` (a Func or an ImageParam this stage reads) that the body of
    /// `at` will read `offset` iterations of loop `from` later. `from` is `at` or a loop
    /// outside it; `offset` is a constant integer. The region is what bounds inference gives for
    /// one iteration, one prefetch per cache line of its innermost dimension. `strategy` says
    /// what the last `offset` iterations do (PrefetchBoundStrategy). CPU loops only: `at` may
    /// not be vectorized or a GPU loop, nor lie inside one.
    Stage &prefetch(const Func &f, const VarOrRVar &at, const VarOrRVar &from,
                    const Expr &offset = 1,
                    PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf);
    Stage &prefetch(const ImageParam &image, const VarOrRVar &at, const VarOrRVar &from,
                    const Expr &offset = 1,
                    PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf);
    /// Splits x by tx into xo and xi, then gpu_blocks(xo) and gpu_threads(xi).
    Stage &gpu_tile(const VarOrRVar &x, const VarOrRVar &xo, const VarOrRVar &xi, int tx,
                    TailStrategy tail = TailStrategy::Auto);
    /// Splits x and y, reorder(xi, yi, xo, yo), gpu_blocks(xo, yo) and gpu_threads(xi, yi).
    Stage &gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo,
                    const VarOrRVar &yo, const VarOrRVar &xi, const VarOrRVar &yi, int tx, int ty,
                    TailStrategy tail = TailStrategy::Auto);
    /// The 3-D gpu_tile: the blocks and threads are (xo, yo, zo) and (xi, yi, zi).
    Stage &gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z, const VarOrRVar &xo,
                    const VarOrRVar &yo, const VarOrRVar &zo, const VarOrRVar &xi,
                    const VarOrRVar &yi, const VarOrRVar &zi, int tx, int ty, int tz,
                    TailStrategy tail = TailStrategy::Auto);

    /// Splits an associative reduction: the RVar r becomes the pure Var v of a new intermediate
    /// Func that reduces over the remaining RVars; this stage then reduces the intermediate
    /// over r. r may be the outer part of a split of one of this update's RVars
    /// (update.split(r, ro, ri, k).rfactor(ro, u), as in Halide) when that RVar's extent is a
    /// constant multiple of k: the split then becomes part of the update's RDom (RVars ri and
    /// ro) before the rfactor, and the intermediate reduces over ri. Returns the intermediate,
    /// to be scheduled on its own.
    Func rfactor(const RVar &r, const Var &v, const std::string &name = "");
    /// rfactor of several RVars at once, each made the pure Var paired with it (Halide's form):
    /// the intermediate's variables are the Func's, then the pairs' Vars in order. With no pair
    /// (`rfactor({})`) the intermediate has the Func's own variables and does the whole
    /// reduction, and this update becomes f(x) = f(x) + intermediate(x) without an RDom: a
    /// stage of its own to compute at a tile of the Func, e.g. a register tile of sums for an
    /// output that is itself a reduction (TVM calls this cache_write).
    Func rfactor(const std::vector<std::pair<RVar, Var>> &preserved, const std::string &name = "");

private:
    Stage &record(Primitive primitive, const std::vector<VarOrRVar> &vars,
                  const std::vector<int64_t> &ints = {}, const std::string &option = "",
                  const std::string &target = "");
    Stage &gpu_loops(Primitive primitive, const std::vector<VarOrRVar> &vars);
    Stage &prefetch_named(const std::string &what, const VarOrRVar &at, const VarOrRVar &from,
                          const Expr &offset, PrefetchBoundStrategy strategy);
    Stage &gpu_tile_dims(const std::vector<VarOrRVar> &vars, const std::vector<VarOrRVar> &outers,
                         const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
                         TailStrategy tail);

private:
    FunctionPtr func;
    int index;
};

class Func {
public:
    /// A Func with a unique name.
    Func();
    explicit Func(const std::string &name);
    /// A handle to existing function contents (used by compute() and the reducers).
    explicit Func(FunctionPtr f) : contents(std::move(f)) {}

    const std::string &name() const { return contents->name; }
    bool defined() const { return contents->has_pure_definition(); }
    int dimensions() const { return contents->dimensions(); }
    const std::vector<std::string> &args() const { return contents->args; }
    /// The pure variables as Vars.
    std::vector<Var> vars() const;
    const std::vector<Type> &output_types() const { return contents->output_types; }
    Type output_type() const;
    int num_values() const { return int(contents->output_types.size()); }
    int num_updates() const { return int(contents->updates.size()); }
    const Definition &definition() const { return contents->init; }
    const Definition &update_definition(int i) const;
    /// The value of a single-valued pure definition.
    Expr value() const;
    const FunctionPtr &function() const { return contents; }

    /// The stage of update i, for scheduling.
    Stage update(int i = 0) const;

    /// A reference to the Func at a site, for defining or calling it.
    FuncRef operator()(std::vector<Expr> args) const;
    template <typename... Args>
    FuncRef operator()(Args... args) const {
        return (*this)(std::vector<Expr>{Expr(args)...});
    }

    /// Readable definitions of this Func and every Func it calls, producers first.
    std::string to_string() const;

    /// Compiles the pipeline ending at this Func for the host (cached) and evaluates it over
    /// [0, extents). Defined by the compiler (driver/Pipeline.cpp), so it needs the `kiln`
    /// library, not only `kiln_lang`.
    BufferBase realize(const std::vector<int> &extents) const;

    // Scheduling the pure definition: the same loop transformations as Stage.
    Func &split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner, int factor,
                TailStrategy tail = TailStrategy::Auto);
    Func &fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused);
    Func &reorder(const std::vector<VarOrRVar> &vars);
    template <typename... Vs>
    Func &reorder(const VarOrRVar &a, const VarOrRVar &b, const Vs &...rest) {
        return reorder(std::vector<VarOrRVar>{a, b, VarOrRVar(rest)...});
    }
    Func &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
               const VarOrRVar &xi, const VarOrRVar &yi, int xfactor, int yfactor,
               TailStrategy tail = TailStrategy::Auto);
    Func &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xi, const VarOrRVar &yi,
               int xfactor, int yfactor, TailStrategy tail = TailStrategy::Auto);
    Func &tile(const std::vector<VarOrRVar> &vars, const std::vector<VarOrRVar> &outers,
               const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
               TailStrategy tail = TailStrategy::Auto);
    Func &vectorize(const VarOrRVar &var);
    Func &vectorize(const VarOrRVar &var, int factor, TailStrategy tail = TailStrategy::Auto);
    Func &unroll(const VarOrRVar &var);
    Func &unroll(const VarOrRVar &var, int factor, TailStrategy tail = TailStrategy::Auto);
    Func &parallel(const VarOrRVar &var);
    Func &serial(const VarOrRVar &var);
    Func &gpu_blocks(const VarOrRVar &x);
    Func &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y);
    Func &gpu_blocks(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z);
    Func &gpu_threads(const VarOrRVar &x);
    Func &gpu_threads(const VarOrRVar &x, const VarOrRVar &y);
    Func &gpu_threads(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z);
    Func &gpu_single_thread();
    /// Stage::prefetch on the pure definition.
    Func &prefetch(const Func &f, const VarOrRVar &at, const VarOrRVar &from,
                   const Expr &offset = 1,
                   PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf);
    Func &prefetch(const ImageParam &image, const VarOrRVar &at, const VarOrRVar &from,
                   const Expr &offset = 1,
                   PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf);
    Func &gpu_tile(const VarOrRVar &x, const VarOrRVar &xo, const VarOrRVar &xi, int tx,
                   TailStrategy tail = TailStrategy::Auto);
    Func &gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
                   const VarOrRVar &xi, const VarOrRVar &yi, int tx, int ty,
                   TailStrategy tail = TailStrategy::Auto);
    Func &gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z, const VarOrRVar &xo,
                   const VarOrRVar &yo, const VarOrRVar &zo, const VarOrRVar &xi,
                   const VarOrRVar &yi, const VarOrRVar &zi, int tx, int ty, int tz,
                   TailStrategy tail = TailStrategy::Auto);

    // Where and how the Func is computed and stored.
    /// Computes the Func inside the loop `var` of `consumer`, as much as that iteration needs.
    Func &compute_at(const Func &consumer, const VarOrRVar &var);
    /// Allocates the Func's storage at the loop `var` of `consumer` (outside its compute level).
    Func &store_at(const Func &consumer, const VarOrRVar &var);
    Func &compute_root();
    Func &store_root();
    /// Substitutes the definition into every use (the default for pure Funcs).
    Func &compute_inline();
    /// Storage order of the dimensions, innermost first.
    Func &reorder_storage(const std::vector<Var> &vars);
    template <typename... Vs>
    Func &reorder_storage(const Var &a, const Var &b, const Vs &...rest) {
        return reorder_storage(std::vector<Var>{a, b, Var(rest)...});
    }
    /// Promises that only [min, min + extent) of dimension var is ever needed (checked at run
    /// time for outputs), fixing the loop bounds.
    Func &bound(const Var &var, int min, int extent);
    Func &store_in(MemoryType memory_type);
    /// Writes this Func's dense vector stores with non-temporal hints (x86 `vmovntps` & co.):
    /// they bypass the caches, and the CPU does not first read the lines it overwrites. For a
    /// large output written once and not read again soon (a memory-bound operator's result);
    /// harmful for data read back while still in cache. Each store checks its address at run
    /// time (an unaligned vector is stored normally); the pipeline and each parallel task end
    /// with a store fence. Other targets (and GPU kernels) ignore it.
    Func &store_nontemporal();

    /// Wrappers (Halide's in()). `f.in(g)` returns a new pure Func `f_in_g(x, y) = f(x, y)`,
    /// with f's dimensions and pure Var names, and every call to f in g's definitions (pure and
    /// updates) reads the wrapper instead. Unscheduled the wrapper is inlined, so the pipeline
    /// computes what it did; scheduled like any Func (compute_at, vectorize, reorder_storage,
    /// store_in, ...) it stages f's values for g alone: a copy per tile, in another layout, in
    /// other memory. The calls are redirected when the pipeline is lowered; f, g and the
    /// algorithm hash are unchanged, and remove_schedule removes wrappers. Calling in() again
    /// with the same consumer(s) returns the same wrapper. CompileError when f has no
    /// definition, when the consumer is f itself, or when g does not call f (the message lists
    /// the Funcs that do). Hold f or a consumer while using the wrapper: the wrapper's call to f
    /// does not own f (f owns its wrappers).
    Func in(const Func &consumer);
    /// One wrapper `f_in_g_h` read by each of the consumers (at least one, each calling f).
    /// CompileError when a consumer already reads f through a wrapper made for other consumers.
    Func in(const std::vector<Func> &consumers);
    /// A wrapper `f_in` read by every Func that calls f, except f's other wrappers and any
    /// consumer with a wrapper of its own (as in Halide), including Funcs defined later.
    Func in();

    /// The region an output is expected to be computed over, as in Halide: not a schedule and
    /// no promise (unlike bound), but what a tuner sizes the output with when the shape it tunes
    /// is not the output's extents (a generator declaring GeneratorContext::shape). CompileError
    /// for a variable that is not a dimension or an extent below 1.
    Func &set_estimate(const Var &var, int64_t min, int64_t extent);
    /// One (min, extent) per dimension, dimension 0 first.
    Func &set_estimates(const std::vector<std::pair<int64_t, int64_t>> &region);
    /// The estimate of each dimension, dimension 0 first; nullopt where none was given.
    std::vector<std::optional<std::pair<int64_t, int64_t>>> estimates() const;

    /// The buffer this output is written into (Halide's output_buffer), to promise its shape:
    /// `C.output_buffer().dim(1).set_stride(N)`, `dim(0).set_bounds(0, N)`. The promises are
    /// checked when the pipeline runs (a buffer that breaks one is refused, nothing written)
    /// and their values used in every index. They matter only where the Func is an output.
    /// CompileError for a Func not yet defined or one with several values (output_buffers).
    OutputImageParam output_buffer() const;
    /// One buffer per value, value 0 first (a Tuple's outputs). CompileError for a Func not yet
    /// defined.
    std::vector<OutputImageParam> output_buffers() const;

    /// The scheduling calls made on this Func so far.
    const std::vector<Directive> &directives() const { return contents->directives; }

private:
    FunctionPtr contents;
};

std::ostream &operator<<(std::ostream &s, const Func &f);

} // namespace kiln
