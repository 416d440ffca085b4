#include "schedule/BoundsInference.h"

#include <algorithm>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Simplify.h"
#include "schedule/BoxesTouched.h"

namespace kiln {

namespace {

Expr var(const std::string &name) {
    return Variable::make(Int(32), name);
}

constexpr int error_access_out_of_bounds = -6; // kiln_error_access_out_of_bounds

const FuncSchedule::Bound *find_bound(const FuncSchedule &fs, const std::string &v) {
    for (const FuncSchedule::Bound &b : fs.bounds) {
        if (b.var == v) return &b;
    }
    return nullptr;
}

/// Wraps s in lets defining the region of f, innermost last.
Stmt define_region(const Stmt &s, const FunctionContents &f, const std::vector<Expr> &mins,
                   const std::vector<Expr> &maxs) {
    Stmt body = s;
    for (int d = int(f.args.size()) - 1; d >= 0; d--) {
        const std::string min_name = region_min_name(f.name, f.args[d]);
        Expr mn = simplify(mins[d]), mx = simplify(maxs[d]);
        // A max a constant past a min that is not a constant (a point, or a tile whose ends
        // share their clamps) is written from the min's name, so the extent simplifies to that
        // constant: a Func computed per thread then has constant loops (its one-point loops
        // vanish) and reads its array at simpler indices.
        if (std::optional<int64_t> k = as_const_int(simplify(mx - mn)); k && !is_const(mn))
            mx = simplify(var(min_name) + Expr(int(*k)));
        body = LetStmt::make(region_max_name(f.name, f.args[d]), mx, body);
        body = LetStmt::make(min_name, mn, body);
    }
    return body;
}

/// The region f must compute, given the box its consumers read: widened by the sites its update
/// definitions write and read, with pure variables over the consumers' region.
Box widen_by_updates(const PipelineEnv &env, const FunctionContents &f, const Box &needed) {
    Box box = needed;
    for (const Definition &u : f.updates) {
        Scope scope;
        for (size_t d = 0; d < f.args.size(); d++)
            scope[f.args[d]] = needed[d];
        if (u.rdom) {
            for (const auto &rv : u.rdom->vars) {
                Expr mn = inline_calls(rv.min, env), ext = inline_calls(rv.extent, env);
                scope[rv.name] = Interval(mn, simplify(mn + ext - 1));
            }
        }
        std::vector<Expr> args;
        for (const Expr &a : u.args)
            args.push_back(inline_calls(a, env));
        Box site;
        for (const Expr &a : args)
            site.push_back(bounds_of_expr(a, scope));
        std::vector<Expr> read_exprs = u.values;
        if (u.predicate.defined()) read_exprs.push_back(u.predicate);
        for (const Expr &v : read_exprs) {
            Box reads = boxes_touched(inline_calls(v, env), f.name, scope);
            for (size_t d = 0; d < reads.size(); d++) {
                site[d] = Interval::make_union(site[d], reads[d]);
            }
        }
        for (size_t d = 0; d < box.size(); d++)
            box[d] = Interval::make_union(box[d], site[d]);
    }
    return box;
}

class DefineRegions : public IRMutator {
public:
    DefineRegions(const PipelineEnv &env, const FunctionContents &f) : env(env), f(f) {}
    bool found = false;

protected:
    using IRMutator::visit;
    Stmt visit(const Block *op) override {
        const ProducerConsumer *p = op->first.as<ProducerConsumer>();
        const ProducerConsumer *c = op->rest.as<ProducerConsumer>();
        if (!p || !c || p->name != f.name || !p->is_producer || c->name != f.name) {
            return IRMutator::visit(op);
        }
        found = true;
        Box needed = boxes_touched(c->body, f.name, true, false);
        internal_assert(needed.size() == f.args.size(), "no use of '", f.name,
                        "' in its consume node");
        Box box = widen_by_updates(env, f, needed);
        const FuncSchedule &fs = env.schedules.at(f.name);
        std::vector<Expr> mins, maxs;
        std::vector<Stmt> checks;
        for (size_t d = 0; d < f.args.size(); d++) {
            if (const FuncSchedule::Bound *b = find_bound(fs, f.args[d])) {
                // The bound is the region f computes; what its consumers (and its own updates)
                // touch must lie inside it, or they would read values never computed.
                Expr bmin = Expr(int(b->min)), bmax = Expr(int(b->min + b->extent - 1));
                mins.push_back(bmin);
                maxs.push_back(bmax);
                if (!box[d].is_bounded()) continue; // the bound is what makes it finite
                checks.push_back(bound_check(f, d, box[d], bmin, bmax));
                continue;
            }
            if (!box[d].is_bounded()) {
                user_error("cannot infer the region of '", f.name, "' needed in dimension '",
                           f.args[d], "': its uses give ", box[d],
                           "; clamp the coordinates where it is called, or give it a bound with ",
                           f.name, ".bound(", f.args[d], ", min, extent)");
            }
            mins.push_back(box[d].min);
            maxs.push_back(box[d].max);
        }
        Stmt body = Stmt(op);
        for (auto it = checks.rbegin(); it != checks.rend(); ++it) {
            if (it->defined()) body = Block::make(*it, body);
        }
        return define_region(body, f, mins, maxs);
    }

private:
    /// An assertion that the region `need` of dimension d of f lies inside its bound; undefined
    /// when that is provably so.
    static Stmt bound_check(const FunctionContents &f, size_t d, const Interval &need,
                            const Expr &bmin, const Expr &bmax) {
        Expr nmin = simplify(need.min), nmax = simplify(need.max);
        Expr ok = simplify(nmin >= bmin && nmax <= bmax);
        if (is_const_true(ok)) return Stmt();
        auto wide = [](const Expr &e) { return cast(Int(64), e); };
        std::string msg = "func '" + f.name + "' dimension '" + f.args[d] +
                          "': its uses need [%lld, %lld] but its bound() covers [%lld, %lld]; "
                          "widen the bound or remove it";
        return AssertStmt::make(ok, msg, {wide(nmin), wide(nmax), wide(bmin), wide(bmax)},
                                error_access_out_of_bounds);
    }

    const PipelineEnv &env;
    const FunctionContents &f;
};

class BoundRealizations : public IRMutator {
protected:
    using IRMutator::visit;
    Stmt visit(const Realize *op) override {
        Stmt body = mutate(op->body);
        Box box = boxes_touched(body, op->name, true, true);
        std::vector<Range> bounds;
        for (size_t d = 0; d < box.size(); d++) {
            if (!box[d].is_bounded()) {
                user_error("cannot infer how much of '", op->name, "' to allocate in dimension ", d,
                           ": it touches ", box[d], "; clamp the coordinates where it is used");
            }
            Expr mn = simplify(box[d].min);
            bounds.emplace_back(mn, simplify(box[d].max - mn + 1));
        }
        return Realize::make(op->name, op->types, op->memory_type, bounds, op->condition, body);
    }
};

} // namespace

Stmt bounds_inference(const Stmt &s, const PipelineEnv &env) {
    Stmt result = s;
    for (auto it = env.order.rbegin(); it != env.order.rend(); ++it) {
        if (std::find(env.outputs.begin(), env.outputs.end(), *it) != env.outputs.end()) continue;
        DefineRegions pass(env, *env.funcs.at(*it));
        result = pass.mutate(result);
    }
    result = BoundRealizations().mutate(result);
    // Outputs compute the region of their buffer (or their declared bound).
    for (auto it = env.outputs.rbegin(); it != env.outputs.rend(); ++it) {
        const FunctionContents &f = *env.funcs.at(*it);
        const FuncSchedule &fs = env.schedules.at(f.name);
        std::string buf = buffer_name(f, 0);
        std::vector<Expr> mins, maxs;
        for (size_t d = 0; d < f.args.size(); d++) {
            if (const FuncSchedule::Bound *b = find_bound(fs, f.args[d])) {
                mins.push_back(Expr(int(b->min)));
                maxs.push_back(Expr(int(b->min + b->extent - 1)));
                continue;
            }
            Expr mn = var(buffer_min_name(buf, int(d)));
            mins.push_back(mn);
            maxs.push_back(mn + var(buffer_extent_name(buf, int(d))) - 1);
        }
        result = define_region(result, f, mins, maxs);
    }
    return result;
}

} // namespace kiln
