#include "schedule/ScheduleFunctions.h"

#include <algorithm>
#include <functional>
#include <set>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Var.h"
#include "schedule/ApplyWrappers.h"

namespace kiln {

std::string region_min_name(const std::string &func, const std::string &var) {
    return func + "." + var + ".min";
}
std::string region_max_name(const std::string &func, const std::string &var) {
    return func + "." + var + ".max";
}

namespace {

Expr var(const std::string &name) {
    return Variable::make(Int(32), name);
}
std::string loop_min(const std::string &v) {
    return v + ".loop_min";
}
std::string loop_max(const std::string &v) {
    return v + ".loop_max";
}
std::string loop_extent(const std::string &v) {
    return v + ".loop_extent";
}

class InlineCalls : public IRMutator {
public:
    explicit InlineCalls(const PipelineEnv &env) : env(env) {}

protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        Expr mutated = IRMutator::visit(op);
        const Call *c = mutated.as<Call>();
        if (!c || c->call_type != Call::Func) return mutated;
        auto s = env.schedules.find(c->name);
        if (s == env.schedules.end() || !s->second.compute_level.is_inline) return mutated;
        const FunctionContents &g = *env.funcs.at(c->name);
        // Rename g's pure variables to fresh names bound by lets, so call arguments that mention
        // variables of the same name are not captured.
        Expr body = g.init.values[c->value_index];
        std::vector<std::pair<std::string, Expr>> lets;
        for (size_t i = 0; i < g.args.size(); i++) {
            // Deterministic names keep the lowered code, and so the JIT cache key, stable.
            std::string fresh = g.name + "." + g.args[i] + "$inline" + std::to_string(next++);
            body = substitute(g.args[i], var(fresh), body);
            lets.emplace_back(fresh, c->args[i]);
        }
        body = mutate(body);
        for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
            body = Let::make(it->first, it->second, body);
        }
        return body;
    }

private:
    const PipelineEnv &env;
    int next = 0;
};

/// Renames the original variables of a definition to the stage's loop variables.
class RenameVars : public IRMutator {
public:
    explicit RenameVars(const std::map<std::string, std::string> &names) : names(names) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override {
        if (op->param) return Expr(op);
        auto it = names.find(op->name);
        if (it == names.end()) return Expr(op);
        return var(it->second);
    }

private:
    const std::map<std::string, std::string> &names;
};

// Whether e calls f anywhere but at the point (f's pure variables, in order) that an update
// whose arguments are those variables writes.
bool calls_elsewhere(const Expr &e, const FunctionContents &f) {
    class Find : public IRVisitor {
    public:
        const FunctionContents &f;
        bool elsewhere = false;
        explicit Find(const FunctionContents &f) : f(f) {}

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->call_type == Call::Func && op->name == f.name) {
                for (size_t i = 0; i < op->args.size(); i++) {
                    const auto *v = op->args[i].as<Variable>();
                    elsewhere |= !v || i >= f.args.size() || v->name != f.args[i];
                }
            }
            IRVisitor::visit(op);
        }
    } find(f);
    find.include(e);
    return find.elsewhere;
}

// Whether f's zero initial value folds into its first update, tensorized (schedule/Tensorize.h):
// the update then reads f(x) as select(first visit of x, 0, f(x)) and the pure stage runs only
// when the reduction domain is empty, so the matrix unit starts its tiles at zero instead of a
// sweep storing zeros over the whole of f and the tiles loading them back (Intel AMX's
// tilezero; TVM's tensor intrinsics have a reset part for the same reason). It holds when the
// update writes every point of f's region (its arguments are the pure variables: both stages
// run over f's region) once per iteration of its RDom (no `where`), reads f only at that point,
// and its RVar loops run in order (serial): the first visit of a point is the iteration where
// every RVar loop is at its first value.
bool folds_zero_init(const PipelineEnv &env, const FunctionContents &f) {
    if (f.updates.empty() || f.init.values.size() != 1) return false;
    if (!is_positive_zero(f.init.values[0])) return false;
    const Definition &u = f.updates[0];
    if (u.predicate.defined() || !u.rdom || u.rdom->vars.empty() || u.values.size() != 1 ||
        u.args.size() != f.args.size()) {
        return false;
    }
    for (size_t i = 0; i < u.args.size(); i++) {
        const auto *v = u.args[i].as<Variable>();
        if (!v || v->name != f.args[i]) return false;
    }
    if (calls_elsewhere(u.values[0], f)) return false;
    const StageSchedule &ss = env.schedules.at(f.name).stages[1];
    bool tensorized = false;
    for (const LoopDim &d : ss.dims) {
        tensorized |= d.for_type == ForType::Tensorized;
        if (d.is_rvar && d.for_type != ForType::Serial && d.for_type != ForType::Unrolled &&
            d.for_type != ForType::Tensorized) {
            return false;
        }
    }
    return tensorized && !ss.gpu_single_thread;
}

// The update's reads of f at the point it writes, as select(first, 0, f(point)): f's value there
// before the first visit is the folded initial value (folds_zero_init).
Expr read_initial_value_first(const Expr &value, const FunctionContents &f, const Expr &first) {
    class Fold : public IRMutator {
    public:
        const FunctionContents &f;
        const Expr &first;
        Fold(const FunctionContents &f, const Expr &first) : f(f), first(first) {}

    protected:
        using IRMutator::visit;
        Expr visit(const Call *op) override {
            if (op->call_type != Call::Func || op->name != f.name) return IRMutator::visit(op);
            return select(first, make_zero(op->type), Expr(op));
        }
    } fold(f, first);
    return fold.mutate(value);
}

Stmt build_stage(const PipelineEnv &env, const FunctionContents &f, int stage,
                 bool fold_zero_init = false) {
    const Definition &def = stage == 0 ? f.init : f.updates[stage - 1];
    const StageSchedule &ss = env.schedules.at(f.name).stages[stage];
    RenameVars rename(ss.original_vars);
    std::vector<Expr> args, values;
    for (const Expr &a : def.args)
        args.push_back(inline_calls(rename.mutate(a), env));
    for (const Expr &v : def.values)
        values.push_back(inline_calls(rename.mutate(v), env));
    if (fold_zero_init) {
        // The first visit of a point: every RVar loop at its first value.
        Expr first;
        for (const LoopDim &d : ss.dims) {
            if (!d.is_rvar) continue;
            Expr at_min = var(d.var) == var(loop_min(d.var));
            first = first.defined() ? (at_min && first) : at_min;
        }
        for (Expr &v : values)
            v = read_initial_value_first(v, f, first);
    }
    Stmt body = Provide::make(f.name, values, args);
    // RDom::where: the update stores only where its predicate holds. trim_no_ops (TrimNoOps.h)
    // then shrinks the loops whose bounds the predicate implies.
    if (def.predicate.defined()) {
        body = IfThenElse::make(inline_calls(rename.mutate(def.predicate), env), body);
    }

    // How far a fused variable may run outside its loop: a RoundUp split of it (or of a piece
    // of it) runs past the end and a ShiftInwards split of a loop shorter than its factor starts
    // before the beginning, by less than its factor in units of the split variable, which is
    // itself a multiple of the factors of the splits inside it, GuardWithIf ones included (a
    // GuardWithIf split guards only the upper end). So with any RoundUp or ShiftInwards split
    // in the fused variable's chain, the product of the chain's factors bounds it. (The fuzzer
    // found fuse(x, y) then vectorize(16, GuardWithIf) then unroll(2, ShiftInwards) writing 15
    // rows before the region when only the ShiftInwards factor counted.)
    auto fuse_slack = [&](size_t f) {
        std::set<std::string> chain{ss.splits[f].old_var};
        int64_t product = 1;
        bool shifts = false;
        for (size_t j = f + 1; j < ss.splits.size(); j++) {
            const LoopSplit &s = ss.splits[j];
            if (s.kind == LoopSplit::Fuse) {
                if (chain.count(s.inner) || chain.count(s.outer)) chain.insert(s.old_var);
                continue;
            }
            if (!chain.count(s.old_var)) continue;
            chain.insert(s.inner);
            chain.insert(s.outer);
            product = std::min<int64_t>(product * s.factor, 1 << 20);
            shifts |= s.tail != TailStrategy::GuardWithIf;
        }
        return shifts ? product - 1 : 0;
    };

    // Original variables as functions of the loop variables; the first split is innermost.
    for (size_t f = 0; f < ss.splits.size(); f++) {
        const LoopSplit &s = ss.splits[f];
        if (s.kind == LoopSplit::Fuse) {
            const int64_t slack = fuse_slack(f);
            // The pieces of a fused loop, each clamped to its own loop range (the outer one
            // widened by the slack): no-ops, since fused % extent lies in [0, extent) and
            // fused / extent moves past the outer loop only as far as the fused variable moves
            // past its own. They let bounds inference see that each piece stays inside its loop,
            // which the interval of `fused / extent` over symbolic extents does not.
            // strip_fuse_clamps() removes them once the bounds are known.
            Expr inner_extent = var(loop_extent(s.inner));
            Expr inner = var(s.old_var) % inner_extent + var(loop_min(s.inner));
            Expr outer = var(s.old_var) / inner_extent + var(loop_min(s.outer));
            Expr widen = Expr(int(slack));
            body = LetStmt::make(s.inner, min(inner, var(loop_max(s.inner))), body);
            // The upper clamp outermost: for an empty region (min > max) its bounds then stay
            // at most the region's max.
            body = LetStmt::make(
                s.outer,
                min(max(outer, var(loop_min(s.outer)) - widen), var(loop_max(s.outer)) + widen),
                body);
            continue;
        }
        Expr factor = Expr(int(s.factor));
        Expr base = var(s.outer) * factor;
        if (s.tail == TailStrategy::ShiftInwards) {
            base = min(base, var(loop_extent(s.old_var)) - factor);
        }
        if (s.tail == TailStrategy::GuardWithIf) {
            body = IfThenElse::make(likely(var(s.old_var) <= var(loop_max(s.old_var))), body);
        }
        body = LetStmt::make(s.old_var, base + var(s.inner) + var(loop_min(s.old_var)), body);
    }

    for (const LoopDim &d : ss.dims) {
        body = For::make(d.var, var(loop_min(d.var)), var(loop_extent(d.var)), d.for_type, body);
    }
    if (ss.gpu_single_thread) {
        // One block of one thread around the whole stage (Halide's gpu_single_thread).
        body = For::make(stage_var_name(f.name, stage, "__thread_id_x"), 0, 1, ForType::GPUThread,
                         body);
        body =
            For::make(stage_var_name(f.name, stage, "__block_id_x"), 0, 1, ForType::GPUBlock, body);
    }

    // Loop bounds, outermost first: the original dimensions, then what each split derives.
    std::vector<std::pair<std::string, Expr>> lets;
    auto define = [&](const std::string &v, const Expr &mn, const Expr &extent) {
        lets.emplace_back(loop_min(v), mn);
        lets.emplace_back(loop_extent(v), extent);
        lets.emplace_back(loop_max(v), var(loop_min(v)) + var(loop_extent(v)) - 1);
    };
    if (def.rdom) {
        for (const auto &rv : def.rdom->vars) {
            auto it = ss.original_vars.find(rv.name);
            if (it == ss.original_vars.end()) continue;
            define(it->second, inline_calls(rv.min, env), inline_calls(rv.extent, env));
        }
    }
    for (const std::string &a : f.args) {
        auto it = ss.original_vars.find(a);
        if (it == ss.original_vars.end()) continue;
        Expr mn = var(region_min_name(f.name, a)), mx = var(region_max_name(f.name, a));
        define(it->second, mn, mx - mn + 1);
    }
    for (const LoopSplit &s : ss.splits) {
        if (s.kind == LoopSplit::Fuse) {
            // An empty region (a tile past the end) can have negative extents in both pieces,
            // whose product would be positive: clamp each at zero so the fused loop is empty too.
            define(s.old_var, 0,
                   max(var(loop_extent(s.inner)), 0) * max(var(loop_extent(s.outer)), 0));
            continue;
        }
        Expr factor = Expr(int(s.factor));
        define(s.inner, 0, factor);
        define(s.outer, 0, (var(loop_extent(s.old_var)) + factor - 1) / factor);
    }
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
        body = LetStmt::make(it->first, it->second, body);
    }
    return body;
}

Stmt build_produce(const PipelineEnv &env, const FunctionContents &f) {
    std::vector<Stmt> stages;
    bool fold = folds_zero_init(env, f);
    for (int s = 0; s <= int(f.updates.size()); s++)
        stages.push_back(build_stage(env, f, s, fold && s == 1));
    if (fold) {
        // The initial value is still f's where the update visits no point: an empty RDom.
        Expr empty;
        for (const auto &rv : f.updates[0].rdom->vars) {
            Expr e = inline_calls(rv.extent, env) <= 0;
            empty = empty.defined() ? (empty || e) : e;
        }
        stages[0] = IfThenElse::make(empty, stages[0]);
    }
    return ProducerConsumer::make(f.name, true, Block::make(stages));
}

class CountCalls : public IRVisitor {
public:
    explicit CountCalls(const std::string &name) : name(name) {}
    int count = 0;

private:
    const std::string &name;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func && op->name == name) count++;
    }
};

int count_calls(const Stmt &s, const std::string &name) {
    CountCalls c(name);
    c.include(s);
    return c.count;
}

/// The For loops with one of the given names, each with the number of calls to `func` inside.
class FindLoops : public IRVisitor {
public:
    FindLoops(std::set<std::string> names, const std::string &func)
        : names(std::move(names)), func(func) {}
    std::vector<std::pair<std::string, int>> found;

private:
    std::set<std::string> names;
    const std::string &func;
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (names.count(op->name)) found.emplace_back(op->name, count_calls(op->body, func));
        IRVisitor::visit(op);
    }
};

class ContainsLoop : public IRVisitor {
public:
    explicit ContainsLoop(const std::string &name) : name(name) {}
    bool found = false;

private:
    const std::string &name;
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (op->name == name) found = true;
        IRVisitor::visit(op);
    }
};

bool contains_loop(const Stmt &s, const std::string &name) {
    ContainsLoop c(name);
    c.include(s);
    return c.found;
}

/// Applies f to the body of the loop with the given name.
class AtLoop : public IRMutator {
public:
    AtLoop(const std::string &name, std::function<Stmt(const Stmt &)> f)
        : name(name), f(std::move(f)) {}

protected:
    using IRMutator::visit;
    Stmt visit(const For *op) override {
        if (op->name != name) return IRMutator::visit(op);
        return For::make(op->name, op->min, op->extent, op->for_type, f(op->body));
    }

private:
    const std::string &name;
    std::function<Stmt(const Stmt &)> f;
};

/// The IR loop of `level` in the stage of the consumer that uses `producer`.
std::string find_level_loop(const PipelineEnv &env, const Stmt &s, const std::string &producer,
                            const LoopLevel &level, const char *primitive) {
    auto cs = env.schedules.find(level.func);
    if (cs == env.schedules.end()) {
        user_error(primitive, ": '", producer, "' is scheduled at a loop of '", level.func,
                   "', which is not a Func of this pipeline");
    }
    if (cs->second.compute_level.is_inline) {
        user_error(primitive, ": '", producer, "' is scheduled at loop '", level.var, "' of '",
                   level.func, "', but '", level.func, "' is inlined and has no loops; schedule '",
                   level.func, "' with compute_root() or compute_at() first");
    }
    std::set<std::string> names;
    std::string legal;
    for (const StageSchedule &st : cs->second.stages) {
        for (const LoopDim &d : st.dims) {
            if (d.name == level.var) names.insert(d.var);
        }
        if (legal.empty()) legal = loop_names(st);
    }
    if (names.empty()) {
        user_error(primitive, ": '", level.func, "' has no loop '", level.var, "' to compute '",
                   producer, "' at; its loops are ", legal,
                   " (innermost first), or use compute_root()");
    }
    FindLoops finder(names, producer);
    finder.include(s);
    std::vector<std::string> using_loops;
    for (auto &[name, calls] : finder.found) {
        if (calls > 0) using_loops.push_back(name);
    }
    if (using_loops.empty()) {
        user_error(primitive, ": loop '", level.var, "' of '", level.func,
                   "' does not enclose any use of '", producer,
                   "'; compute it at a loop of a Func that calls it, or use compute_root()");
    }
    if (using_loops.size() > 1) {
        user_error(primitive, ": '", producer, "' is used inside loop '", level.var,
                   "' of several stages of '", level.func,
                   "'; compute it at root or at a loop that encloses all of them");
    }
    return using_loops[0];
}

Stmt inject(const PipelineEnv &env, const Stmt &s, const FunctionContents &f) {
    const FuncSchedule &fs = env.schedules.at(f.name);
    Stmt produce = build_produce(env, f);
    int total = count_calls(s, f.name);
    if (total == 0) return s; // unused after inlining: nothing to compute

    std::vector<Type> types = f.output_types;
    std::vector<Range> no_bounds; // filled in by bounds inference
    Expr compute_here;
    std::string compute_loop;
    if (!fs.compute_level.is_root()) {
        compute_loop = find_level_loop(env, s, f.name, fs.compute_level, "compute_at");
        FindLoops finder({compute_loop}, f.name);
        finder.include(s);
        int inside = finder.found.empty() ? 0 : finder.found[0].second;
        if (inside != total) {
            user_error("compute_at: '", f.name, "' is computed inside loop '", fs.compute_level.var,
                       "' of '", fs.compute_level.func,
                       "', but it is also used outside that loop; compute it at root or at a "
                       "loop that encloses every use");
        }
    }
    auto produce_consume = [&](const Stmt &body) {
        return Block::make(produce, ProducerConsumer::make(f.name, false, body));
    };
    auto realize = [&](const Stmt &body) {
        return Realize::make(f.name, types, fs.memory_type, no_bounds, Expr(), body);
    };

    Stmt result =
        compute_loop.empty() ? produce_consume(s) : AtLoop(compute_loop, produce_consume).mutate(s);
    if (fs.store_level.is_root()) return realize(result);
    std::string store_loop = find_level_loop(env, s, f.name, fs.store_level, "store_at");
    if (store_loop != compute_loop) {
        bool encloses = false;
        FindLoops finder({store_loop}, f.name);
        finder.include(s);
        AtLoop check(store_loop, [&](const Stmt &body) {
            encloses = compute_loop.empty() ? false : contains_loop(body, compute_loop);
            return body;
        });
        check.mutate(s);
        if (!encloses) {
            user_error("store_at: loop '", fs.store_level.var, "' of '", fs.store_level.func,
                       "' must enclose the loop '", fs.compute_level.var, "' of '",
                       fs.compute_level.func, "' where '", f.name,
                       "' is computed; store it at that loop or further out");
        }
    }
    return AtLoop(store_loop, realize).mutate(result);
}

/// Removes the clamps build_stage() puts on the pieces of fused loops.
class StripFuseClamps : public IRMutator {
public:
    explicit StripFuseClamps(std::set<std::string> pieces) : pieces(std::move(pieces)) {}

protected:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        Stmt body = mutate(op->body);
        Expr value = op->value;
        if (pieces.count(op->name)) {
            // min(max(piece, lo), hi) or min(piece, hi), as build_stage() wrote them; the piece
            // itself is a sum, never a min or max.
            if (const Min *m = value.as<Min>()) value = m->a;
            if (const Max *m = value.as<Max>()) value = m->a;
        }
        if (value.same_as(op->value) && body.same_as(op->body)) return Stmt(op);
        return LetStmt::make(op->name, value, body);
    }

private:
    std::set<std::string> pieces;
};

} // namespace

Stmt strip_fuse_clamps(const Stmt &s, const PipelineEnv &env) {
    std::set<std::string> pieces;
    for (const auto &[name, fs] : env.schedules) {
        for (const StageSchedule &st : fs.stages) {
            for (const LoopSplit &sp : st.splits) {
                if (sp.kind != LoopSplit::Fuse) continue;
                pieces.insert(sp.inner);
                pieces.insert(sp.outer);
            }
        }
    }
    if (pieces.empty()) return s;
    return StripFuseClamps(std::move(pieces)).mutate(s);
}

Expr inline_calls(const Expr &e, const PipelineEnv &env) {
    return InlineCalls(env).mutate(e);
}

PipelineEnv make_pipeline_env(const std::vector<FunctionPtr> &outputs) {
    PipelineEnv env;
    // The Funcs as lowering sees them: calls redirected to the in() wrappers they read.
    env.funcs = apply_wrappers(outputs);
    for (const FunctionPtr &f : outputs) {
        if (!f->has_pure_definition()) user_error("output Func '", f->name, "' has no definition");
        env.outputs.push_back(f->name);
    }
    for (auto &[name, f] : env.funcs) {
        bool is_output =
            std::find(env.outputs.begin(), env.outputs.end(), name) != env.outputs.end();
        env.schedules[name] = build_func_schedule(*f, is_output);
    }
    // Realization order: producers before consumers, over calls that remain after inlining.
    std::set<std::string> done, on_stack;
    std::function<void(const std::string &)> visit = [&](const std::string &name) {
        if (done.count(name)) return;
        on_stack.insert(name);
        for (const FunctionPtr &g : direct_callees(env.funcs.at(name))) {
            if (g->name != name && !on_stack.count(g->name)) visit(g->name);
        }
        on_stack.erase(name);
        done.insert(name);
        if (!env.schedules.at(name).compute_level.is_inline) env.order.push_back(name);
    };
    for (const std::string &o : env.outputs)
        visit(o);
    return env;
}

Stmt schedule_functions(const PipelineEnv &env) {
    // The outputs in realization order (producers first), not in the order the pipeline lists
    // them: an output may read another.
    std::vector<Stmt> outputs;
    for (const std::string &name : env.order) {
        if (std::find(env.outputs.begin(), env.outputs.end(), name) == env.outputs.end()) continue;
        outputs.push_back(build_produce(env, *env.funcs.at(name)));
    }
    Stmt s = Block::make(outputs);
    for (auto it = env.order.rbegin(); it != env.order.rend(); ++it) {
        if (std::find(env.outputs.begin(), env.outputs.end(), *it) != env.outputs.end()) continue;
        s = inject(env, s, *env.funcs.at(*it));
    }
    return s;
}

} // namespace kiln
