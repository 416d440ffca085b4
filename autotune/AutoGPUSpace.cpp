// The automatic GPU space (autotune/AutoSpace.h, auto_gpu_space): GPU schedules derived from the
// structure of any operator's pipeline, as auto_space derives CPU ones.
//
// The output: gpu_tile of its two innermost pure dimensions (block_x x block_y threads, a third
// dimension as a block dimension, more as host loops), each thread computing out_x by out_y
// outputs along x and y (inner serial loops, optionally unrolled; with interleave a thread's x
// outputs lie block_x apart, so a warp's threads take neighbouring columns). Its updates that keep
// the pure variables in place are tiled the same way with their reduction loops serial inside the
// thread; other updates run on one GPU thread. Every other Func of the pipeline is inlined (pure
// Funcs only), computed at root as kernels of its own (tiled like the output, tails guarded), or,
// where its region per block is known from the algorithm (it is called only by the output, at its
// pure variables plus constants), computed per block into GPU shared memory by the block's threads.
// The output's own reduction (one update in place over an RDom) may move into an intermediate of
// sums (rfactor({})) computed per block the same way, in shared memory or in each thread's
// registers (MemoryType::Register at block level: a thread's out_x by out_y sums, the reduction
// outside them); so may a producer with a reduction that the output reads at its own points (the
// built-in matmul's prod). Where the output's tiles are whole, registers and the output's
// updates are rounded up rather than guarded. A per-block reduction may step through its
// largest RVar r_step values at a time, the steps outside the threads; at each step the block's
// threads may copy what the step reads of an input (an image or a Func, through an in() wrapper)
// into shared memory before they accumulate from it: the blocks, threads and shared-memory
// staging of GPU matmul and convolution kernels. Constraints keep every point inside the
// device's limits (threads and shared memory per block, staged inputs included, kiln's portable
// 1024 and 48 KiB on top) and the output's tiles inside its extents.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "autotune/AutoSpace.h"
#include "lang/IREquality.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"

namespace kiln::autotune {

namespace {

// Capitalised as the Var it stands for.
VarOrRVar V(const std::string &n) { // NOLINT(readability-identifier-naming)
    return VarOrRVar(n, false);
}

/// How a producer's dimension follows the output's: dimension `out_dim` of the output, plus
/// constant offsets from `lo` to `hi`.
struct DimMap {
    int out_dim = -1;
    int64_t lo = 0, hi = 0;
};

/// Collects the calls of one Func inside expressions.
class CallsOf : public IRVisitor {
public:
    explicit CallsOf(std::string name) : name(std::move(name)) {}
    std::vector<const Call *> calls;

protected:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        if (op->call_type == Call::Func && op->name == name) calls.push_back(op);
        IRVisitor::visit(op);
    }

private:
    std::string name;
};

/// v + constant (or v - constant, or v) where v is a pure variable of dims: its index and the
/// constant.
std::optional<std::pair<int, int64_t>> var_plus_constant(const Expr &e,
                                                         const std::vector<std::string> &dims) {
    auto index_of = [&](const Expr &v) -> int {
        const auto *var = v.as<Variable>();
        if (!var) return -1;
        auto it = std::find(dims.begin(), dims.end(), var->name);
        return it == dims.end() ? -1 : int(it - dims.begin());
    };
    if (int i = index_of(e); i >= 0) return std::make_pair(i, int64_t(0));
    if (const auto *a = e.as<Add>()) {
        std::optional<int64_t> k = as_const_int(a->b);
        int i = index_of(a->a);
        if (k && i >= 0) return std::make_pair(i, *k);
    }
    if (const auto *s = e.as<Sub>()) {
        std::optional<int64_t> k = as_const_int(s->b);
        int i = index_of(s->a);
        if (k && i >= 0) return std::make_pair(i, -*k);
    }
    return std::nullopt;
}

/// Whether every update of f keeps f's pure variables in place (f(x, y) = ... f(x, y) ...).
std::vector<bool> updates_in_place(const Func &f) {
    std::vector<bool> in_place;
    for (int u = 0; u < f.num_updates(); u++) {
        const Definition &d = f.update_definition(u);
        bool ok = int(d.args.size()) == f.dimensions();
        for (size_t i = 0; ok && i < d.args.size(); i++) {
            const auto *v = d.args[i].as<Variable>();
            ok = v && v->name == f.args()[i];
        }
        in_place.push_back(ok);
    }
    return in_place;
}

/// One dimension of what a reduction reads from a staged input, per block and step of the
/// reduction: the Func's pure variables it adds (each a dimension of the Func), whether it adds
/// the stepped RVar, and what the other RVars add to its extent.
struct ReadDim {
    std::vector<int> vars;
    bool stepped = false;
    int64_t fixed = 0;
};

/// An input (an image, or a Func of the pipeline) that a per-block Func's last update reads with
/// indices that are sums of its variables, RVars and constants: what a wrapper computed per step
/// of the reduction (in(), in GPU shared memory) copies.
struct StagedRead {
    std::string name;
    bool image = false;
    int64_t element_bytes = 0;
    std::vector<ReadDim> dims;
};

struct GPUShape {
    std::string out;
    std::vector<std::string> dims;
    std::vector<int> extents;
    std::vector<bool> out_updates_in_place;
    struct Producer {
        std::string name;
        bool has_updates = false;
        /// Its dimensions as the output's plus offsets, when it may be computed per block.
        std::optional<std::vector<DimMap>> block_map;
        int64_t element_bytes = 0;
        /// The RVar of its last update's reduction stepped through per block (the one of largest
        /// constant extent), its extent, and the inputs that update may stage per step.
        std::string rvar;
        int64_t r_extent = 0;
        std::vector<StagedRead> staged;
        /// The knob that keeps it in registers, a private part per thread ("registers"), instead
        /// of shared memory; empty when it has none.
        std::string registers_knob;
    };
    std::vector<Producer> producers;
    /// The output's reduction moved into an intermediate of sums (rfactor({})) computed per block
    /// (in shared memory, or in each thread's registers): set when the output has one update, in
    /// place, over an RDom, and rfactor accepts it.
    std::optional<Producer> sums;
};

// Whether the output's tiles (threads per block x points per thread) divide it in x and in y:
// then nothing is past its end and registers and the output's updates round up unguarded.
bool whole_tiles(const GPUShape &s, const ConfigView &c) {
    int64_t bx = c.i("block_x"), by = c.has("block_y") ? c.i("block_y") : 1;
    int64_t ox = c.i("out_x"), oy = c.has("out_y") ? c.i("out_y") : 1;
    return s.extents[0] % (bx * ox) == 0 && (s.dims.size() < 2 || s.extents[1] % (by * oy) == 0);
}

/// Splits an index into its terms: each variable of `vars` (counted in `var_terms`), each RVar of
/// `rvars` (in `rvar_terms`) and constants; false when it has any other form (a product, a
/// variable of neither list, a call).
bool index_terms(const Expr &e, const std::vector<std::string> &vars,
                 const std::vector<std::string> &rvars, std::vector<int> &var_terms,
                 std::vector<int> &rvar_terms) {
    if (as_const_int(e)) return true;
    if (const auto *v = e.as<Variable>()) {
        auto in = [&](const std::vector<std::string> &names, std::vector<int> &terms) {
            auto it = std::find(names.begin(), names.end(), v->name);
            if (it == names.end()) return false;
            terms.push_back(int(it - names.begin()));
            return true;
        };
        return in(vars, var_terms) || in(rvars, rvar_terms);
    }
    if (const auto *a = e.as<Add>())
        return index_terms(a->a, vars, rvars, var_terms, rvar_terms) &&
               index_terms(a->b, vars, rvars, var_terms, rvar_terms);
    if (const auto *s = e.as<Sub>())
        return index_terms(s->a, vars, rvars, var_terms, rvar_terms) && as_const_int(s->b);
    return false;
}

/// The reduction of `d` (the last update of a Func with variables `vars`) that a per-block
/// schedule steps through, and the inputs it may stage: every image or Func of `stage_names`
/// it calls with one list of indices, each a sum of variables, RVars and constants.
void read_reduction(const Definition &d, const std::vector<std::string> &vars,
                    const std::set<std::string> &stage_names, GPUShape::Producer &p) {
    if (!d.rdom) return;
    std::vector<std::string> rvars;
    std::vector<int64_t> r_extents;
    for (const ReductionVariable &v : d.rdom->vars) {
        rvars.push_back(v.name);
        std::optional<int64_t> e = as_const_int(v.extent);
        r_extents.push_back(e ? *e : -1);
    }
    int stepped = -1;
    for (size_t r = 0; r < rvars.size(); r++) {
        if (r_extents[r] > 1 && (stepped < 0 || r_extents[r] > r_extents[size_t(stepped)]))
            stepped = int(r);
    }
    if (stepped < 0) return;
    p.rvar = rvars[size_t(stepped)];
    p.r_extent = r_extents[size_t(stepped)];

    class Calls : public IRVisitor {
    public:
        std::map<std::string, std::vector<const Call *>> calls;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if ((op->call_type == Call::Image && op->param) || op->call_type == Call::Func)
                calls[op->name].push_back(op);
            IRVisitor::visit(op);
        }
    } visitor;
    for (const Expr &e : d.values)
        visitor.include(e);
    for (const auto &[name, calls] : visitor.calls) {
        const bool image = calls[0]->call_type == Call::Image;
        if (!image && !stage_names.count(name)) continue;
        bool ok = true;
        for (const Call *c : calls) {
            ok = ok && c->args.size() == calls[0]->args.size();
            for (size_t i = 0; ok && i < c->args.size(); i++)
                ok = equal(c->args[i], calls[0]->args[i]);
        }
        StagedRead read;
        read.name = name;
        read.image = image;
        read.element_bytes = calls[0]->type.bytes();
        for (size_t i = 0; ok && i < calls[0]->args.size(); i++) {
            std::vector<int> var_terms, rvar_terms;
            ok = index_terms(calls[0]->args[i], vars, rvars, var_terms, rvar_terms);
            ReadDim dim;
            dim.vars = var_terms;
            for (int r : rvar_terms) {
                if (r == stepped)
                    dim.stepped = true;
                else if (r_extents[size_t(r)] < 0)
                    ok = false;
                else
                    dim.fixed += r_extents[size_t(r)] - 1;
            }
            read.dims.push_back(dim);
        }
        // A staged copy is a thread dimension or two plus serial loops: at most three dimensions.
        if (ok && !read.dims.empty() && read.dims.size() <= 3) p.staged.push_back(read);
    }
}

GPUShape read_gpu_shape(const apps::OperatorInstance &inst,
                        const std::function<apps::OperatorInstance()> &make) {
    GPUShape s;
    const Func &f = inst.output;
    std::set<std::string> stage_names;
    for (const Func &p : inst.stages)
        stage_names.insert(p.name());
    s.out = f.name();
    s.dims = f.args();
    s.extents = inst.output_extents;
    s.out_updates_in_place = updates_in_place(f);
    for (const Func &p : inst.stages) {
        if (p.name() == s.out) continue;
        GPUShape::Producer prod;
        prod.name = p.name();
        prod.has_updates = p.num_updates() > 0;
        for (Type t : p.output_types())
            prod.element_bytes += t.bytes();
        // Per block only when the output alone calls it, each argument a pure variable of the
        // output plus a constant, the same output dimension in every call, at most three
        // dimensions (thread dimensions), and its updates in place.
        bool eligible = p.dimensions() >= 1 && p.dimensions() <= 3;
        for (bool in_place : updates_in_place(p))
            eligible = eligible && in_place;
        for (const Func &c : inst.stages) {
            if (c.name() == p.name() || c.name() == s.out) continue;
            for (const FunctionPtr &callee : direct_callees(c.function()))
                eligible = eligible && callee->name != p.name();
        }
        std::vector<DimMap> map(size_t(std::max(p.dimensions(), 0)));
        std::vector<bool> seen(map.size(), false);
        CallsOf calls(p.name());
        for (const Expr &e : f.definition().values)
            calls.include(e);
        for (int u = 0; u < f.num_updates(); u++) {
            for (const Expr &e : f.update_definition(u).values)
                calls.include(e);
            for (const Expr &e : f.update_definition(u).args)
                calls.include(e);
        }
        for (const Call *c : calls.calls) {
            for (size_t i = 0; eligible && i < c->args.size() && i < map.size(); i++) {
                auto vc = var_plus_constant(c->args[i], s.dims);
                if (!vc || (seen[i] && map[i].out_dim != vc->first)) {
                    eligible = false;
                    break;
                }
                if (!seen[i]) map[i] = {vc->first, vc->second, vc->second};
                map[i].lo = std::min(map[i].lo, vc->second);
                map[i].hi = std::max(map[i].hi, vc->second);
                seen[i] = true;
            }
        }
        for (bool b : seen)
            eligible = eligible && b;
        if (eligible && !calls.calls.empty()) prod.block_map = map;
        if (prod.block_map && prod.has_updates) {
            std::set<std::string> others = stage_names;
            others.erase(p.name());
            read_reduction(p.update_definition(p.num_updates() - 1), p.args(), others, prod);
            // A reduction the output reads at its own points (dimension i of the output at
            // dimension i, no offset, only the output's thread dimensions x and y): each thread
            // may keep its points in registers, as the output's own sums may.
            bool own_points = map.size() <= std::min<size_t>(s.dims.size(), 2);
            for (size_t i = 0; i < map.size(); i++)
                own_points =
                    own_points && map[i].out_dim == int(i) && map[i].lo == 0 && map[i].hi == 0;
            if (own_points) prod.registers_knob = p.name() + "_at";
        }
        s.producers.push_back(prod);
    }
    // The output's reduction, per block in an intermediate of sums: asked of rfactor on an
    // instance of its own (rfactor rewrites the algorithm it is called on).
    if (f.num_updates() == 1 && s.out_updates_in_place[0] && f.update_definition(0).rdom) {
        try {
            make().output.update(0).rfactor({});
            GPUShape::Producer sums;
            sums.name = s.out + "_sums";
            sums.registers_knob = s.out + "_sums";
            sums.has_updates = true;
            sums.block_map = std::vector<DimMap>();
            for (size_t i = 0; i < s.dims.size() && i < 3; i++)
                sums.block_map->push_back({int(i), 0, 0});
            for (Type t : f.output_types())
                sums.element_bytes += t.bytes();
            read_reduction(f.update_definition(0), f.args(), stage_names, sums);
            if (s.dims.size() <= 3) s.sums = sums;
        } catch (const CompileError &) {
        }
    }
    return s;
}

/// The extent of output dimension j in one block's tile.
int64_t tile_extent(const ConfigView &c, int j) {
    if (j == 0) return c.i("block_x") * c.i("out_x");
    if (j == 1 && c.has("block_y")) return c.i("block_y") * c.i("out_y");
    return 1;
}

/// The extent of a per-block Func's dimension `i` in one block.
int64_t block_extent(const GPUShape::Producer &p, const ConfigView &c, int i) {
    const DimMap &m = (*p.block_map)[size_t(i)];
    return tile_extent(c, m.out_dim) + (m.hi - m.lo);
}

/// Threads a producer computed per block uses, and the bytes of its shared memory, with the
/// inputs its reduction stages per step.
std::pair<int64_t, int64_t> block_cost(const GPUShape::Producer &p, const ConfigView &c) {
    const bool in_registers = !p.registers_knob.empty() && c.s(p.registers_knob) == "registers";
    int64_t threads = 1, bytes = in_registers ? 0 : p.element_bytes;
    for (size_t i = 0; i < p.block_map->size(); i++) {
        int64_t extent = block_extent(p, c, int(i));
        bytes *= extent;
        const int out_dim = (*p.block_map)[i].out_dim;
        if (out_dim == 0) extent = (extent + c.i("out_x") - 1) / c.i("out_x");
        if (out_dim == 1) extent = (extent + c.i("out_y") - 1) / c.i("out_y");
        threads *= extent;
    }
    const int64_t step = p.rvar.empty() ? 1 : c.i(p.name + "_r_step");
    for (const StagedRead &r : p.staged) {
        if (!c.b(p.name + "_stage_" + r.name)) continue;
        int64_t copy = r.element_bytes;
        for (const ReadDim &dim : r.dims) {
            int64_t extent = 1 + dim.fixed + (dim.stepped ? step - 1 : 0);
            for (int v : dim.vars)
                extent += block_extent(p, c, v) - 1;
            copy *= extent;
        }
        bytes += copy;
    }
    return {threads, bytes};
}

/// Tiles a stage over its pure dimensions `dims` for the GPU: x by block_x (x out_x serial
/// outputs per thread: consecutive, or block_x apart with `interleave`), y by block_y (x out_y),
/// a third dimension as a block dimension, the rest as host loops; `inner` are loops kept
/// innermost and serial (an update's RVars).
void gpu_tile_stage(Stage st, const std::vector<std::string> &dims,
                    const std::vector<VarOrRVar> &inner, int64_t bx, int64_t by, int64_t ox,
                    int64_t oy, bool unroll, TailStrategy tail, bool interleave = false) {
    const int d = int(dims.size());
    const std::string &x = dims[0];
    std::string xo = x + "_bo", xt = x + "_t", xr = x + "_r";
    st.split(V(x), V(xo), V(xt), int(bx * ox), tail);
    // The tile's constant extent divides exactly: an update's inner split only refuses
    // RoundUp by name.
    const TailStrategy inner_tail =
        tail == TailStrategy::RoundUp ? TailStrategy::GuardWithIf : tail;
    if (ox > 1 && interleave)
        st.split(V(xt), V(xr), V(xt), int(bx), inner_tail);
    else if (ox > 1)
        st.split(V(xt), V(xt), V(xr), int(ox), inner_tail);
    std::vector<VarOrRVar> order = inner;
    if (ox > 1) order.push_back(V(xr));
    order.push_back(V(xt));
    std::string yo, yt, yr;
    if (d > 1) {
        yo = dims[1] + "_bo", yt = dims[1] + "_t", yr = dims[1] + "_r";
        st.split(V(dims[1]), V(yo), V(yt), int(by * oy), tail);
        if (oy > 1) {
            st.split(V(yt), V(yt), V(yr), int(oy), inner_tail);
            order.insert(order.end() - 1, V(yr)); // inside xt, outside xr
        }
        order.push_back(V(yt));
    }
    order.push_back(V(xo));
    if (d > 1) order.push_back(V(yo));
    for (int k = 2; k < d; k++)
        order.push_back(V(dims[k]));
    st.reorder(order);
    if (d == 1) st.gpu_blocks(V(xo));
    if (d == 2) st.gpu_blocks(V(xo), V(yo));
    if (d > 2) st.gpu_blocks(V(xo), V(yo), V(dims[2]));
    if (d == 1) st.gpu_threads(V(xt));
    if (d > 1) st.gpu_threads(V(xt), V(yt));
    if (ox > 1 && unroll) st.unroll(V(xr));
    if (d > 1 && oy > 1 && unroll) st.unroll(V(yr));
}

std::vector<VarOrRVar> rvars_of(const Func &f, int u) {
    std::vector<VarOrRVar> r;
    const Definition &d = f.update_definition(u);
    if (d.rdom) {
        for (const auto &v : d.rdom->vars)
            r.push_back(VarOrRVar(v.name, true));
    }
    return r;
}

/// A Func (pure definition and updates) as kernels of its own: tiled where its updates keep the
/// pure variables in place, on one GPU thread where they do not (or it has no dimensions).
void schedule_gpu_func(const Func &f, int64_t bx, int64_t by, int64_t ox, int64_t oy, bool unroll,
                       TailStrategy tail, bool interleave = false,
                       TailStrategy update_tail = TailStrategy::GuardWithIf) {
    if (f.dimensions() == 0) {
        Stage(f.function(), 0).gpu_single_thread();
        for (int u = 0; u < f.num_updates(); u++)
            f.update(u).gpu_single_thread();
        return;
    }
    gpu_tile_stage(Stage(f.function(), 0), f.args(), {}, bx, by, ox, oy, unroll, tail, interleave);
    std::vector<bool> in_place = updates_in_place(f);
    for (int u = 0; u < f.num_updates(); u++) {
        if (in_place[size_t(u)])
            gpu_tile_stage(f.update(u), f.args(), rvars_of(f, u), bx, by, ox, oy, unroll,
                           update_tail, interleave);
        else
            f.update(u).gpu_single_thread();
    }
}

} // namespace

SearchSpace auto_gpu_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                           const GpuLimits &limits) {
    GPUShape s = read_gpu_shape(op.make(shape), [&] { return op.make(shape); });
    if (s.dims.empty())
        throw CompileError("--space auto for a GPU target: the output of '" + op.name +
                           "' has no dimensions to spread over GPU threads");
    const int d = int(s.dims.size());
    const int64_t threads = std::min<int64_t>(limits.max_threads_per_block, 1024);
    const int64_t shared = std::min<int64_t>(limits.shared_memory_bytes, int64_t(48) * 1024);
    const int64_t ext_x = s.extents[0], ext_y = d > 1 ? s.extents[1] : 1;
    SearchSpace space("auto_gpu:" + op.name);
    space.add_powers_of_two(
        "block_x", 1, std::max<int64_t>(1, std::min({int64_t(256), threads, floor_pow2(ext_x)})));
    if (d > 1)
        space.add_powers_of_two("block_y", 1,
                                std::max<int64_t>(1, std::min(int64_t(64), floor_pow2(ext_y))));
    space.add_integers("out_x", {1, 2, 4, 8});
    if (d > 1) space.add_integers("out_y", {1, 2, 4, 8});
    space.add_bool("unroll");
    space.add_bool("interleave");
    // The prior of a new run's random draws (every value stays in the space): the register
    // tiles of the GPU hand schedules and of sgemm kernels since Volkov and Demmel (4 or 8
    // points a thread each way, unrolled, a warp's threads on neighbouring columns; measured
    // on the H200 and the H100 through the matmul template, docs/BENCHMARKS.md) twice or three
    // times as likely as the rest.
    space.set_weights("out_x", {1.0, 1.0, 2.0, 2.0});
    if (d > 1) space.set_weights("out_y", {1.0, 1.0, 2.0, 2.0});
    space.set_weights("unroll", {1.0, 3.0});
    space.set_weights("interleave", {1.0, 2.0});
    for (const GPUShape::Producer &p : s.producers) {
        std::vector<std::string> where;
        if (!p.has_updates) where.push_back("inline");
        where.push_back("root");
        if (p.block_map) where.push_back("block");
        if (!p.registers_knob.empty()) where.push_back("registers");
        space.add_choice(p.name + "_at", where);
        // A reduction kept in each thread's registers (the hand schedules' sums) 3 times as
        // likely as each other place.
        if (!p.registers_knob.empty()) {
            std::vector<double> w(where.size(), 1.0);
            w.back() = 3.0;
            space.set_weights(p.name + "_at", w);
        }
    }
    if (s.sums) {
        space.add_choice(s.out + "_sums", {"inplace", "block", "registers"});
        space.set_weights(s.out + "_sums", {1.0, 1.0, 3.0});
    }

    // The Funcs that may be computed per block (the output's sums among them), and whether a
    // config computes one so.
    std::vector<GPUShape::Producer> per_block;
    for (const GPUShape::Producer &p : s.producers)
        if (p.block_map) per_block.push_back(p);
    if (s.sums) per_block.push_back(*s.sums);
    const std::string sums_knob = s.out + "_sums";
    auto at_block = [sums_knob](const GPUShape::Producer &p, const ConfigView &c) {
        if (!c.has(p.name + "_at")) return c.s(sums_knob) != "inplace";
        return c.s(p.name + "_at") == "block" || c.s(p.name + "_at") == "registers";
    };

    // A per-block reduction steps through its largest RVar r_step values at a time; at each step
    // the block's threads may copy what the step reads of an input into shared memory (a wrapper,
    // in()) before they accumulate from it: the shared-memory staging of reused inputs.
    for (const GPUShape::Producer &p : per_block) {
        if (p.rvar.empty()) continue;
        std::vector<int64_t> steps;
        for (int64_t v : {1, 4, 8, 16, 32})
            if (v == 1 || (v <= p.r_extent && p.r_extent % v == 0)) steps.push_back(v);
        space.add_integers(p.name + "_r_step", steps);
        std::vector<double> step_weights; // steps of 8 or 16 (the hand schedules') twice as likely
        for (int64_t v : steps)
            step_weights.push_back(v == 8 || v == 16 ? 2.0 : 1.0);
        space.set_weights(p.name + "_r_step", step_weights);
        space.add_constraint(p.name + "_r_step > 1 needs " + p.name + " per block",
                             [p, at_block](const ConfigView &c) {
                                 return c.i(p.name + "_r_step") == 1 || at_block(p, c);
                             });
        for (const StagedRead &r : p.staged) {
            const std::string knob = p.name + "_stage_" + r.name;
            space.add_bool(knob);
            space.add_constraint(knob + " needs " + p.name + "_r_step > 1",
                                 [p, knob](const ConfigView &c) {
                                     return !c.b(knob) || c.i(p.name + "_r_step") > 1;
                                 });
        }
    }

    space.add_constraint("block_x * out_x <= output extent of x", [ext_x](const ConfigView &c) {
        return c.i("block_x") * c.i("out_x") <= ext_x;
    });
    if (d > 1)
        space.add_constraint("block_y * out_y <= output extent of y", [ext_y](const ConfigView &c) {
            return c.i("block_y") * c.i("out_y") <= ext_y;
        });
    space.add_constraint("interleave needs out_x > 1", [](const ConfigView &c) {
        return !c.b("interleave") || c.i("out_x") > 1;
    });
    // Registers interleaved as the output's points must be whole tiles: an output with an
    // update has partial tiles unless its tile divides it.
    const bool out_updates = !s.out_updates_in_place.empty();
    space.add_constraint("interleave with registers needs whole tiles",
                         [s, per_block, out_updates](const ConfigView &c) {
                             if (!c.b("interleave") || !out_updates) return true;
                             bool registers = false;
                             for (const GPUShape::Producer &p : per_block)
                                 registers = registers || (!p.registers_knob.empty() &&
                                                           c.s(p.registers_knob) == "registers");
                             return !registers || whole_tiles(s, c);
                         });
    space.add_constraint("unroll needs out_x > 1 or out_y > 1", [](const ConfigView &c) {
        return !c.b("unroll") || c.i("out_x") > 1 || (c.has("out_y") && c.i("out_y") > 1);
    });
    space.add_constraint("threads per block <= device limit (" + std::to_string(threads) + ")",
                         [threads, per_block, at_block](const ConfigView &c) {
                             int64_t n = c.i("block_x") * (c.has("block_y") ? c.i("block_y") : 1);
                             for (const GPUShape::Producer &p : per_block) {
                                 if (at_block(p, c)) n = std::max(n, block_cost(p, c).first);
                             }
                             return n <= threads;
                         });
    space.add_constraint("shared memory per block <= device limit (" + std::to_string(shared) + ")",
                         [shared, per_block, at_block](const ConfigView &c) {
                             int64_t bytes = 0;
                             for (const GPUShape::Producer &p : per_block) {
                                 if (at_block(p, c)) bytes += block_cost(p, c).second;
                             }
                             return bytes <= shared;
                         });

    space.set_apply([s, per_block](apps::OperatorInstance &inst, const ConfigView &c) {
        Func f = inst.output;
        int64_t bx = c.i("block_x"), by = c.has("block_y") ? c.i("block_y") : 1;
        int64_t ox = c.i("out_x"), oy = c.has("out_y") ? c.i("out_y") : 1;
        bool unroll = c.b("unroll");
        const bool interleave = c.b("interleave");
        const bool whole = whole_tiles(s, c);
        // The output's reduction in its intermediate of sums; the update left behind adds the
        // sums to the output in place.
        std::optional<Func> sums;
        if (s.sums && c.s(s.out + "_sums") != "inplace")
            sums = f.update(0).rfactor({}, s.sums->name);
        // The output's tiles stay inside it (ShiftInwards); its updates guard their tails, or,
        // where the tiles divide it, round up (nothing past it, and whole tiles per block: a
        // Func computed per block for them covers a constant tile).
        schedule_gpu_func(f, bx, by, ox, oy, unroll, TailStrategy::Auto, interleave,
                          whole ? TailStrategy::RoundUp : TailStrategy::GuardWithIf);
        const std::string block_loop = s.dims[0] + "_bo";
        std::vector<Func> blocks;
        for (const Func &pf : inst.stages) {
            if (pf.name() == s.out) continue;
            Func p = pf;
            const std::string &where = c.s(p.name() + "_at");
            if (where == "inline") continue;
            if (where == "registers") {
                blocks.push_back(p);
                continue;
            }
            if (where == "root") {
                p.compute_root();
                // Its region is not known here: tails are guarded.
                schedule_gpu_func(p, bx, by, 1, 1, false, TailStrategy::GuardWithIf);
                continue;
            }
            blocks.push_back(p);
        }
        if (sums) blocks.push_back(*sums);
        for (Func &p : blocks) {
            // Per block, in shared memory, a thread per point (out_x by out_y points of the
            // output's x and y), the updates' reductions serial inside the thread. The sums may
            // instead stay in registers, each thread keeping its own points; their reduction
            // then runs outside the thread's points (each value read from the staged inputs
            // serves a row or column of them).
            const GPUShape::Producer &info =
                *std::find_if(per_block.begin(), per_block.end(),
                              [&](const GPUShape::Producer &q) { return q.name == p.name(); });
            const bool in_registers =
                !info.registers_knob.empty() && c.s(info.registers_knob) == "registers";
            // Rounded up (below) where its tile per block is whole: the output is whole tiles,
            // or the output has no update (its tiles are shifted inwards, never partial).
            const bool round_up = whole || f.num_updates() == 0;
            p.compute_at(f, V(block_loop))
                .store_in(in_registers ? MemoryType::Register : MemoryType::GPUShared);
            auto threads_of = [&](Stage st, std::vector<VarOrRVar> order,
                                  const std::vector<VarOrRVar> &outer) {
                std::vector<VarOrRVar> thread_dims, points;
                for (size_t i = 0; i < info.block_map->size(); i++) {
                    const std::string &v = p.args()[i];
                    const int out_dim = (*info.block_map)[i].out_dim;
                    const int64_t per_thread = out_dim == 0 ? ox : out_dim == 1 ? oy : 1;
                    if (per_thread > 1) {
                        // Registers of a whole tile per block (a multiple of the thread's
                        // points) are rounded up: no test per multiply-add. At a partial tile
                        // (an update's guarded tail) rounding up would read the inputs past
                        // their ends. Interleaved registers take a thread's x points block_x
                        // apart, as the output's (a constraint keeps their tile whole, so the
                        // unrolled points have a constant count).
                        const TailStrategy tail = in_registers && round_up
                                                      ? TailStrategy::RoundUp
                                                      : TailStrategy::GuardWithIf;
                        if (out_dim == 0 && interleave && in_registers)
                            st.split(V(v), V(v + "_r"), V(v + "_t"), int(bx), tail);
                        else
                            st.split(V(v), V(v + "_t"), V(v + "_r"), int(per_thread), tail);
                        if (unroll) st.unroll(V(v + "_r"));
                        points.push_back(V(v + "_r"));
                        thread_dims.push_back(V(v + "_t"));
                    } else {
                        thread_dims.push_back(V(v));
                    }
                }
                order.insert(in_registers ? order.begin() : order.end(), points.begin(),
                             points.end());
                for (const VarOrRVar &t : thread_dims)
                    order.push_back(t);
                order.insert(order.end(), outer.begin(), outer.end());
                if (order.size() > 1) st.reorder(order);
                if (thread_dims.size() == 1) st.gpu_threads(thread_dims[0]);
                if (thread_dims.size() == 2) st.gpu_threads(thread_dims[0], thread_dims[1]);
                if (thread_dims.size() == 3)
                    st.gpu_threads(thread_dims[0], thread_dims[1], thread_dims[2]);
            };
            threads_of(Stage(p.function(), 0), {}, {});
            const int last = p.num_updates() - 1;
            for (int u = 0; u < last; u++)
                threads_of(p.update(u), rvars_of(p, u), {});
            if (last < 0) continue;
            const int64_t step = info.rvar.empty() ? 1 : c.i(p.name() + "_r_step");
            if (step == 1) {
                threads_of(p.update(last), rvars_of(p, last), {});
                continue;
            }
            // The stepped RVar: its steps outside the threads, the values of a step inside
            // them, with the RVars inner to it. The RVars outer to it stay outer to its steps
            // (the update's RVars keep their order), outside the threads too: a conv2d summing
            // over (ky, kx, ci) with ci innermost steps through ci once per tap.
            const VarOrRVar r(info.rvar, true), ro(info.rvar + "_o", true),
                ri(info.rvar + "_i", true);
            Stage up = p.update(last);
            up.split(r, ro, ri, int(step));
            std::vector<VarOrRVar> inner, outer{ro};
            bool past = false;
            for (const VarOrRVar &v : rvars_of(p, last)) {
                if (v.name() == info.rvar) {
                    inner.push_back(ri);
                    past = true;
                } else {
                    (past ? outer : inner).push_back(v);
                }
            }
            threads_of(up, inner, outer);
            for (const StagedRead &read : info.staged) {
                if (!c.b(p.name() + "_stage_" + read.name)) continue;
                std::optional<Func> w;
                for (ImageParam &in : inst.inputs)
                    if (read.image && in.name() == read.name) w = in.in(p);
                for (Func &q : inst.stages)
                    if (!read.image && q.name() == read.name) w = q.in(p);
                if (!w) continue;
                // The copy: dimension 0 over the block's x threads, 1 over its y threads (reads
                // along dimension 0 are contiguous in the input), the rest serial inside.
                w->compute_at(p, ro).store_in(MemoryType::GPUShared);
                const std::vector<std::string> a = w->args();
                std::vector<VarOrRVar> serial, copy_threads;
                for (size_t i = 0; i < a.size(); i++) {
                    const int64_t n = i == 0 ? bx : i == 1 ? by : 1;
                    if (n == 1 && i > 0) {
                        serial.push_back(V(a[i]));
                        continue;
                    }
                    w->split(V(a[i]), V(a[i] + "_s"), V(a[i] + "_t"), int(n),
                             TailStrategy::GuardWithIf);
                    serial.push_back(V(a[i] + "_s"));
                    copy_threads.push_back(V(a[i] + "_t"));
                }
                std::vector<VarOrRVar> order = serial;
                order.insert(order.end(), copy_threads.begin(), copy_threads.end());
                if (order.size() > 1) w->reorder(order);
                if (copy_threads.size() == 1) w->gpu_threads(copy_threads[0]);
                if (copy_threads.size() == 2) w->gpu_threads(copy_threads[0], copy_threads[1]);
            }
        }
    });
    return space;
}

} // namespace kiln::autotune
