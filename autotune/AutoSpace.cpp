#include "autotune/AutoSpace.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "codegen/Target.h"
#include "lang/IROperator.h"

namespace kiln::autotune {

namespace {

/// What the space needs to know about the pipeline, read once from a built instance.
struct Shape {
    std::string out;               ///< output Func name
    std::vector<std::string> dims; ///< its pure variables
    std::vector<int> extents;
    struct Update {
        int index = 0;
        bool pure_x = false; ///< the update's first site argument is the pure var x
        std::string rvar;    ///< its first RVar, "" when none
        int64_t rextent = 0; ///< that RVar's constant extent (0 when unknown)
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
    };
    std::vector<Producer> producers;
    int lanes = 4; ///< natural vector lanes of the output type
};

Shape read_shape(const apps::OperatorInstance &inst, const Target &target) {
    Shape s;
    const Func &f = inst.output;
    s.out = f.name();
    s.dims = f.args();
    s.extents = inst.output_extents;
    int bits = std::max(8, int(f.output_types().front().bits));
    s.lanes = std::max(1, target.vector_bits / bits);
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
        }
        s.updates.push_back(up);
    }
    for (const Func &p : inst.stages) {
        if (p.name() == s.out) continue;
        Shape::Producer prod{p.name(),
                             p.num_updates() > 0,
                             p.args().empty() ? "" : p.args()[0],
                             p.dimensions(),
                             {},
                             p.args(),
                             {}};
        for (int u = 0; u < p.num_updates(); u++) {
            const Definition &d = p.update_definition(u);
            bool in_place = d.rdom && !d.rdom->vars.empty() && d.args.size() == p.args().size();
            for (size_t a = 0; in_place && a < d.args.size(); a++) {
                const Variable *v = d.args[a].as<Variable>();
                in_place = v && v->name == p.args()[a];
            }
            if (!in_place) continue;
            std::vector<std::string> rvars;
            for (const auto &r : d.rdom->vars)
                rvars.push_back(r.name);
            prod.reductions.emplace_back(u, rvars);
        }
        s.producers.push_back(std::move(prod));
    }
    for (const Func &c : inst.stages) {
        for (const FunctionPtr &callee : direct_callees(c.function())) {
            for (Shape::Producer &p : s.producers) {
                if (p.name == callee->name && c.name() != p.name) p.consumers.push_back(c.name());
            }
        }
    }
    return s;
}

} // namespace

SearchSpace auto_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                       const Target &target) {
    Shape s = read_shape(op.make(shape), target);
    SearchSpace space("auto:" + op.name);
    const int d = int(s.dims.size());
    const int64_t ext_x = d > 0 ? s.extents[0] : 1, ext_y = d > 1 ? s.extents[1] : 1;

    if (d > 0) space.add_powers_of_two("tile_x", 1, std::min<int64_t>(256, floor_pow2(ext_x)));
    if (d > 1) space.add_powers_of_two("tile_y", 1, std::min<int64_t>(64, floor_pow2(ext_y)));
    if (d > 0) space.add_integers("outer_x", {1, 2, 4, 8});
    std::vector<int64_t> widths{1};
    for (int w = std::max(2, s.lanes / 4); w <= s.lanes * 2; w *= 2)
        widths.push_back(w);
    space.add_integers("vector", widths);
    if (d > 1) space.add_bool("unroll_y");
    space.add_bool("parallel");
    for (const Shape::Update &u : s.updates) {
        std::string p = "update" + std::to_string(u.index) + "_";
        if (u.pure_x) space.add_bool(p + "vectorize");
        if (!u.rvar.empty() && u.rextent >= 8) {
            space.add_powers_of_two(p + "split_r", 1, std::min<int64_t>(64, floor_pow2(u.rextent)));
            // rfactor pays off for a large reduction into a small output.
            int64_t out_points = 1;
            for (int e : s.extents)
                out_points *= e;
            if (u.rextent >= 256 && out_points <= u.rextent) {
                // Stage::rfactor of the split's outer part needs the factor to divide the
                // reduction's extent.
                space.add_bool(p + "rfactor");
                int64_t extent = u.rextent;
                space.add_constraint(
                    p + "split_r divides the reduction extent when " + p + "rfactor",
                    [p, extent](const ConfigView &c) {
                        return !c.b(p + "rfactor") || extent % c.i(p + "split_r") == 0;
                    });
            }
        }
    }
    for (const Shape::Producer &p : s.producers) {
        std::vector<std::string> where;
        if (!p.has_updates) where.push_back("inline");
        where.push_back("root");
        if (d > 1) where.push_back("row");
        if (d > 0) {
            where.push_back("outer_tile");
            where.push_back("tile");
        }
        space.add_choice(p.name + "_at", where);
        if (p.dims > 0) space.add_bool(p.name + "_vectorize");
        // A register tile (the space-reduction-space nest of a matmul micro-kernel): a reduction
        // computed per tile of the output with its pure loops inside its reduction loops, the
        // innermost vectorized and all of them unrolled, so the tile's sums stay in registers
        // while the reduction streams through them.
        if (!p.reductions.empty() && d > 1) {
            std::string key = p.name + "_register_tile";
            space.add_bool(key);
            std::string at = p.name + "_at";
            space.add_constraint(
                key + " needs " + at + " tile (a region of constant size)",
                [key, at](const ConfigView &c) { return !c.b(key) || c.s(at) == "tile"; });
            space.add_constraint(key + " needs tile_x * tile_y / vector <= 32 (the registers)",
                                 [key](const ConfigView &c) {
                                     return !c.b(key) ||
                                            c.i("tile_x") * c.i("tile_y") / c.i("vector") <= 32;
                                 });
        }
    }

    if (d > 0) {
        space.add_constraint("vector <= tile_x and tile_x % vector == 0", [](const ConfigView &c) {
            return c.i("vector") <= c.i("tile_x") && c.i("tile_x") % c.i("vector") == 0;
        });
        space.add_constraint(
            "tile_x * outer_x <= output extent of x", [ext_x](const ConfigView &c) {
                return c.i("tile_x") * c.i("outer_x") <= std::max<int64_t>(ext_x, c.i("tile_x"));
            });
    }
    if (d > 1) {
        space.add_constraint("tile_x * tile_y <= 4096", [](const ConfigView &c) {
            return c.i("tile_x") * c.i("tile_y") <= 4096;
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
    auto rank = [](const std::string &where) {
        return where == "root"         ? 0
               : where == "row"        ? 1
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
    for (const Shape::Producer &p : s.producers) {
        std::string name = p.name;
        space.add_constraint(name + "_at outer_tile needs outer_x > 1",
                             [name](const ConfigView &c) {
                                 return c.s(name + "_at") != "outer_tile" || c.i("outer_x") > 1;
                             });
        if (p.dims > 0)
            space.add_constraint(name + "_vectorize needs " + name + " computed, not inlined",
                                 [name](const ConfigView &c) {
                                     return !c.b(name + "_vectorize") ||
                                            c.s(name + "_at") != "inline";
                                 });
    }

    space.set_apply([s](apps::OperatorInstance &inst, const ConfigView &c) {
        Func f = inst.output;
        const int d = int(s.dims.size());
        auto V = [](const std::string &n) { return VarOrRVar(n, false); };
        std::string x = d > 0 ? s.dims[0] : "", y = d > 1 ? s.dims[1] : "";
        std::string xo = x + "_o", xi = x + "_i", xm = x + "_m", yo = y + "_o", yi = y + "_i";
        std::string tile_loop, outer_tile_loop, row_loop, outermost;
        if (d > 0) {
            int64_t tx = c.i("tile_x"), ox = c.i("outer_x");
            f.split(V(x), V(xo), V(xi), int(tx));
            if (ox > 1) {
                f.split(V(xo), V(xo), V(xm), int(ox));
                outer_tile_loop = xo;
                tile_loop = xm;
            } else {
                tile_loop = xo;
            }
            std::vector<VarOrRVar> order{V(xi)};
            if (d > 1) {
                f.split(V(y), V(yo), V(yi), int(c.i("tile_y")));
                order.push_back(V(yi));
                row_loop = yo;
            }
            if (ox > 1) order.push_back(V(xm));
            order.push_back(V(xo));
            if (d > 1) order.push_back(V(yo));
            for (int k = 2; k < d; k++)
                order.push_back(V(s.dims[k]));
            f.reorder(order);
            outermost = order.back().name();
            if (c.i("vector") > 1) f.vectorize(V(xi), int(c.i("vector")));
            if (d > 1 && c.b("unroll_y")) f.unroll(V(yi));
        }
        if (c.b("parallel") && !outermost.empty()) f.parallel(V(outermost));

        for (const Shape::Update &u : s.updates) {
            std::string p = "update" + std::to_string(u.index) + "_";
            Stage st = f.update(u.index);
            if (c.has(p + "vectorize") && c.b(p + "vectorize") && c.i("vector") > 1)
                st.vectorize(V(x), int(c.i("vector")));
            if (c.has(p + "split_r") && c.i(p + "split_r") > 1) {
                VarOrRVar r(u.rvar, true), ro(u.rvar + "_o", true), ri(u.rvar + "_i", true);
                st.split(r, ro, ri, int(c.i(p + "split_r")));
                if (c.has(p + "rfactor") && c.b(p + "rfactor")) {
                    Func inter = st.rfactor(RVar(u.rvar + "_o"), Var("rf_u"), s.out + "_rf");
                    inter.compute_root();
                    inter.update(0).parallel(V("rf_u"));
                }
            }
        }

        for (const Func &pf : inst.stages) {
            if (pf.name() == s.out) continue;
            Func p = pf;
            const std::string &where = c.s(p.name() + "_at");
            if (where == "inline") continue;
            if (where == "root") {
                p.compute_root();
                if (p.dimensions() > 1) p.parallel(V(p.args().back()));
            } else if (where == "row") {
                p.compute_at(f, V(row_loop));
            } else if (where == "outer_tile") {
                p.compute_at(f, V(outer_tile_loop));
            } else {
                p.compute_at(f, V(tile_loop));
            }
            const Shape::Producer *info = nullptr;
            for (const Shape::Producer &sp : s.producers)
                if (sp.name == p.name()) info = &sp;
            const bool register_tile =
                info && c.has(p.name() + "_register_tile") && c.b(p.name() + "_register_tile");
            if (register_tile) {
                const int lanes = int(c.i("vector"));
                const std::vector<std::string> &args = info->args;
                for (size_t a = 1; a < args.size(); a++)
                    p.unroll(V(args[a]));
                for (const auto &[u, rvars] : info->reductions) {
                    Stage st = p.update(u);
                    std::vector<VarOrRVar> order;
                    if (lanes > 1) {
                        // RoundUp: the region is a tile whose x extent is a multiple of vector.
                        st.split(V(args[0]), V(args[0]), V(args[0] + "_v"), lanes,
                                 TailStrategy::RoundUp);
                        order.push_back(V(args[0] + "_v"));
                    }
                    for (const std::string &a : args)
                        order.push_back(V(a));
                    for (const std::string &r : rvars)
                        order.emplace_back(r, true);
                    st.reorder(order);
                    if (lanes > 1) st.vectorize(V(args[0] + "_v"));
                    for (const std::string &a : args)
                        st.unroll(V(a));
                }
            }
            if (p.dimensions() > 0 && c.b(p.name() + "_vectorize")) {
                int lanes = int(std::max<int64_t>(c.i("vector"), 2));
                // GuardWithIf: a producer's region may be narrower than a vector (conv2d's
                // w_packed computed per output channel), where ShiftInwards would read before
                // the input's start.
                p.vectorize(V(p.args()[0]), lanes, TailStrategy::GuardWithIf);
                for (int u = 0; u < p.num_updates() && !register_tile; u++) {
                    const Definition &def = p.update_definition(u);
                    const Variable *v = def.args.empty() ? nullptr : def.args[0].as<Variable>();
                    if (v && v->name == p.args()[0]) p.update(u).vectorize(V(p.args()[0]), lanes);
                }
            }
        }
    });
    return space;
}

} // namespace kiln::autotune
