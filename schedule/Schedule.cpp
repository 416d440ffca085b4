#include "schedule/Schedule.h"

#include <algorithm>
#include <set>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"

namespace kiln {

std::string stage_var_name(const std::string &func, int stage, const std::string &var) {
    return func + ".s" + std::to_string(stage) + "." + var;
}

std::string loop_names(const StageSchedule &s) {
    std::string out;
    for (const LoopDim &d : s.dims)
        out += (out.empty() ? "" : ", ") + d.name;
    return out;
}

namespace {

std::string stage_name(const FunctionContents &f, int stage) {
    return stage == 0 ? f.name : f.name + ".update(" + std::to_string(stage - 1) + ")";
}

/// Whether an update may run its RVar `r` in any order: it writes f at a site that contains r
/// as a whole argument and reads f only at that same site.
class SiteReads : public IRVisitor {
public:
    SiteReads(const std::string &f, const std::vector<Expr> &site) : f(f), site(site) {}
    bool other_site = false;

private:
    const std::string &f;
    const std::vector<Expr> &site;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type != Call::Func || op->name != f) return;
        for (size_t i = 0; i < site.size() && i < op->args.size(); i++) {
            if (!equal(op->args[i], site[i])) other_site = true;
        }
    }
};

bool rvar_is_independent(const FunctionContents &f, const Definition &d, const std::string &r) {
    bool in_site = false;
    for (const Expr &a : d.args) {
        const Variable *v = a.as<Variable>();
        if (v && v->name == r) in_site = true;
    }
    if (!in_site) return false;
    SiteReads reads(f.name, d.args);
    for (const Expr &v : d.values)
        reads.include(v);
    if (d.predicate.defined()) reads.include(d.predicate);
    return !reads.other_site;
}

class StageBuilder {
public:
    StageBuilder(const FunctionContents &f, int stage, bool is_output)
        : f(f), stage(stage), is_output(is_output) {
        const Definition &d = stage == 0 ? f.init : f.updates[stage - 1];
        def = &d;
        // Default order: RVars innermost (first dimension fastest), then the pure variables.
        if (d.rdom) {
            for (const auto &rv : d.rdom->vars)
                add_original(rv.name, true);
        }
        for (size_t i = 0; i < f.args.size(); i++) {
            // Updates loop over the pure variables that appear in their site.
            if (stage > 0 && !site_has_pure_var(f.args[i])) continue;
            add_original(f.args[i], false);
        }
    }

    void apply(const Directive &dir, Primitive p) {
        switch (p) {
        case Primitive::split:
            return split(dir);
        case Primitive::fuse:
            return fuse(dir);
        case Primitive::reorder:
            return reorder(dir);
        case Primitive::vectorize:
            return set_type(dir, dir.vars[0], ForType::Vectorized);
        case Primitive::unroll:
            return set_type(dir, dir.vars[0], ForType::Unrolled);
        case Primitive::parallel:
            return set_type(dir, dir.vars[0], ForType::Parallel);
        case Primitive::serial:
            return set_type(dir, dir.vars[0], ForType::Serial);
        case Primitive::tensorize:
            return set_type(dir, dir.vars[0], ForType::Tensorized);
        case Primitive::gpu_blocks:
            return set_gpu_types(dir, ForType::GPUBlock);
        case Primitive::gpu_threads:
            return set_gpu_types(dir, ForType::GPUThread);
        case Primitive::gpu_single_thread:
            result.gpu_single_thread = true;
            return;
        case Primitive::prefetch:
            // Its loops are found once every directive is applied (finish): a later split may
            // still name them.
            pending_prefetches.push_back(&dir);
            return;
        case Primitive::rfactor:
            return; // applied to the algorithm when it was called
        case Primitive::compute_at:
        case Primitive::store_at:
        case Primitive::compute_root:
        case Primitive::store_root:
        case Primitive::compute_inline:
        case Primitive::reorder_storage:
        case Primitive::bound:
        case Primitive::store_in:
        case Primitive::store_nontemporal:
        case Primitive::in:
            break;
        }
        internal_error("'", dir.primitive, "' is not a stage directive");
    }

    // Resolves the prefetches' loops in the final loop nest.
    void finish() {
        for (const Directive *dir : pending_prefetches) {
            const std::string &at = dir->vars[0], &from = dir->vars[1];
            std::string what = "prefetch of '" + dir->target + "' in " + where();
            auto index = [&](const std::string &name, const char *role) {
                for (size_t i = 0; i < result.dims.size(); i++) {
                    if (result.dims[i].name == name) return i;
                }
                user_error(what, ": the ", role, " loop '", name, "' is not a loop of ", where(),
                           "; its loops are ", loop_names(result), " (innermost first)");
            };
            size_t a = index(at, "'at'"), b = index(from, "'from'");
            if (b < a) {
                user_error(what, ": 'from' ('", from, "') must be 'at' ('", at,
                           "') or a loop outside it, but it is inside; the loops are ",
                           loop_names(result), " (innermost first)");
            }
            const LoopDim &d = result.dims[a];
            if (d.for_type == ForType::Vectorized || d.for_type == ForType::GPUBlock ||
                d.for_type == ForType::GPUThread) {
                user_error(what, ": the loop '", at, "' is ",
                           d.for_type == ForType::Vectorized ? "vectorized" : "a GPU loop",
                           "; prefetch at a serial, parallel or unrolled CPU loop (one outside '",
                           at, "')");
            }
            PrefetchBoundStrategy strategy = PrefetchBoundStrategy::GuardWithIf;
            // The API takes the enum and ScheduleTrace::from_json checks the name.
            internal_assert(dir->option.empty() || parse_prefetch_strategy(dir->option, &strategy),
                            what, ": unknown bound strategy '", dir->option, "'");
            result.prefetches.push_back(
                {dir->target, at, from, d.var, result.dims[b].var, dir->ints[0], strategy});
        }
    }

    StageSchedule result;

private:
    std::vector<const Directive *> pending_prefetches;
    const FunctionContents &f;
    int stage;
    bool is_output;
    const Definition *def = nullptr;
    std::set<std::string> used_vars;
    std::set<std::string> bounded_vars; // loops made from the inner part of a split

    std::string where() const { return "'" + stage_name(f, stage) + "'"; }

    bool site_has_pure_var(const std::string &name) const {
        for (const Expr &a : def->args) {
            const Variable *v = a.as<Variable>();
            if (v && !v->rdom && v->name == name) return true;
        }
        return false;
    }

    std::string fresh_var(const std::string &name) {
        std::string base = stage_var_name(f.name, stage, name);
        std::string v = base;
        for (int i = 1; used_vars.count(v); i++)
            v = base + "$" + std::to_string(i);
        used_vars.insert(v);
        return v;
    }

    void add_original(const std::string &name, bool is_rvar) {
        LoopDim d;
        d.name = name;
        d.var = fresh_var(name);
        d.is_rvar = is_rvar;
        d.originals = {name};
        result.original_vars[name] = d.var;
        result.dims.push_back(d);
    }

    size_t find(const Directive &dir, const std::string &name) {
        for (size_t i = 0; i < result.dims.size(); i++) {
            if (result.dims[i].name == name) return i;
        }
        user_error(dir.primitive, ": ", where(), " has no loop '", name, "'; its loops are ",
                   loop_names(result), " (innermost first)");
    }

    void check_new_name(const Directive &dir, const std::string &name, const std::string &old) {
        if (name == old) return;
        for (const LoopDim &d : result.dims) {
            if (d.name == name) {
                user_error(dir.primitive, ": ", where(), " already has a loop named '", name,
                           "'; pick a new name");
            }
        }
    }

    void split(const Directive &dir) {
        const std::string &old = dir.vars[0], &outer = dir.vars[1], &inner = dir.vars[2];
        size_t i = find(dir, old);
        check_new_name(dir, outer, old);
        check_new_name(dir, inner, old);
        LoopDim od = result.dims[i];
        TailStrategy tail = TailStrategy::Auto;
        if (!parse_tail_strategy(dir.option, &tail)) {
            user_error("split: unknown tail strategy '", dir.option, "'");
        }
        bool pure_stage = stage == 0;
        if (tail == TailStrategy::Auto) {
            tail = (od.is_rvar || !pure_stage) ? TailStrategy::GuardWithIf
                                               : TailStrategy::ShiftInwards;
        }
        if (od.is_rvar && tail != TailStrategy::GuardWithIf) {
            user_error("split: RVar '", old, "' of ", where(),
                       " must use TailStrategy::GuardWithIf; ", tail_strategy_name(tail),
                       " would visit reduction points more than once or past the domain");
        }
        // Rounding up a loop made from the inner part of a split revisits points of the next
        // tile; rounding up an original or outer loop only runs past the end.
        if (!pure_stage && tail == TailStrategy::RoundUp && bounded_vars.count(od.var)) {
            user_error(
                "split: ", where(), " is an update, so '", old,
                "' (made from the inner loop of a split) cannot use TailStrategy::RoundUp: the "
                "rounded-up iterations would revisit points of the next tile and apply "
                "the update twice; use GuardWithIf");
        }
        if (!pure_stage && tail == TailStrategy::ShiftInwards) {
            user_error("split: ", where(), " is an update, so '", old,
                       "' cannot use TailStrategy::ShiftInwards (it would apply the update twice "
                       "to some points); use GuardWithIf or RoundUp");
        }
        LoopSplit s;
        s.kind = LoopSplit::Split;
        s.old_var = od.var;
        s.factor = dir.ints[0];
        s.tail = tail;
        LoopDim in{inner, fresh_var(inner), ForType::Serial, od.is_rvar, od.originals};
        LoopDim out{outer, fresh_var(outer), od.for_type, od.is_rvar, od.originals, od.gpu_dim};
        s.inner = in.var;
        s.outer = out.var;
        bounded_vars.insert(in.var);
        if (bounded_vars.count(od.var)) bounded_vars.insert(out.var);
        result.splits.push_back(s);
        result.dims[i] = in;
        result.dims.insert(result.dims.begin() + long(i) + 1, out);
    }

    void fuse(const Directive &dir) {
        const std::string &inner = dir.vars[0], &outer = dir.vars[1], &fused = dir.vars[2];
        size_t i = find(dir, inner), o = find(dir, outer);
        if (o != i + 1) {
            user_error("fuse: in ", where(), ", '", outer, "' must be the loop just outside '",
                       inner, "'; the loops are ", loop_names(result),
                       " (innermost first); reorder them first");
        }
        check_new_name(dir, fused, inner == fused ? inner : outer == fused ? outer : "");
        LoopDim id = result.dims[i], od = result.dims[o];
        if (id.is_rvar != od.is_rvar) {
            user_error("fuse: ", where(), " cannot fuse the RVar and pure loops '", inner,
                       "' and '", outer, "'");
        }
        LoopSplit s;
        s.kind = LoopSplit::Fuse;
        s.inner = id.var;
        s.outer = od.var;
        LoopDim fd{fused, fresh_var(fused), od.for_type, id.is_rvar, id.originals, od.gpu_dim};
        fd.originals.insert(od.originals.begin(), od.originals.end());
        s.old_var = fd.var;
        if (bounded_vars.count(id.var) || bounded_vars.count(od.var)) bounded_vars.insert(fd.var);
        result.splits.push_back(s);
        result.dims.erase(result.dims.begin() + long(o));
        result.dims[i] = fd;
    }

    void reorder(const Directive &dir) {
        std::vector<size_t> positions;
        for (const std::string &v : dir.vars)
            positions.push_back(find(dir, v));
        std::vector<size_t> sorted(positions);
        std::sort(sorted.begin(), sorted.end());
        std::vector<LoopDim> dims = result.dims;
        for (size_t k = 0; k < sorted.size(); k++)
            dims[sorted[k]] = result.dims[positions[k]];
        // RVars keep their relative order: reordering them changes the order of the reduction.
        std::vector<std::string> before, after;
        for (const LoopDim &d : result.dims) {
            if (d.is_rvar) before.push_back(d.name);
        }
        for (const LoopDim &d : dims) {
            if (d.is_rvar) after.push_back(d.name);
        }
        if (before != after && !reduction_is_reorderable()) {
            user_error("reorder: in ", where(), ", the RVars must keep their order (",
                       loop_names(result),
                       "), since reordering them changes the order the update applies in");
        }
        result.dims = dims;
    }

    bool reduction_is_reorderable() const {
        // Reordering RVars is safe when every RVar is independent (each iteration its own site).
        if (!def->rdom) return true;
        for (const auto &rv : def->rdom->vars) {
            if (!rvar_is_independent(f, *def, rv.name)) return false;
        }
        return true;
    }

    // gpu_blocks(x, y, z) and gpu_threads(x, y, z): the loops run over GPU dimensions 0, 1, 2.
    void set_gpu_types(const Directive &dir, ForType t) {
        for (size_t k = 0; k < dir.vars.size(); k++) {
            set_type(dir, dir.vars[k], t);
            result.dims[find(dir, dir.vars[k])].gpu_dim = int(k);
        }
    }

    void set_type(const Directive &dir, const std::string &name, ForType t) {
        size_t i = find(dir, name);
        LoopDim &d = result.dims[i];
        bool gpu = t == ForType::GPUBlock || t == ForType::GPUThread;
        if (d.is_rvar && (t == ForType::Parallel || t == ForType::Vectorized || gpu)) {
            // What matters are the original RVars the loop covers, through splits and fuses:
            // each of them must write only its own point.
            for (const std::string &original : d.originals) {
                if (rvar_is_independent(f, *def, original)) continue;
                std::string via = original == d.name ? "" : " (it covers RVar '" + original + "')";
                user_error(dir.primitive, ": '", d.name, "' of ", where(),
                           " is an RVar whose iterations depend on each other", via,
                           " (they update the same point of '", f.name,
                           "'); use rfactor to make a pure variable of it, then ", dir.primitive,
                           " that");
            }
        }
        d.for_type = t;
        if (!gpu) d.gpu_dim = -1;
    }
};

LoopLevel parse_level(const Directive &d) {
    LoopLevel l;
    l.func = d.target;
    l.var = d.vars.empty() ? "" : d.vars[0];
    return l;
}

} // namespace

FuncSchedule build_func_schedule(const FunctionContents &f, bool is_output) {
    FuncSchedule fs;
    std::vector<StageBuilder> builders;
    builders.reserve(f.updates.size() + 1);
    for (int s = 0; s <= int(f.updates.size()); s++)
        builders.emplace_back(f, s, is_output);

    bool has_updates = !f.updates.empty();
    // Pure Funcs are inlined by default; Funcs with updates are computed at root.
    fs.compute_level.is_inline = !has_updates && !is_output;
    bool store_set = false;
    fs.storage_order = f.args;

    for (const Directive &d : f.directives) {
        Primitive p;
        if (!parse_primitive(d.primitive, &p)) {
            internal_error("directive of '", f.name, "' has unknown primitive '", d.primitive, "'");
        }
        switch (p) {
        case Primitive::compute_at:
            fs.compute_level = parse_level(d);
            break;
        case Primitive::store_at:
            fs.store_level = parse_level(d);
            store_set = true;
            break;
        case Primitive::compute_root:
            fs.compute_level = LoopLevel();
            break;
        case Primitive::store_root:
            fs.store_level = LoopLevel();
            store_set = true;
            break;
        case Primitive::compute_inline:
            if (has_updates) {
                user_error("compute_inline: '", f.name,
                           "' has update definitions and cannot be inlined; use compute_root() "
                           "or compute_at()");
            }
            if (is_output)
                user_error("compute_inline: '", f.name, "' is an output of the pipeline");
            fs.compute_level = LoopLevel();
            fs.compute_level.is_inline = true;
            break;
        case Primitive::reorder_storage: {
            std::vector<std::string> order = d.vars;
            for (const std::string &a : f.args) {
                if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
            }
            fs.storage_order = order;
            break;
        }
        case Primitive::bound:
            fs.bounds.push_back({d.vars[0], d.ints[0], d.ints[1]});
            break;
        case Primitive::store_in:
            for (MemoryType m : {MemoryType::Auto, MemoryType::Stack, MemoryType::Heap,
                                 MemoryType::Register, MemoryType::GPUShared}) {
                if (d.option == memory_type_name(m)) fs.memory_type = m;
            }
            break;
        case Primitive::store_nontemporal:
            fs.nontemporal = true;
            break;
        case Primitive::in:
            // Made the wrapper when called (this Func); lowering redirects the calls.
            break;
        case Primitive::split:
        case Primitive::fuse:
        case Primitive::reorder:
        case Primitive::vectorize:
        case Primitive::unroll:
        case Primitive::parallel:
        case Primitive::serial:
        case Primitive::tensorize:
        case Primitive::gpu_blocks:
        case Primitive::gpu_threads:
        case Primitive::gpu_single_thread:
        case Primitive::prefetch:
        case Primitive::rfactor:
            if (d.stage < 0 || d.stage >= int(builders.size())) {
                user_error(d.primitive, ": '", f.name, "' has no update ", d.stage - 1);
            }
            if (!d.folded_into_rdom) builders[d.stage].apply(d, p);
            break;
        }
    }
    if (is_output && fs.compute_level.is_inline) fs.compute_level = LoopLevel();
    if (is_output && !fs.compute_level.is_root()) {
        user_error("compute_at: '", f.name,
                   "' is an output of the pipeline and is computed at "
                   "root; remove compute_at");
    }
    if (!store_set) {
        fs.store_level = fs.compute_level;
        fs.store_level.is_inline = false;
    }
    for (StageBuilder &b : builders) {
        b.finish();
        fs.stages.push_back(std::move(b.result));
    }
    return fs;
}

} // namespace kiln
