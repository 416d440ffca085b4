// The automatic GPU space (autotune/AutoSpace.h, auto_gpu_space): GPU schedules derived from the
// structure of any operator's pipeline, as auto_space derives CPU ones.
//
// The output: gpu_tile of its two innermost pure dimensions (block_x x block_y threads, a third
// dimension as a block dimension, more as host loops), each thread computing out_x outputs along
// x (an inner serial loop, optionally unrolled). Its updates that keep the pure variables in place
// are tiled the same way with their reduction loops serial inside the thread; other updates run
// on one GPU thread. Every other Func of the pipeline is inlined (pure Funcs only), computed at
// root as kernels of its own (tiled like the output, tails guarded), or, where its region per
// block is known from the algorithm (it is called only by the output, at its pure variables plus
// constants), computed per block into GPU shared memory by the block's threads. Constraints keep
// every point inside the device's limits (threads and shared memory per block, kiln's portable
// 1024 and 48 KiB on top) and the output's tiles inside its extents.
#include <algorithm>
#include <map>
#include <optional>

#include "autotune/AutoSpace.h"
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
    };
    std::vector<Producer> producers;
};

GPUShape read_gpu_shape(const apps::OperatorInstance &inst) {
    GPUShape s;
    const Func &f = inst.output;
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
        s.producers.push_back(prod);
    }
    return s;
}

/// The extent of output dimension j in one block's tile.
int64_t tile_extent(const ConfigView &c, int j) {
    if (j == 0) return c.i("block_x") * c.i("out_x");
    if (j == 1 && c.has("block_y")) return c.i("block_y");
    return 1;
}

/// Threads a producer computed per block uses, and the bytes of its shared memory.
std::pair<int64_t, int64_t> block_cost(const GPUShape::Producer &p, const ConfigView &c) {
    int64_t threads = 1, bytes = p.element_bytes;
    for (const DimMap &m : *p.block_map) {
        int64_t extent = tile_extent(c, m.out_dim) + (m.hi - m.lo);
        bytes *= extent;
        if (m.out_dim == 0) extent = (extent + c.i("out_x") - 1) / c.i("out_x");
        threads *= extent;
    }
    return {threads, bytes};
}

/// Tiles a stage over its pure dimensions `dims` for the GPU: x by block_x (x out_x serial
/// outputs per thread), y by block_y, a third dimension as a block dimension, the rest as host
/// loops; `inner` are loops kept innermost and serial (an update's RVars).
void gpu_tile_stage(Stage st, const std::vector<std::string> &dims,
                    const std::vector<VarOrRVar> &inner, int64_t bx, int64_t by, int64_t ox,
                    bool unroll, TailStrategy tail) {
    const int d = int(dims.size());
    const std::string &x = dims[0];
    std::string xo = x + "_bo", xt = x + "_t", xr = x + "_r";
    st.split(V(x), V(xo), V(xt), int(bx * ox), tail);
    if (ox > 1) st.split(V(xt), V(xt), V(xr), int(ox), tail);
    std::vector<VarOrRVar> order = inner;
    if (ox > 1) order.push_back(V(xr));
    order.push_back(V(xt));
    std::string yo, yt;
    if (d > 1) {
        yo = dims[1] + "_bo", yt = dims[1] + "_t";
        st.split(V(dims[1]), V(yo), V(yt), int(by), tail);
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
void schedule_gpu_func(const Func &f, int64_t bx, int64_t by, int64_t ox, bool unroll,
                       TailStrategy tail) {
    if (f.dimensions() == 0) {
        Stage(f.function(), 0).gpu_single_thread();
        for (int u = 0; u < f.num_updates(); u++)
            f.update(u).gpu_single_thread();
        return;
    }
    gpu_tile_stage(Stage(f.function(), 0), f.args(), {}, bx, by, ox, unroll, tail);
    std::vector<bool> in_place = updates_in_place(f);
    for (int u = 0; u < f.num_updates(); u++) {
        if (in_place[size_t(u)])
            gpu_tile_stage(f.update(u), f.args(), rvars_of(f, u), bx, by, ox, unroll,
                           TailStrategy::GuardWithIf);
        else
            f.update(u).gpu_single_thread();
    }
}

} // namespace

SearchSpace auto_gpu_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                           const GpuLimits &limits) {
    GPUShape s = read_gpu_shape(op.make(shape));
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
    space.add_integers("out_x", {1, 2, 4});
    space.add_bool("unroll");
    for (const GPUShape::Producer &p : s.producers) {
        std::vector<std::string> where;
        if (!p.has_updates) where.push_back("inline");
        where.push_back("root");
        if (p.block_map) where.push_back("block");
        space.add_choice(p.name + "_at", where);
    }

    space.add_constraint("block_x * out_x <= output extent of x", [ext_x](const ConfigView &c) {
        return c.i("block_x") * c.i("out_x") <= ext_x;
    });
    space.add_constraint("unroll needs out_x > 1",
                         [](const ConfigView &c) { return !c.b("unroll") || c.i("out_x") > 1; });
    space.add_constraint("threads per block <= device limit (" + std::to_string(threads) + ")",
                         [threads, s](const ConfigView &c) {
                             int64_t n = c.i("block_x") * (c.has("block_y") ? c.i("block_y") : 1);
                             for (const GPUShape::Producer &p : s.producers) {
                                 if (p.block_map && c.s(p.name + "_at") == "block")
                                     n = std::max(n, block_cost(p, c).first);
                             }
                             return n <= threads;
                         });
    space.add_constraint("shared memory per block <= device limit (" + std::to_string(shared) + ")",
                         [shared, s](const ConfigView &c) {
                             int64_t bytes = 0;
                             for (const GPUShape::Producer &p : s.producers) {
                                 if (p.block_map && c.s(p.name + "_at") == "block")
                                     bytes += block_cost(p, c).second;
                             }
                             return bytes <= shared;
                         });

    space.set_apply([s](apps::OperatorInstance &inst, const ConfigView &c) {
        Func f = inst.output;
        int64_t bx = c.i("block_x"), by = c.has("block_y") ? c.i("block_y") : 1;
        int64_t ox = c.i("out_x");
        bool unroll = c.b("unroll");
        // The output's tiles stay inside it (ShiftInwards); its updates guard their tails.
        schedule_gpu_func(f, bx, by, ox, unroll, TailStrategy::Auto);
        const std::string block_loop = s.dims[0] + "_bo";
        for (const Func &pf : inst.stages) {
            if (pf.name() == s.out) continue;
            Func p = pf;
            const std::string &where = c.s(p.name() + "_at");
            if (where == "inline") continue;
            if (where == "root") {
                p.compute_root();
                // Its region is not known here: tails are guarded.
                schedule_gpu_func(p, bx, by, 1, false, TailStrategy::GuardWithIf);
                continue;
            }
            // Per block, in shared memory, a thread per point (out_x points along the output's
            // x), the updates' reductions serial inside the thread.
            p.compute_at(f, V(block_loop)).store_in(MemoryType::GPUShared);
            const GPUShape::Producer &info =
                *std::find_if(s.producers.begin(), s.producers.end(),
                              [&](const GPUShape::Producer &q) { return q.name == p.name(); });
            auto threads_of = [&](Stage st, std::vector<VarOrRVar> order) {
                std::vector<VarOrRVar> thread_dims;
                for (size_t i = 0; i < info.block_map->size(); i++) {
                    const std::string &v = p.args()[i];
                    if ((*info.block_map)[i].out_dim == 0 && ox > 1) {
                        st.split(V(v), V(v + "_t"), V(v + "_r"), int(ox),
                                 TailStrategy::GuardWithIf);
                        order.push_back(V(v + "_r"));
                        thread_dims.push_back(V(v + "_t"));
                    } else {
                        thread_dims.push_back(V(v));
                    }
                }
                for (const VarOrRVar &t : thread_dims)
                    order.push_back(t);
                if (order.size() > 1) st.reorder(order);
                if (thread_dims.size() == 1) st.gpu_threads(thread_dims[0]);
                if (thread_dims.size() == 2) st.gpu_threads(thread_dims[0], thread_dims[1]);
                if (thread_dims.size() == 3)
                    st.gpu_threads(thread_dims[0], thread_dims[1], thread_dims[2]);
            };
            threads_of(Stage(p.function(), 0), {});
            for (int u = 0; u < p.num_updates(); u++)
                threads_of(p.update(u), rvars_of(p, u));
        }
    });
    return space;
}

} // namespace kiln::autotune
