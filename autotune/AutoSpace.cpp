#include "autotune/AutoSpace.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "apps/Builtin.h"
#include "codegen/MathCost.h"
#include "codegen/Target.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"
#include "schedule/BoxesTouched.h"
#include "schedule/Tensorize.h"

namespace kiln::autotune {

namespace {

/// A producer's math functions cost this many instructions per point or more: a transcendental
/// (exp, log, tanh, pow, sin, cos), not sqrt, floor or abs.
constexpr double expensive_math_ops = 8.0;

/// What the space needs to know about the pipeline, read once from a built instance.
struct Shape {
    std::string out;               ///< output Func name
    std::vector<std::string> dims; ///< its pure variables
    std::vector<int> extents;
    struct Update {
        int index = 0;
        bool pure_x = false;            ///< the update's first site argument is the pure var x
        std::string rvar;               ///< its first RVar, "" when none
        int64_t rextent = 0;            ///< that RVar's constant extent (0 when unknown)
        std::vector<std::string> rvars; ///< all its RVars, innermost first
        bool in_place = false;          ///< its site is the pure variables, in order
        /// rfactor({}) can move its whole reduction into an intermediate of the output's
        /// variables (an associative update in place): a tile of sums of its own.
        bool sums = false;
        /// The target's matrix unit can compute it (see probe_tiles): blocks of the output's
        /// first dimension (columns) and second (rows), tensorized.
        struct Tiles {
            std::string lane, k;       ///< the RVars of the k lanes and of the k steps
            int64_t k_steps = 0;       ///< the k steps' constant extent
            std::vector<int64_t> cols; ///< block widths that lower (16, 32)
        };
        std::optional<Tiles> tiles;
    };
    std::vector<Update> updates;
    struct Producer {
        std::string name;
        bool has_updates = false;
        std::string x; ///< its first pure variable
        int dims = 0;
        std::vector<std::string> consumers; ///< other producers that call it
        std::vector<std::string> args;      ///< its pure variables
        /// Its reductions that keep every pure variable in place: update index and RVar names
        /// (a register tile can put their pure loops inside their reduction loops).
        std::vector<std::pair<int, std::vector<std::string>>> reductions;
        /// The constant extent of the outermost RVar of its first such reduction (0 when not
        /// constant): what a K block splits.
        int64_t outer_rextent = 0;
        /// Per reduction, the constant extent of its innermost RVar (0 when not constant): what
        /// unroll_r splits.
        std::vector<int64_t> inner_rextents;
        /// When its first variable is its own (not one of the output's: a row reduction's
        /// lanes l in partial(l, y)), the constant extent its consumers read of it (0 when not
        /// constant): a register tile vectorizes that variable over exactly this many values.
        int64_t lane_extent = 0;
        /// The output's stages that call it: 0 its pure definition, u + 1 its update u.
        std::vector<int> out_stages;
        /// The calls of it in the other stages' definitions: an inlined producer is computed
        /// once per call.
        int call_sites = 0;
        /// What its definitions' math functions cost per point, in instructions of the
        /// output's vector width (codegen/MathCost.h: exp ~30, sqrt 1).
        double math_ops = 0;
        /// Per dimension: every read of it indexes the dimension with the reader's pure variable
        /// of the same name, here and in every producer that reads it up to the output, so its
        /// region per tile of the output is the tile, whose size is a constant.
        std::vector<bool> pointwise_dims;
    };
    std::vector<Producer> producers;
    /// An input image read by a reduction (a stage with an RDom): a packing stage, its wrapper
    /// Func (ImageParam::in) computed at a loop of the output, can copy the region a loop reads
    /// into a dense buffer that every iteration inside the loop reuses.
    struct Pack {
        std::string image, consumer;
        std::string knob() const { return image + "_in_" + consumer + "_at"; }
    };
    std::vector<Pack> packs;
    int lanes = 4;     ///< natural vector lanes of the output type
    int64_t bytes = 0; ///< the output's size at the tuned shape
};

/// A Func's definitions: the pure one, then its updates in order (stage 0, 1, ...).
std::vector<const Definition *> definitions(const Func &f) {
    std::vector<const Definition *> defs{&f.definition()};
    for (int u = 0; u < f.num_updates(); u++)
        defs.push_back(&f.update_definition(u));
    return defs;
}

/// Whether a definition's site is exactly the pure variables `args`, in order (it updates each
/// point in place).
bool site_is(const Definition &d, const std::vector<std::string> &args) {
    if (d.args.size() != args.size()) return false;
    for (size_t a = 0; a < d.args.size(); a++) {
        const Variable *v = d.args[a].as<Variable>();
        if (!v || v->name != args[a]) return false;
    }
    return true;
}

/// The names of the input images one definition reads.
std::set<std::string> images_in(const Definition &d) {
    class Images : public IRVisitor {
    public:
        std::set<std::string> names;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Image && op->param) names.insert(op->name);
            IRVisitor::visit(op);
        }
    } v;
    for (const Expr &e : d.values)
        v.include(e);
    for (const Expr &e : d.args)
        v.include(e);
    return v.names;
}

/// The names of the input images a Func's definitions read.
std::set<std::string> images_read(const Func &f) {
    std::set<std::string> names;
    for (const Definition *d : definitions(f)) {
        std::set<std::string> more = images_in(*d);
        names.insert(more.begin(), more.end());
    }
    return names;
}

/// The calls of Func `name` in the definitions of `stages` (other than its own).
int call_sites(const std::vector<Func> &stages, const std::string &name) {
    class Calls : public IRVisitor {
    public:
        explicit Calls(std::string n) : name(std::move(n)) {}
        std::string name;
        int count = 0;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Func && op->name == name) count++;
            IRVisitor::visit(op);
        }
    } v(name);
    for (const Func &f : stages) {
        if (f.name() == name) continue;
        for (const Definition *d : definitions(f)) {
            for (const Expr &e : d->values)
                v.include(e);
            for (const Expr &e : d->args)
                v.include(e);
        }
    }
    return v.count;
}

/// What the math functions in a Func's definitions cost per point on `lanes`-wide vectors, in
/// instructions of that width (codegen's own expansion, codegen/MathCost.h).
double math_ops(const Func &f, int lanes) {
    class Math : public IRVisitor {
    public:
        int lanes = 1;
        double ops = 0;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Math && op->type.is_float())
                ops += math_call_operations(op->name, op->type.with_lanes(lanes));
            IRVisitor::visit(op);
        }
    } v;
    v.lanes = lanes;
    for (const Definition *d : definitions(f))
        for (const Expr &e : d->values)
            v.include(e);
    return v.ops;
}

/// The constant extent of the first dimension of `name` that the other stages read (calls with
/// their RVars over their domains), or 0 when some read depends on a pure variable or is not
/// constant.
int64_t read_lane_extent(const apps::OperatorInstance &inst, const std::string &name) {
    std::vector<Func> stages = inst.stages;
    stages.push_back(inst.output);
    Interval lanes;
    bool read = false;
    for (const Func &c : stages) {
        if (c.name() == name) continue;
        for (const Definition *d : definitions(c)) {
            Scope scope;
            if (d->rdom) {
                for (const ReductionVariable &r : d->rdom->vars)
                    scope[r.name] = Interval(r.min, simplify(r.min + r.extent - 1));
            }
            std::vector<Expr> exprs = d->values;
            exprs.insert(exprs.end(), d->args.begin(), d->args.end());
            for (const Expr &e : exprs) {
                Box box = boxes_touched(e, name, scope);
                if (box.empty()) continue;
                lanes = read ? Interval::make_union(lanes, box[0]) : box[0];
                read = true;
            }
        }
    }
    if (!read || !lanes.min.defined() || !lanes.max.defined()) return 0;
    std::optional<int64_t> lo = as_const_int(simplify(lanes.min));
    std::optional<int64_t> hi = as_const_int(simplify(lanes.max));
    return lo && hi && *hi >= *lo ? *hi - *lo + 1 : 0;
}

/// Reads the calls to Func `name` in a definition: whether there is one, and per dimension of
/// `args` whether every call has that Var there (clears the entries of `dims` that do not).
bool read_calls(const Definition &d, const std::string &name, const std::vector<std::string> &args,
                std::vector<bool> &dims) {
    class Calls : public IRVisitor {
    public:
        Calls(const std::string &name, const std::vector<std::string> &args,
              std::vector<bool> &dims)
            : name(name), args(args), dims(dims) {}
        bool any = false;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Func && op->name == name) {
                any = true;
                for (size_t i = 0; i < args.size() && i < dims.size(); i++) {
                    const Variable *v = i < op->args.size() ? op->args[i].as<Variable>() : nullptr;
                    if (!v || v->rdom || v->name != args[i]) dims[i] = false;
                }
            }
            IRVisitor::visit(op);
        }

    private:
        const std::string &name;
        const std::vector<std::string> &args;
        std::vector<bool> &dims;
    } calls(name, args, dims);
    for (const Expr &e : d.values)
        calls.include(e);
    for (const Expr &e : d.args)
        calls.include(e);
    return calls.any;
}

Shape read_shape(const apps::OperatorInstance &inst, const Target &target) {
    Shape s;
    const Func &f = inst.output;
    s.out = f.name();
    s.dims = f.args();
    s.extents = inst.output_extents;
    int bits = std::max(8, int(f.output_types().front().bits));
    s.lanes = std::max(1, target.vector_bits / bits);
    s.bytes = 0;
    for (const Type &t : f.output_types()) {
        int64_t b = std::max(1, int(t.bits) / 8);
        for (int e : s.extents)
            b *= e;
        s.bytes += b;
    }
    for (int u = 0; u < f.num_updates(); u++) {
        const Definition &d = f.update_definition(u);
        Shape::Update up;
        up.index = u;
        if (!d.args.empty() && !s.dims.empty()) {
            if (const Variable *v = d.args[0].as<Variable>()) up.pure_x = v->name == s.dims[0];
        }
        if (d.rdom && !d.rdom->vars.empty()) {
            up.rvar = d.rdom->vars[0].name;
            up.rextent = as_const_int(d.rdom->vars[0].extent).value_or(0);
            for (const ReductionVariable &r : d.rdom->vars)
                up.rvars.push_back(r.name);
        }
        up.in_place = site_is(d, s.dims);
        s.updates.push_back(up);
    }
    for (const Func &p : inst.stages) {
        if (p.name() == s.out) continue;
        Shape::Producer prod;
        prod.name = p.name();
        prod.has_updates = p.num_updates() > 0;
        prod.x = p.args().empty() ? "" : p.args()[0];
        prod.dims = p.dimensions();
        prod.args = p.args();
        for (int u = 0; u < p.num_updates(); u++) {
            const Definition &d = p.update_definition(u);
            if (!d.rdom || d.rdom->vars.empty() || !site_is(d, p.args())) continue;
            std::vector<std::string> rvars;
            for (const auto &r : d.rdom->vars)
                rvars.push_back(r.name);
            if (prod.reductions.empty())
                prod.outer_rextent = as_const_int(d.rdom->vars.back().extent).value_or(0);
            prod.reductions.emplace_back(u, rvars);
            prod.inner_rextents.push_back(as_const_int(d.rdom->vars.front().extent).value_or(0));
        }
        std::vector<Func> readers = inst.stages;
        readers.push_back(f);
        prod.call_sites = call_sites(readers, prod.name);
        prod.math_ops = math_ops(p, s.lanes);
        s.producers.push_back(std::move(prod));
    }
    for (const Func &c : inst.stages) {
        for (const FunctionPtr &callee : direct_callees(c.function())) {
            for (Shape::Producer &p : s.producers) {
                if (p.name == callee->name && c.name() != p.name) p.consumers.push_back(c.name());
            }
        }
    }
    std::vector<Func> all{f};
    for (const Func &c : inst.stages)
        if (c.name() != s.out) all.push_back(c);
    for (const Func &c : all) {
        bool reduces = false;
        for (int u = 0; u < c.num_updates(); u++)
            reduces = reduces || c.update_definition(u).rdom != nullptr;
        if (!reduces) continue;
        for (const std::string &image : images_read(c)) {
            // The output's wrapper is computed at a loop of one stage: the image must be read by
            // one stage of the output only, one tiled like its pure definition (in place).
            if (c.name() == s.out) {
                std::vector<int> stages;
                const std::vector<const Definition *> defs = definitions(f);
                for (size_t stage = 0; stage < defs.size(); stage++)
                    if (images_in(*defs[stage]).count(image)) stages.push_back(int(stage));
                if (stages.size() != 1 ||
                    (stages[0] > 0 && !s.updates[size_t(stages[0] - 1)].in_place))
                    continue;
            }
            for (const ImageParam &in : inst.inputs) {
                if (in.name() == image && in.dimensions() > 0) s.packs.push_back({image, c.name()});
            }
        }
    }
    for (Shape::Producer &p : s.producers) {
        if (p.args.empty() || std::find(s.dims.begin(), s.dims.end(), p.x) != s.dims.end())
            continue;
        p.lane_extent = read_lane_extent(inst, p.name);
    }
    for (Shape::Producer &p : s.producers) {
        p.pointwise_dims.assign(p.args.size(), true);
        const std::vector<const Definition *> defs = definitions(f);
        for (int stage = 0; stage < int(defs.size()); stage++) {
            std::vector<bool> dims(p.args.size(), true);
            if (read_calls(*defs[size_t(stage)], p.name, p.args, dims))
                p.out_stages.push_back(stage);
            if (stage == 0) {
                for (size_t i = 0; i < dims.size(); i++)
                    p.pointwise_dims[i] = p.pointwise_dims[i] && dims[i];
            } else if (!p.out_stages.empty() && p.out_stages.back() == stage) {
                p.pointwise_dims.assign(p.args.size(), false); // read outside the output's tile
            }
        }
        for (const Func &c : inst.stages) {
            if (c.name() == p.name || c.name() == s.out) continue;
            for (const Definition *d : definitions(c))
                read_calls(*d, p.name, p.args, p.pointwise_dims);
        }
    }
    // Through the producers that read it, by variable name, up to the output.
    for (size_t round = 0; round < s.producers.size(); round++) {
        for (Shape::Producer &p : s.producers) {
            for (const std::string &c : p.consumers) {
                for (const Shape::Producer &q : s.producers) {
                    if (q.name != c) continue;
                    for (size_t i = 0; i < p.args.size(); i++) {
                        auto at = std::find(q.args.begin(), q.args.end(), p.args[i]);
                        if (at == q.args.end() || !q.pointwise_dims[size_t(at - q.args.begin())])
                            p.pointwise_dims[i] = false;
                    }
                }
            }
        }
    }
    return s;
}

/// The blocks of rows of the output a tensorized update of rows x columns covers: at most 32
/// rows (two AMX tiles), dividing the extent (a tensorized nest has no tails).
constexpr int64_t max_tile_block = 32;

/// The loop nest of a tensorized update u of the output (see the tensorize knobs in auto_space):
/// blocks of `rows` rows by `cols` columns over the whole reduction (the RVar `lane`, the k
/// lanes, innermost, then the block's columns, the RVar `k`, the k steps, and its rows: the loops
/// the matrix unit's tile multiply replaces), in chunks of `chunk` k steps (none when 0) outside
/// the panel's blocks, panels of `panel` columns outermost (none when 0), the row blocks parallel
/// when asked. probe_tiles asks the lowering about this nest, and the apply builds it.
void tensorize_nest(Stage st, const Shape &s, const std::string &lane, const std::string &k,
                    int64_t cols, int64_t rows, int64_t panel, int64_t chunk, bool parallel) {
    auto V = [](const std::string &n) { return VarOrRVar(n, false); };
    const std::string &cx = s.dims[0], &cy = s.dims[1];
    const std::string cxo = cx + "_o", cxi = cx + "_i", cxp = cx + "_p", cyo = cy + "_o",
                      cyi = cy + "_i", ko = k + "_o", ki = k + "_i";
    if (panel > 0) {
        st.split(V(cx), V(cxp), V(cx + "_r"), int(panel));
        st.split(V(cx + "_r"), V(cxo), V(cxi), int(cols));
    } else {
        st.split(V(cx), V(cxo), V(cxi), int(cols));
    }
    st.split(V(cy), V(cyo), V(cyi), int(rows));
    if (chunk > 0)
        st.split(VarOrRVar(k, true), VarOrRVar(ko, true), VarOrRVar(ki, true), int(chunk));
    std::vector<VarOrRVar> order{VarOrRVar(lane, true), V(cxi), VarOrRVar(chunk > 0 ? ki : k, true),
                                 V(cyi), V(cxo)};
    if (chunk > 0) order.emplace_back(ko, true);
    order.push_back(V(cyo));
    if (panel > 0) order.push_back(V(cxp));
    for (size_t d = 2; d < s.dims.size(); d++)
        order.push_back(V(s.dims[d]));
    st.reorder(order);
    if (parallel) st.parallel(V(cyo));
    st.tensorize(V(cyi));
}

/// Whether the target's matrix unit computes update u of the output (Tensorize.h's
/// `c(x, y) += a * b` of 8-bit integers or bfloat16), asked of the lowering on an instance of
/// its own: the update's block of `cols` columns by rows tensorized, with the RVar `lane`
/// innermost (the k lanes), then the columns, the RVar `k` (the k steps) and the rows, every
/// producer at root (a tile multiply reads its operands from memory). True when it lowers to a
/// tile_matmul of an input type the target's matrix unit multiplies.
bool probe_tiles(const apps::Operator &op, const std::vector<int64_t> &shape, const Shape &s, int u,
                 const std::string &lane, const std::string &k, int64_t cols,
                 const Target &target) {
    int64_t rows = std::min<int64_t>(max_tile_block, s.extents[1]);
    while (s.extents[1] % rows != 0)
        rows--;
    try {
        apps::OperatorInstance inst = op.make(shape);
        Func f = inst.output;
        for (size_t d = 0; d < s.dims.size(); d++)
            f.bound(Var(s.dims[d]), 0, s.extents[d]);
        for (Func p : inst.stages)
            if (p.name() != s.out) p.compute_root();
        tensorize_nest(f.update(u), s, lane, k, cols, rows, 0, 0, false);
        std::optional<Type> input = tile_matmul_input(inst.pipeline().lower().body);
        return input && target.has_matrix_unit(*input);
    } catch (const CompileError &) {
        return false;
    }
}

/// A placement value, "where[:registers][:kB]": where, whether it is a register tile, and its K
/// block (1 without one).
std::tuple<std::string, bool, int64_t> parse_placement(const std::string &placement) {
    const size_t k_at = placement.find(":k");
    return std::make_tuple(
        placement.substr(0, placement.find(':')), placement.find(":registers") != std::string::npos,
        k_at == std::string::npos ? int64_t(1) : std::stoll(placement.substr(k_at + 2)));
}

} // namespace

SearchSpace auto_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                       const Target &target) {
    Shape s = read_shape(op.make(shape), target);
    // Which in-place reductions of the output rfactor({}) accepts, asked of the language on an
    // instance of their own (rfactor rewrites the algorithm it is called on).
    apps::OperatorInstance probe = op.make(shape);
    for (Shape::Update &u : s.updates) {
        if (!u.in_place || u.rvars.empty()) continue;
        try {
            probe.output.update(u.index).rfactor({});
            u.sums = true;
        } catch (const CompileError &) {
        }
    }
    // Which updates the matrix unit computes (probe_tiles), for a target that has one: an update
    // in place of an output with two or more dimensions over two RVars of constant extent.
    if (target.has_feature("amx-tile") && s.dims.size() >= 2) {
        const apps::OperatorInstance inst = op.make(shape);
        for (Shape::Update &u : s.updates) {
            if (!u.in_place || u.rvars.size() != 2) continue;
            const Definition &def = inst.output.update_definition(u.index);
            for (int lane = 0; lane < 2 && !u.tiles; lane++) {
                const ReductionVariable &k = def.rdom->vars[size_t(1 - lane)];
                Shape::Update::Tiles t{
                    u.rvars[size_t(lane)], k.name, as_const_int(k.extent).value_or(0), {}};
                for (int64_t cols : {16, 32}) {
                    if (t.k_steps > 0 && s.extents[0] % cols == 0 &&
                        probe_tiles(op, shape, s, u.index, t.lane, t.k, cols, target))
                        t.cols.push_back(cols);
                }
                if (!t.cols.empty()) u.tiles = t;
            }
        }
    }
    SearchSpace space("auto:" + op.name);
    const int d = int(s.dims.size());
    // The dimensions in the roles of x (the tile's vectorized columns) and y (its rows): the
    // output's first two, or with three or more dimensions and inner_dim its last (conv2d's
    // output channels) as x and its first as y.
    const std::vector<std::string> dims = s.dims;
    auto roles = [dims](const ConfigView &c) {
        const int n = int(dims.size());
        const int ix = n >= 3 && c.s("inner_dim") == dims[size_t(n - 1)] ? n - 1 : 0;
        return std::pair<int, int>{ix, ix == 0 ? 1 : 0};
    };
    int64_t ext_x = d > 0 ? s.extents[0] : 1, ext_y = d > 1 ? s.extents[1] : 1;
    if (d >= 3) {
        space.add_choice("inner_dim", {s.dims[0], s.dims[size_t(d - 1)]});
        ext_x = std::max<int64_t>(ext_x, s.extents[size_t(d - 1)]);
        ext_y = std::max<int64_t>(ext_y, s.extents[0]);
    }
    const std::vector<int> extents = s.extents;

    if (d > 0) space.add_powers_of_two("tile_x", 1, std::min<int64_t>(256, floor_pow2(ext_x)));
    // tile_y: powers of two; 6 (with 32 vector registers, the rows of a register tile of 4
    // vectors: 24 sums, the most that leaves registers for the loads; the matmul micro-kernel
    // of oneDNN, OpenBLAS and kiln's own hand schedule on AVX-512); and the other divisors of
    // the extent from 3 to 16, which a register tile needs to cover the output exactly (56
    // pixels: 7 and 14, the 14 of conv2d's hand tile of 2 vectors x 14 pixels).
    if (d > 1) {
        std::vector<int64_t> rows;
        for (int64_t r = 1; r <= std::min<int64_t>(64, floor_pow2(ext_y)); r *= 2)
            rows.push_back(r);
        if (ext_y >= 6 && s.lanes >= 16) rows.push_back(6);
        for (int64_t r = 3; r <= std::min<int64_t>(16, ext_y); r++)
            if (ext_y % r == 0) rows.push_back(r);
        // A tensorized block's rows: every divisor of the rows' extent up to 32 (two AMX tiles).
        const bool tiles = std::any_of(s.updates.begin(), s.updates.end(),
                                       [](const Shape::Update &u) { return bool(u.tiles); });
        for (int64_t r = 17; tiles && r <= std::min<int64_t>(max_tile_block, s.extents[1]); r++)
            if (s.extents[1] % r == 0) rows.push_back(r);
        std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
        space.add_integers("tile_y", rows);
    }
    if (d > 0) space.add_integers("outer_x", {1, 2, 4, 8});
    std::vector<int64_t> widths{1};
    for (int w = std::max(2, s.lanes / 4); w <= s.lanes * 2; w *= 2)
        widths.push_back(w);
    space.add_integers("vector", widths);
    // The prior of a new run's random draws: the natural width 4 times as likely as one lane,
    // a half or quarter vector or a scalar loop, twice the natural width twice as likely (the
    // hand schedules and MetaSchedule's vectorize rule use the natural width).
    std::vector<double> width_weights;
    for (int64_t w : widths)
        width_weights.push_back(w == s.lanes ? 4.0 : w == 2 * int64_t(s.lanes) ? 2.0 : 1.0);
    space.set_weights("vector", width_weights);
    // A register tile holds tile_x / vector * tile_y accumulators: doubling the vector over the
    // same tile halves them, so a mutation steps tile_x along with the vector (conv2d's
    // 16-lane 32 x 8 tile is one move from the 8-lane 16 x 8 one).
    if (d > 0) space.add_coupling("vector", "tile_x");
    if (d > 1) space.add_bool("unroll_y");
    // Which of the two tile loops is outer: a strip of rows per iteration, or a panel of columns
    // (where a reused input's panel can be packed once and read by every row block).
    if (d > 1) space.add_choice("outer_order", {"y_outer", "x_outer"});
    space.add_bool("parallel");
    space.set_weights("parallel", {1.0, 3.0}); // a parallel outer loop 3 times as likely
    // An output larger than the caches (16 MB, as the hand schedules judge it), written once: its
    // vector stores may bypass them (Func::store_nontemporal), so the CPU does not read each line
    // before overwriting it and the output does not evict the inputs. Twice as likely as not.
    if (s.bytes >= apps::streaming_bytes) {
        space.add_bool("store_nontemporal");
        space.set_weights("store_nontemporal", {1.0, 2.0});
    }
    for (const Shape::Update &u : s.updates) {
        std::string p = "update" + std::to_string(u.index) + "_";
        if (u.pure_x) space.add_bool(p + "vectorize");
        // Where a reduction of the output runs in its tiles: innermost (a sum per point), or
        // between the tile loops and the tile (a register tile: at most 32 vectors of sums).
        // A register tile in the output itself stays in memory (LLVM cannot tell its rows apart
        // across a symbolic stride, see ARCHITECTURE.md), so with ":registers" the reduction
        // moves into an intermediate of sums (rfactor({})) computed per tile or per outer tile
        // of the output like a producer's register tile, with an optional K block, and the
        // output's update adds the tile in.
        if (u.in_place && !u.rvars.empty() && d > 0) {
            std::vector<std::string> at{"innermost", "tile"};
            if (u.sums && d > 1) {
                at.push_back("outer_tile:registers");
                for (int64_t b = 16;
                     u.rvars.size() == 1 && b <= std::min<int64_t>(512, u.rextent / 2); b *= 2)
                    at.push_back("outer_tile:registers:k" + std::to_string(b));
                at.push_back("tile:registers");
            }
            space.add_choice(p + "r_at", at);
            space.add_constraint(
                p + "r_at tile needs tile_x * tile_y / vector <= 32 (sums)",
                [p, d](const ConfigView &c) {
                    const int64_t rows = d > 1 ? c.i("tile_y") : 1;
                    const bool registers = c.s(p + "r_at").find(":registers") != std::string::npos;
                    const int64_t lanes =
                        registers || (c.has(p + "vectorize") && c.b(p + "vectorize"))
                            ? c.i("vector")
                            : 1;
                    return c.s(p + "r_at") == "innermost" || c.i("tile_x") * rows / lanes <= 32;
                });
            // The update (f = f + sums) may not compute a point twice, so its tiles guard their
            // tails, and a tail tile's sums would have a region of symbolic size, which a
            // register tile cannot unroll: the tiles must cover the output exactly.
            if (u.sums && d > 1)
                space.add_constraint(
                    p + "r_at registers needs tile_x * outer_x and tile_y to divide the output",
                    [p, extents, roles](const ConfigView &c) {
                        if (c.s(p + "r_at").find(":registers") == std::string::npos) return true;
                        const auto [ix, iy] = roles(c);
                        return extents[size_t(ix)] % (c.i("tile_x") * c.i("outer_x")) == 0 &&
                               extents[size_t(iy)] % c.i("tile_y") == 0;
                    });
            space.add_constraint(p + "r_at outer_tile needs outer_x > 1", [p](const ConfigView &c) {
                return c.s(p + "r_at").rfind("outer_tile", 0) != 0 || c.i("outer_x") > 1;
            });
        }
        if (!u.rvar.empty() && u.rextent >= 8) {
            space.add_powers_of_two(p + "split_r", 1, std::min<int64_t>(64, floor_pow2(u.rextent)));
            if (u.sums && d > 1)
                space.add_constraint(p + "split_r is 1 with " + p + "r_at registers (its K block)",
                                     [p](const ConfigView &c) {
                                         return c.s(p + "r_at").find(":registers") ==
                                                    std::string::npos ||
                                                c.i(p + "split_r") == 1;
                                     });
            // rfactor pays off for a large reduction into a small output.
            int64_t out_points = 1;
            for (int e : s.extents)
                out_points *= e;
            if (u.rextent >= 256 && out_points <= u.rextent) {
                // Stage::rfactor of the split's outer part needs the factor to divide the
                // reduction's extent.
                space.add_bool(p + "rfactor");
                space.add_constraint(
                    p + "rfactor needs " + p + "r_at innermost or tile", [p](const ConfigView &c) {
                        return !c.b(p + "rfactor") || !c.has(p + "r_at") ||
                               c.s(p + "r_at").find(":registers") == std::string::npos;
                    });
                int64_t extent = u.rextent;
                space.add_constraint(
                    p + "split_r divides the reduction extent when " + p + "rfactor",
                    [p, extent](const ConfigView &c) {
                        return !c.b(p + "rfactor") || extent % c.i(p + "split_r") == 0;
                    });
            }
        }
    }
    // Register tiles (placements ":registers") whose innermost reduction loop can be unrolled
    // by unroll_r: the placement knob and that loop's extent (its K block's, for a K-blocked
    // reduction of one RVar, a power of two).
    struct Unrollable {
        std::string knob;
        bool even;        ///< the innermost RVar's extent is a constant multiple of 2
        bool single_rvar; ///< a K block then splits that RVar: the block is the innermost loop
    };
    auto even = [](int64_t extent) { return extent > 0 && extent % 2 == 0; };
    std::vector<Unrollable> unrollable;
    for (const Shape::Update &u : s.updates) {
        if (u.in_place && u.sums && d > 1 && !u.rvars.empty())
            unrollable.push_back({"update" + std::to_string(u.index) + "_r_at", even(u.rextent),
                                  u.rvars.size() == 1});
    }
    for (const Shape::Producer &p : s.producers) {
        std::vector<std::string> where;
        if (!p.has_updates) where.push_back("inline");
        where.push_back("root");
        if (d > 1) where.push_back("strip");
        if (d > 0) {
            where.push_back("outer_tile");
            where.push_back("tile");
        }
        // A register tile (the space-reduction-space nest of a matmul micro-kernel), placement
        // "tile:registers": a reduction computed per tile of the output with its pure loops
        // inside its reduction loops, the innermost vectorized and all of them unrolled, so the
        // tile's sums stay in registers while the reduction streams through them. Per outer tile
        // ("outer_tile:registers") the reduction walks the outer tile's register tiles inside its
        // own loop, and with a K block ("outer_tile:registers:k64") its outermost RVar is split
        // so that the block loop is outside the register tiles: space-space (the output's strip
        // and outer tile loops), reduction (the block), space (the register tiles), reduction
        // (within the block), space (the register tile), the SSRSRS nest of Ansor's CPU
        // sketches, so one block of the reused input is read by every register tile of the outer
        // tile while it is in cache. These are values of the placement knob, not knobs of their
        // own, so that no combination of knobs is a register tile without a place.
        // Only a producer with a variable that can play the output's x (see roles) gets them.
        auto has = [&](const std::string &v) {
            return std::find(p.args.begin(), p.args.end(), v) != p.args.end();
        };
        const bool has_x = d > 1 && (has(s.dims[0]) || (d >= 3 && has(s.dims[size_t(d - 1)])));
        // A row reduction's partial sums partial(l, y), computed per strip of rows: "strip:
        // registers" keeps the row's lane_extent lanes of every row of the strip in vector
        // registers (lanes innermost, vectorized and unrolled: independent accumulators that
        // hide the add latency) while the reduction walks the row. Its lanes are its own
        // variable with a constant extent, so the vectors cover them exactly.
        const bool row_lanes = d == 2 && p.dims == 2 && p.lane_extent > 0 && p.pointwise_dims[1] &&
                               p.args[1] == s.dims[1] && !p.reductions.empty();
        if (row_lanes) {
            where.push_back("strip:registers");
            const std::string at = p.name + "_at";
            const int64_t lanes = p.lane_extent;
            space.add_constraint(at + " strip:registers needs y_outer", [at](const ConfigView &c) {
                return c.s(at) != "strip:registers" || c.s("outer_order") == "y_outer";
            });
            space.add_constraint(at + " strip:registers needs vector to divide " +
                                     std::to_string(lanes) + " lanes and " + std::to_string(lanes) +
                                     " / vector * tile_y <= 32",
                                 [at, lanes](const ConfigView &c) {
                                     return c.s(at) != "strip:registers" ||
                                            (lanes % c.i("vector") == 0 &&
                                             lanes / c.i("vector") * c.i("tile_y") <= 32);
                                 });
        }
        const bool constant_region = std::find(p.pointwise_dims.begin(), p.pointwise_dims.end(),
                                               false) == p.pointwise_dims.end();
        if (!p.reductions.empty() && has_x && constant_region) {
            where.push_back("outer_tile:registers");
            for (int64_t b = 16;
                 p.outer_rextent >= 32 && b <= std::min<int64_t>(512, p.outer_rextent / 2); b *= 2)
                where.push_back("outer_tile:registers:k" + std::to_string(b));
            where.push_back("tile:registers");
            std::string at = p.name + "_at";
            unrollable.push_back(
                {at, std::all_of(p.inner_rextents.begin(), p.inner_rextents.end(), even),
                 p.reductions.size() == 1 && p.reductions[0].second.size() == 1});
            // The register tile vectorizes the producer's variable named like the output's x,
            // whose region is a tile_x multiple of the vector; any other variable's region is not
            // (rounded up, it would read past its input).
            const std::vector<std::string> args = p.args;
            space.add_constraint(at + " with registers needs " + p.name +
                                     " to have the output's x variable",
                                 [at, args, dims, roles](const ConfigView &c) {
                                     if (c.s(at).find(":registers") == std::string::npos)
                                         return true;
                                     const std::string &x = dims[size_t(roles(c).first)];
                                     return std::find(args.begin(), args.end(), x) != args.end();
                                 });
            space.add_constraint(at + " with registers needs tile_x * tile_y / vector <= 32",
                                 [at](const ConfigView &c) {
                                     return c.s(at).find(":registers") == std::string::npos ||
                                            c.i("tile_x") * c.i("tile_y") / c.i("vector") <= 32;
                                 });
        }
        // Read by several stages of the output, or by one whose loops are not the tiles (a scan):
        // no loop of the output encloses every use (see the constraint below).
        bool untiled_use = p.out_stages.size() > 1;
        for (int stage : p.out_stages)
            untiled_use = untiled_use || (stage > 0 && !s.updates[size_t(stage - 1)].in_place);
        if (untiled_use)
            where.erase(
                std::remove_if(where.begin(), where.end(),
                               [](const std::string &w) { return w != "inline" && w != "root"; }),
                where.end());
        space.add_choice(p.name + "_at", where);
        // A producer whose math functions cost more than a few instructions (a transcendental:
        // softmax's exponentials) and that is called more than once is computed once per call
        // when inlined: a new run draws that a quarter as often as each place that stores it
        // (TVM's AutoInline refuses to inline exp on CPUs; here it stays in the space).
        if (where.front() == "inline" && p.call_sites > 1 && p.math_ops >= expensive_math_ops) {
            std::vector<double> w(where.size(), 1.0);
            w.front() = 0.25;
            space.set_weights(p.name + "_at", w);
        }
        if (p.dims > 0) space.add_bool(p.name + "_vectorize");
    }

    // Packing stages: an input a reduction reads, copied by its wrapper per strip, outer tile or
    // tile of the output into a dense buffer (with outer_order x_outer and the wrapper at the
    // strip, a matmul's column panel of B: what the hand schedule's B_panel Func does, found
    // for an algorithm that does not name one).
    for (const Shape::Pack &pk : s.packs) {
        std::vector<std::string> where{"none"};
        if (d > 1) where.push_back("strip");
        if (d > 0) {
            where.push_back("outer_tile");
            where.push_back("tile");
        }
        if (where.size() > 1) space.add_choice(pk.knob(), where);
    }

    // tensorize: an update the target's matrix unit computes (probe_tiles) may run as blocks of
    // tile_y rows (at most 32, dividing the rows) by tile_x columns (one or two tiles of 16) in
    // tile registers, summed over the whole reduction by tile multiplies (Stage::tensorize),
    // the row blocks parallel: the structure of the matmul_u8s8 / matmul_bf16 hand schedules,
    // here found for any algorithm of that form. Around the blocks, panels of `panel` columns
    // outermost (a panel of the column input stays in L2 while every row block passes over it)
    // and chunks of `k_chunk` k steps outside the panel's blocks (a row block's rows of the row
    // input over a chunk stay in L1 across the panel). The output's other knobs that would change
    // nothing are held at one value, so that no two configs are the same schedule.
    for (const Shape::Update &u : s.updates) {
        if (!u.tiles) continue;
        const std::string p = "update" + std::to_string(u.index) + "_";
        const std::string on = p + "tensorize";
        space.add_bool(on);
        // The matrix unit multiplies 16 x 16 tiles in 16 cycles where vectors take hundreds:
        // four of five new draws try it.
        space.set_weights(on, {1.0, 4.0});
        const int64_t cols_extent = s.extents[0], rows_extent = s.extents[1];
        std::vector<int64_t> panels{cols_extent}; // whole
        for (int64_t w = 64; w < cols_extent && w <= 1024; w *= 2)
            if (cols_extent % w == 0) panels.push_back(w);
        space.add_integers(p + "panel", panels);
        std::vector<int64_t> chunks{u.tiles->k_steps}; // whole
        for (int64_t c : {128, 256, 512})
            if (c < u.tiles->k_steps && u.tiles->k_steps % c == 0) chunks.push_back(c);
        space.add_integers(p + "k_chunk", chunks);
        space.add_implication(on, false, p + "panel", cols_extent);
        space.add_implication(on, false, p + "k_chunk", u.tiles->k_steps);
        std::string widths;
        for (int64_t w : u.tiles->cols)
            widths += (widths.empty() ? "" : " or ") + std::to_string(w);
        const std::vector<int64_t> cols = u.tiles->cols;
        if (cols.size() == 1) {
            space.add_implication(on, true, "tile_x", cols[0]);
        } else {
            space.add_constraint(on + " needs tile_x " + widths + " (the block widths that lower)",
                                 [on, cols](const ConfigView &c) {
                                     return !c.b(on) || std::find(cols.begin(), cols.end(),
                                                                  c.i("tile_x")) != cols.end();
                                 });
        }
        space.add_constraint(on + " needs tile_y <= 32 dividing " + std::to_string(rows_extent) +
                                 " (a block is at most two tiles of 16 rows, with no tail)",
                             [on, rows_extent](const ConfigView &c) {
                                 const int64_t rows = c.i("tile_y");
                                 return !c.b(on) ||
                                        (rows <= max_tile_block && rows_extent % rows == 0);
                             });
        space.add_constraint(on + " needs " + p + "panel to be a multiple of tile_x",
                             [on, p](const ConfigView &c) {
                                 return !c.b(on) || c.i(p + "panel") % c.i("tile_x") == 0;
                             });
        // Held at one value by implications (the knobs of the vector schedule it replaces; a
        // draw with tensorize sets them).
        std::vector<std::pair<std::string, nlohmann::json>> held{{"outer_x", 1}};
        if (d >= 3) held.emplace_back("inner_dim", s.dims[0]);
        held.emplace_back("outer_order", "y_outer");
        held.emplace_back("unroll_y", false);
        const std::vector<std::pair<std::string, nlohmann::json>> update_knobs{
            {"r_at", "innermost"}, {"split_r", 1}, {"vectorize", false}, {"rfactor", false}};
        for (const auto &[knob, value] : update_knobs)
            if (space.has_knob(p + knob)) held.emplace_back(p + knob, value);
        for (const Shape::Pack &pk : s.packs)
            if (pk.consumer == s.out && space.has_knob(pk.knob()))
                held.emplace_back(pk.knob(), "none");
        // A tile multiply reads its operands from memory: what the update reads is computed at
        // root.
        for (const Shape::Producer &pr : s.producers)
            if (std::count(pr.out_stages.begin(), pr.out_stages.end(), u.index + 1))
                held.emplace_back(pr.name + "_at", "root");
        for (const auto &[knob, value] : held)
            space.add_implication(on, true, knob, value);
    }

    if (d > 0) {
        space.add_constraint("vector <= tile_x and tile_x % vector == 0", [](const ConfigView &c) {
            return c.i("vector") <= c.i("tile_x") && c.i("tile_x") % c.i("vector") == 0;
        });
        space.add_constraint("tile_x * outer_x <= output extent of x",
                             [extents, roles](const ConfigView &c) {
                                 const int64_t ext = extents[size_t(roles(c).first)];
                                 return c.i("tile_x") * c.i("outer_x") <= ext;
                             });
    }
    if (d > 1) {
        space.add_constraint("tile_x * tile_y <= 4096", [](const ConfigView &c) {
            return c.i("tile_x") * c.i("tile_y") <= 4096;
        });
        // The ranges of tile_x and tile_y cover every choice of inner_dim; these keep the
        // tiles inside the dimensions the choice gives them (a tile wider than its dimension
        // would have nothing to shift inwards to).
        space.add_constraint("tile_y <= output extent of y", [extents, roles](const ConfigView &c) {
            return c.i("tile_y") <= extents[size_t(roles(c).second)];
        });
        space.add_constraint("unroll_y needs tile_y <= 16", [](const ConfigView &c) {
            return !c.b("unroll_y") || c.i("tile_y") <= 16;
        });
    }
    // A producer computed at a loop of the output must have every use inside that loop: each
    // other producer that calls it is computed at the same loop or a deeper one. An inlined
    // consumer uses it wherever its own consumers are (the output: the innermost loop).
    auto consumers = std::make_shared<std::map<std::string, std::vector<std::string>>>();
    for (const Shape::Producer &p : s.producers)
        (*consumers)[p.name] = p.consumers;
    auto rank = [](const std::string &placement) {
        const std::string where = placement.substr(0, placement.find(':'));
        return where == "root"         ? 0
               : where == "strip"      ? 1
               : where == "outer_tile" ? 2
               : where == "tile"       ? 3
                                       : 4;
    };
    auto effective =
        std::make_shared<std::function<int(const ConfigView &, const std::string &, int)>>();
    // The recursion holds itself weakly: a strong self-capture would be a reference cycle (a
    // leak); the constraints below own it.
    std::weak_ptr<std::function<int(const ConfigView &, const std::string &, int)>> self =
        effective;
    *effective = [consumers, rank, self](const ConfigView &c, const std::string &f, int depth) {
        int r = rank(c.s(f + "_at"));
        if (r < 4 || depth > 16) return r;
        auto recurse = self.lock();
        int deepest_use = 4;
        for (const std::string &d : consumers->at(f))
            deepest_use = std::min(deepest_use, (*recurse)(c, d, depth + 1));
        return deepest_use;
    };
    for (const Shape::Producer &p : s.producers) {
        if (p.consumers.empty()) continue;
        std::string name = p.name;
        space.add_constraint("every use of " + name + " is inside the loop it is computed at",
                             [name, consumers, rank, effective](const ConfigView &c) {
                                 int rp = rank(c.s(name + "_at"));
                                 if (rp == 0 || rp == 4) return true;
                                 for (const std::string &d : consumers->at(name)) {
                                     if ((*effective)(c, d, 0) < rp) return false;
                                 }
                                 return true;
                             });
    }
    // The loops of the output belong to one stage: a producer computed at one must be used by one
    // stage of the output only (through the producers computed inside the same loops or
    // inlined), and that stage must be one tiled like the pure definition (an update in place,
    // not rfactored): a scan's loops have other names, and kiln's compute_at refuses a loop name
    // that several stages use.
    auto out_stages = std::make_shared<std::map<std::string, std::vector<int>>>();
    for (const Shape::Producer &p : s.producers)
        (*out_stages)[p.name] = p.out_stages;
    auto stages_of = std::make_shared<
        std::function<void(const ConfigView &, const std::string &, std::set<int> &, int)>>();
    std::weak_ptr<
        std::function<void(const ConfigView &, const std::string &, std::set<int> &, int)>>
        stages_self = stages_of;
    *stages_of = [out_stages, consumers, rank, stages_self](
                     const ConfigView &c, const std::string &f, std::set<int> &stages, int depth) {
        stages.insert(out_stages->at(f).begin(), out_stages->at(f).end());
        if (depth > 16) return;
        auto recurse = stages_self.lock();
        for (const std::string &q : consumers->at(f))
            if (rank(c.s(q + "_at")) > 0) (*recurse)(c, q, stages, depth + 1);
    };
    const std::vector<Shape::Update> updates = s.updates;
    auto tiled = [updates, d](const ConfigView &c, int stage) {
        if (stage == 0) return d > 0;
        const Shape::Update &u = updates[size_t(stage - 1)];
        const std::string rf = "update" + std::to_string(u.index) + "_rfactor";
        return d > 0 && u.in_place && !(c.has(rf) && c.b(rf));
    };
    for (const Shape::Producer &p : s.producers) {
        const std::string name = p.name;
        space.add_constraint(
            name + " computed at a loop of " + s.out + " is used by one of its tiled stages only",
            [name, rank, stages_of, tiled](const ConfigView &c) {
                const int rp = rank(c.s(name + "_at"));
                if (rp == 0 || rp == 4) return true;
                std::set<int> stages;
                (*stages_of)(c, name, stages, 0);
                return stages.size() <= 1 && (stages.empty() || tiled(c, *stages.begin()));
            });
    }
    // An output's intermediate of sums (r_at ":registers") reads what its update read, inside
    // the loop it is computed at: what is computed or packed for it must be at that loop or
    // outside it.
    for (const Shape::Update &u : s.updates) {
        const std::string r_at = "update" + std::to_string(u.index) + "_r_at";
        if (!u.sums || d < 2) continue;
        auto outside_sums = [r_at, rank](const ConfigView &c, const std::string &placement) {
            const std::string &v = c.s(r_at);
            return v.find(":registers") == std::string::npos || rank(placement) == 0 ||
                   rank(placement) == 4 || rank(placement) <= rank(v);
        };
        for (const Shape::Producer &p : s.producers) {
            const std::string name = p.name;
            const int stage = u.index + 1;
            space.add_constraint(name + " is computed outside " + s.out + "'s sums",
                                 [name, stage, stages_of, outside_sums](const ConfigView &c) {
                                     std::set<int> stages;
                                     (*stages_of)(c, name, stages, 0);
                                     return !stages.count(stage) ||
                                            outside_sums(c, c.s(name + "_at"));
                                 });
        }
        for (const Shape::Pack &pk : s.packs) {
            const std::string knob = pk.knob();
            if (pk.consumer == s.out)
                space.add_constraint(knob + " is outside " + s.out + "'s sums",
                                     [knob, outside_sums](const ConfigView &c) {
                                         return c.s(knob) == "none" || outside_sums(c, c.s(knob));
                                     });
        }
    }
    for (const Shape::Pack &pk : s.packs) {
        const std::string knob = pk.knob();
        if (d == 0) continue; // no loop of the output to pack at
        const std::string consumer = pk.consumer;
        const bool of_output = consumer == s.out;
        space.add_constraint(knob + " is inside the loop " + consumer + " is computed at",
                             [knob, consumer, of_output, rank, effective](const ConfigView &c) {
                                 const std::string &v = c.s(knob);
                                 return v == "none" || of_output ||
                                        rank(v) <= (*effective)(c, consumer, 0);
                             });
        // rfactor moves the output's reduction (and its reads) into a new Func.
        std::vector<std::string> rfactors;
        for (const Shape::Update &u : s.updates)
            rfactors.push_back("update" + std::to_string(u.index) + "_rfactor");
        if (of_output)
            space.add_constraint(knob + " needs no rfactor of " + consumer,
                                 [knob, rfactors](const ConfigView &c) {
                                     if (c.s(knob) == "none") return true;
                                     for (const std::string &r : rfactors)
                                         if (c.has(r) && c.b(r)) return false;
                                     return true;
                                 });
        space.add_constraint(knob + " outer_tile needs outer_x > 1", [knob](const ConfigView &c) {
            return c.s(knob) != "outer_tile" || c.i("outer_x") > 1;
        });
    }
    for (const Shape::Producer &p : s.producers) {
        std::string name = p.name;
        space.add_constraint(
            name + "_at outer_tile needs outer_x > 1", [name](const ConfigView &c) {
                return c.s(name + "_at").rfind("outer_tile", 0) != 0 || c.i("outer_x") > 1;
            });
        if (p.dims > 0)
            space.add_constraint(name + "_vectorize needs " + name + " computed, not inlined",
                                 [name](const ConfigView &c) {
                                     return !c.b(name + "_vectorize") ||
                                            c.s(name + "_at") != "inline";
                                 });
    }

    // unroll_r: the innermost reduction loop of the register tiles unrolled twice (the hand
    // matmul's k: one step of the row addresses serves two steps of the sums). Offered where a
    // register tile can be placed; 2 needs one placed, each with an even innermost extent (its K
    // block's, when the block splits the only RVar), so that no tail guard enters the tile.
    if (!unrollable.empty()) {
        space.add_integers("unroll_r", {1, 2});
        space.add_constraint(
            "unroll_r 2 needs a register tile whose innermost reduction extent is even",
            [unrollable](const ConfigView &c) {
                if (c.i("unroll_r") == 1) return true;
                bool any = false;
                for (const Unrollable &u : unrollable) {
                    if (!c.has(u.knob)) continue;
                    const auto [where, registers, k_block] = parse_placement(c.s(u.knob));
                    if (!registers) continue;
                    any = true;
                    // K blocks are powers of two from 16.
                    if (!(k_block > 1 && u.single_rvar) && !u.even) return false;
                }
                return any;
            });
    }

    space.set_apply([s, roles](apps::OperatorInstance &inst, const ConfigView &c) {
        Func f = inst.output;
        const int d = int(s.dims.size());
        auto V = [](const std::string &n) { return VarOrRVar(n, false); };
        const std::pair<int, int> role = d > 0 ? roles(c) : std::pair<int, int>{0, 1};
        const int ix = role.first, iy = role.second;
        std::string x = d > 0 ? s.dims[size_t(ix)] : "", y = d > 1 ? s.dims[size_t(iy)] : "";
        std::string xo = x + "_o", xi = x + "_i", xm = x + "_m", yo = y + "_o", yi = y + "_i";
        // The output's loops, outer to inner: the strip loop (yo, or xo with x_outer), the outer
        // tile loop (the other of the two, with outer_x > 1), the tile loop (xm with outer_x > 1,
        // else the inner of yo and xo), then the tile itself. The output's other dimensions run
        // outside them all, or with x_outer between the strip loop and the others (tile_stage).
        std::string tile_loop, outer_tile_loop, strip_loop;
        // The space tunes one shape: the output's extents are constants (a kernel built for
        // another shape is a shape-dispatched variant of its own), so its loops and the regions
        // of its producers have constant extents and their buffers live on the stack.
        for (int k = 0; k < d; k++)
            f.bound(Var(s.dims[size_t(k)]), 0, s.extents[size_t(k)]);
        if (c.has("store_nontemporal") && c.b("store_nontemporal")) f.store_nontemporal();
        const int64_t tx = d > 0 ? c.i("tile_x") : 1, ox = d > 0 ? c.i("outer_x") : 1;
        const bool x_outer = d > 1 && c.s("outer_order") == "x_outer";
        if (d > 0) {
            strip_loop = x_outer || d == 1 ? xo : yo;
            if (ox > 1) outer_tile_loop = x_outer ? yo : xo;
            tile_loop = ox > 1 ? xm : x_outer ? yo : xo;
        }
        // The output's loop for a placement ("strip", "outer_tile" or "tile").
        auto loop_at = [&](const std::string &where) {
            return where == "strip"        ? strip_loop
                   : where == "outer_tile" ? outer_tile_loop
                                           : tile_loop;
        };
        // Tiles a stage of the output: the pure definition, and each update that keeps the pure
        // variables in place with the same loops (a producer computed at a loop of the output
        // finds it in the stage that uses it). An update's RVars go innermost, or with
        // `in_tile` between the tile loops and the tile: its register tile, the tile's sums
        // kept in registers while the reduction streams through them.
        auto tile_stage = [&](Stage st, const std::vector<VarOrRVar> &reduction, bool in_tile,
                              bool vectorize) {
            // The outer tile first, then its tiles: splitting the outer tile (a constant
            // multiple of the tile) leaves no tail, so a region per outer tile or per tile has a
            // constant size (splitting the tile loop instead would shift the last outer tile
            // inwards by a symbolic amount).
            if (ox > 1) {
                st.split(V(x), V(xo), V(x + "_r"), int(tx * ox));
                st.split(V(x + "_r"), V(xm), V(xi), int(tx));
            } else {
                st.split(V(x), V(xo), V(xi), int(tx));
            }
            std::vector<VarOrRVar> order;
            if (!in_tile) order = reduction;
            order.push_back(V(xi));
            if (d > 1) {
                st.split(V(y), V(yo), V(yi), int(c.i("tile_y")));
                order.push_back(V(yi));
            }
            if (in_tile) order.insert(order.end(), reduction.begin(), reduction.end());
            if (ox > 1) order.push_back(V(xm));
            // The output's other dimensions (conv2d's rows, with its channels as x): outside the
            // two tile loops, or with x_outer inside the panel loop, which is then outermost of
            // all: a panel of x (a block of conv2d's output channels) is one parallel task, and
            // a producer per strip (the block's repacked weights) is computed once per panel.
            auto others = [&] {
                for (int k = 0; k < d; k++) {
                    if (k != ix && k != iy) order.push_back(V(s.dims[size_t(k)]));
                }
            };
            if (x_outer) {
                order.push_back(V(yo));
                others();
                order.push_back(V(xo));
            } else {
                order.push_back(V(xo));
                if (d > 1) order.push_back(V(yo));
                others();
            }
            st.reorder(order);
            const int lanes = int(c.i("vector"));
            if (in_tile) {
                // The register tile: nothing loops inside the reduction (tile_x is a multiple of
                // the vector, so the split has no tail).
                if (vectorize && lanes > 1) {
                    st.split(V(xi), V(xi), V(xi + "_v"), lanes);
                    st.vectorize(V(xi + "_v"));
                }
                st.unroll(V(xi));
                if (d > 1) st.unroll(V(yi));
            } else {
                if (vectorize && lanes > 1) st.vectorize(V(xi), lanes);
                if (d > 1 && c.b("unroll_y")) st.unroll(V(yi));
            }
            if (c.b("parallel")) st.parallel(order.back());
        };
        // A placement value: the output's loop ("root", "strip", "outer_tile", "tile"; "inline"
        // and "innermost" too), whether it is a register tile, and its K block (1: none).
        // A register tile of p (a producer, or the output's intermediate of sums) computed per
        // tile or per outer tile of the output: its pure loops inside its reduction loops, vx
        // vectorized and every pure loop unrolled, so the tile's sums stay in registers while
        // the reduction streams through them (see the placements' comment in auto_space).
        auto schedule_register_tile =
            [&](Func p, const std::string &vx, const std::vector<std::string> &rows,
                const std::vector<std::pair<int, std::vector<std::string>>> &reductions,
                bool per_outer_tile, int64_t k_block) {
                const int lanes = int(c.i("vector"));
                const int64_t unroll_r = c.has("unroll_r") ? c.i("unroll_r") : 1;
                // The tile's sums are set to zero by whole vectors (the region is a multiple of
                // vector wide, so ShiftInwards has no tail): a guarded tail would be masked stores,
                // which keep LLVM from promoting the tile to registers.
                if (lanes > 1) p.vectorize(V(vx), lanes);
                for (const std::string &a : rows)
                    p.unroll(V(a));
                for (const auto &[u, rvars] : reductions) {
                    Stage st = p.update(u);
                    // The register tile's columns: the producer's vx, or within the outer tile
                    // vx's register tiles. The vector lanes split off first: an update may round
                    // up only a split of its own variable (the region is a multiple of vector
                    // wide); the register tiles then split the vector groups, which they divide
                    // exactly.
                    std::vector<VarOrRVar> order;
                    if (lanes > 1) {
                        st.split(V(vx), V(vx), V(vx + "_v"), lanes, TailStrategy::RoundUp);
                        order.push_back(V(vx + "_v"));
                    }
                    std::string cols = vx;
                    if (per_outer_tile) {
                        cols = vx + "_r";
                        st.split(V(vx), V(vx), V(cols), int(c.i("tile_x") / std::max(lanes, 1)),
                                 TailStrategy::RoundUp);
                    }
                    order.push_back(V(cols));
                    for (const std::string &a : rows)
                        order.push_back(V(a));
                    for (size_t r = 0; r + 1 < rvars.size(); r++)
                        order.emplace_back(rvars[r], true);
                    const std::string &last = rvars.back();
                    if (k_block > 1) {
                        st.split(VarOrRVar(last, true), VarOrRVar(last + "_o", true),
                                 VarOrRVar(last + "_i", true), int(k_block));
                        order.emplace_back(last + "_i", true);
                    } else {
                        order.emplace_back(last, true);
                    }
                    // unroll_r: the innermost of the RVars just placed, split in two, its inner
                    // half (2) innermost of them and unrolled.
                    const size_t inner_at = order.size() - rvars.size();
                    std::string unrolled;
                    if (unroll_r > 1) {
                        const std::string r = order[inner_at].name();
                        unrolled = r + "_u";
                        st.split(VarOrRVar(r, true), VarOrRVar(r, true), VarOrRVar(unrolled, true),
                                 int(unroll_r));
                        order.insert(order.begin() + std::ptrdiff_t(inner_at),
                                     VarOrRVar(unrolled, true));
                    }
                    if (per_outer_tile) order.push_back(V(vx));
                    if (k_block > 1) order.emplace_back(last + "_o", true);
                    st.reorder(order);
                    if (!unrolled.empty()) st.unroll(VarOrRVar(unrolled, true));
                    if (lanes > 1) st.vectorize(V(vx + "_v"));
                    st.unroll(V(cols));
                    for (const std::string &a : rows)
                        st.unroll(V(a));
                }
            };
        // The variable of a Func computed in the output's tiles that is vectorized: the one
        // named like the output's x (conv's output channel), else its first; the others, in
        // order, are its tile's rows. Vectors of it are contiguous only when it is innermost in
        // memory, so its storage and loops are reordered to put it first.
        auto tile_vars = [&](Func p, bool reorder) {
            const std::vector<std::string> &args = p.args();
            std::string vx = args.empty() ? "" : args[0];
            if (std::find(args.begin(), args.end(), x) != args.end()) vx = x;
            std::vector<std::string> rows;
            for (const std::string &a : args)
                if (a != vx) rows.push_back(a);
            if (!args.empty() && vx != args[0] && reorder) {
                std::vector<Var> storage{Var(vx)};
                std::vector<VarOrRVar> loops{V(vx)};
                for (const std::string &a : rows) {
                    storage.emplace_back(a);
                    loops.push_back(V(a));
                }
                p.reorder_storage(storage);
                p.reorder(loops);
            }
            return std::make_pair(vx, rows);
        };
        if (d > 0) tile_stage(Stage(f.function(), 0), {}, false, true);

        std::vector<Func> sum_funcs; // the output's intermediates of sums
        for (const Shape::Update &u : s.updates) {
            std::string p = "update" + std::to_string(u.index) + "_";
            Stage st = f.update(u.index);
            const bool rfactor = c.has(p + "rfactor") && c.b(p + "rfactor");
            const bool vectorize = c.has(p + "vectorize") && c.b(p + "vectorize");
            std::vector<VarOrRVar> reduction;
            for (const std::string &r : u.rvars)
                reduction.emplace_back(r, true);
            if (c.has(p + "split_r") && c.i(p + "split_r") > 1) {
                VarOrRVar r(u.rvar, true), ro(u.rvar + "_o", true), ri(u.rvar + "_i", true);
                st.split(r, ro, ri, int(c.i(p + "split_r")));
                reduction.erase(reduction.begin());
                reduction.insert(reduction.begin(), {ri, ro});
                if (rfactor) {
                    Func inter = st.rfactor(RVar(u.rvar + "_o"), Var("rf_u"), s.out + "_rf");
                    inter.compute_root();
                    inter.update(0).parallel(V("rf_u"));
                }
            }
            const auto [r_where, r_registers, r_k_block] =
                parse_placement(c.has(p + "r_at") ? c.s(p + "r_at") : "innermost");
            if (c.has(p + "tensorize") && c.b(p + "tensorize")) {
                const int64_t panel = c.i(p + "panel"), chunk = c.i(p + "k_chunk");
                tensorize_nest(st, s, u.tiles->lane, u.tiles->k, c.i("tile_x"), c.i("tile_y"),
                               panel < s.extents[0] ? panel : 0,
                               chunk < u.tiles->k_steps ? chunk : 0, c.b("parallel"));
            } else if (r_registers) {
                // The reduction in an intermediate of sums, a register tile per tile or outer
                // tile of the output; the update adds it in, tiled like the pure definition.
                Func sums =
                    st.rfactor({}, s.out + "_sums" + (u.index ? std::to_string(u.index) : ""));
                sums.compute_at(f, V(loop_at(r_where)));
                const auto [vx, rows] = tile_vars(sums, true);
                schedule_register_tile(sums, vx, rows, {{0, u.rvars}}, r_where == "outer_tile",
                                       r_k_block);
                sum_funcs.push_back(sums);
                tile_stage(st, {}, false, vectorize);
            } else if (d > 0 && u.in_place && !rfactor) {
                tile_stage(st, reduction, r_where == "tile", vectorize);
            } else if (vectorize && c.i("vector") > 1 && ix == 0) {
                st.vectorize(V(x), int(c.i("vector")));
            }
        }

        for (const Func &pf : inst.stages) {
            if (pf.name() == s.out) continue;
            Func p = pf;
            const auto [where, register_tile, k_block] = parse_placement(c.s(p.name() + "_at"));
            if (where == "inline") continue;
            if (where == "root") {
                p.compute_root();
                if (p.dimensions() > 1) p.parallel(V(p.args().back()));
            } else {
                p.compute_at(f, V(loop_at(where)));
            }
            const Shape::Producer *info = nullptr;
            for (const Shape::Producer &sp : s.producers)
                if (sp.name == p.name()) info = &sp;
            const bool vectorized = p.dimensions() > 0 && c.b(p.name() + "_vectorize");
            const auto [vx, rows] = tile_vars(p, register_tile || vectorized);
            const std::vector<std::string> &args = p.args();
            if (register_tile && info)
                schedule_register_tile(p, vx, rows, info->reductions, where == "outer_tile",
                                       k_block);
            if (vectorized && !register_tile) {
                int lanes = int(std::max<int64_t>(c.i("vector"), 2));
                // GuardWithIf: a producer's region may be narrower than a vector (conv2d's
                // w_packed computed per output channel), where ShiftInwards would read before
                // the input's start.
                p.vectorize(V(vx), lanes, TailStrategy::GuardWithIf);
                const size_t at = size_t(std::find(args.begin(), args.end(), vx) - args.begin());
                for (int u = 0; u < p.num_updates() && !register_tile; u++) {
                    const Definition &def = p.update_definition(u);
                    const Variable *v =
                        at < def.args.size() ? def.args[at].as<Variable>() : nullptr;
                    if (v && v->name == vx) p.update(u).vectorize(V(vx), lanes);
                }
            }
        }

        for (const Shape::Pack &pk : s.packs) {
            const std::string knob = pk.knob();
            if (!c.has(knob) || c.s(knob) == "none") continue;
            const std::string &where = c.s(knob);
            Func consumer = f;
            for (const Func &st : inst.stages)
                if (st.name() == pk.consumer) consumer = st;
            // The output's reduction moved into its intermediate of sums, with its reads.
            for (const Func &sums : sum_funcs)
                if (pk.consumer == s.out && images_read(sums).count(pk.image)) consumer = sums;
            for (ImageParam &in : inst.inputs) {
                if (in.name() != pk.image) continue;
                Func w = in.in(consumer);
                w.compute_at(f, V(loop_at(where)));
                // The copy's rows are its dimension 0, contiguous in the input and the buffer.
                if (c.i("vector") > 1)
                    w.vectorize(_0, int(c.i("vector")), TailStrategy::GuardWithIf);
            }
        }
    });
    return space;
}

} // namespace kiln::autotune
