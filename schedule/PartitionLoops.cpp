#include "schedule/PartitionLoops.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Interval.h"
#include "lang/Simplify.h"
#include "schedule/InjectPrefetch.h"

namespace kiln {

namespace {

// Whether e reads memory, binds names or calls anything: then it is not a plain affine guard.
bool is_opaque(const Expr &e) {
    return reads_memory_or_calls(e) || !collect_names(e).binders.empty();
}

bool is_likely(const Expr &e) {
    const auto *c = e.as<Call>();
    return c && c->call_type == Call::Intrinsic && c->name == intrinsic::likely &&
           c->args.size() == 1;
}

// Splits a condition into its conjuncts, without likely hints; sets *hinted when any had one.
void split_conjunction(const Expr &e, std::vector<Expr> &terms, bool *hinted) {
    if (is_likely(e)) {
        *hinted = true;
        split_conjunction(e.as<Call>()->args[0], terms, hinted);
        return;
    }
    if (const auto *a = e.as<And>()) {
        split_conjunction(a->a, terms, hinted);
        split_conjunction(a->b, terms, hinted);
        return;
    }
    terms.push_back(e);
}

// Where a guard holds: v >= lower and v <= upper, either of which may be undefined.
struct Bounds {
    std::vector<Expr> lower, upper;
};

// Finds the likely guards in the body of loop `var` and the range of `var` on which each holds.
class FindGuards : public IRVisitor {
public:
    explicit FindGuards(const std::string &var) : var(var) {}

    Bounds bounds;
    std::set<const IfThenElse *> provable, unprovable;

protected:
    using IRVisitor::visit;

    void visit(const LetStmt *op) override {
        ScopedBinding<Expr> let(lets, op->name, expand(op->value));
        include(op->body);
    }

    void visit(const For *op) override {
        Expr min = expand(op->min), extent = expand(op->extent);
        Interval range = Interval::everything();
        // A range that depends on the partitioned loop or on another inner loop is not known
        // up front; leave the variable unbounded, which makes guards on it unprovable.
        if (!is_opaque(min) && !is_opaque(extent) && !expr_uses_vars(min, variant) &&
            !expr_uses_vars(extent, variant)) {
            range = Interval(min, simplify(min + extent - 1));
        }
        // The loop variable hides any let of the same name.
        ScopedBinding<Expr> hidden(lets, op->name, std::nullopt);
        scope[op->name] = range;
        variant.insert(op->name);
        include(op->body);
        variant.erase(op->name);
        scope.erase(op->name);
    }

    void visit(const IfThenElse *op) override {
        std::vector<Expr> terms;
        bool hinted = false;
        split_conjunction(op->condition, terms, &hinted);
        if (hinted) {
            Bounds found;
            bool all = true;
            for (const Expr &t : terms)
                all = all && analyze(t, found);
            if (all && !unprovable.count(op)) {
                provable.insert(op);
                for (const Expr &e : found.lower)
                    bounds.lower.push_back(e);
                for (const Expr &e : found.upper)
                    bounds.upper.push_back(e);
            } else {
                // The same node may appear in several places; one failure keeps it everywhere.
                provable.erase(op);
                unprovable.insert(op);
            }
        }
        IRVisitor::visit(op);
    }

private:
    std::string var;
    std::map<std::string, Expr> lets;
    Scope scope;
    std::set<std::string> variant{var};

    Expr expand(const Expr &e) { return substitute(lets, e); }

    // A comparison is rewritten as f <= 0 with f = c * var + g; with G an upper bound of g over
    // the inner loops, c * var + G <= 0 is sufficient, which bounds var on one side.
    bool analyze(const Expr &term, Bounds &found) {
        Expr f;
        if (const auto *op = term.as<LE>()) f = op->a - op->b;
        if (const auto *op = term.as<LT>()) f = op->a - op->b + 1;
        if (const auto *op = term.as<GE>()) f = op->b - op->a;
        if (const auto *op = term.as<GT>()) f = op->b - op->a + 1;
        if (!f.defined() || f.type() != Int(32)) return false;
        f = expand(f);
        if (is_opaque(f) || !expr_uses_var(f, var)) return false;
        Expr v = Variable::make(Int(32), var);
        auto c = as_const_int(simplify(substitute(var, v + 1, f) - f));
        if (!c || *c == 0) return false;
        Expr g = simplify(f - v * Expr(int(*c)));
        if (expr_uses_var(g, var)) return false;
        Expr g_max = bounds_of_expr(g, scope).max;
        if (!g_max.defined() || expr_uses_vars(g_max, variant)) return false;
        if (*c > 0) {
            found.upper.push_back(simplify((0 - g_max) / Expr(int(*c))));
        } else {
            int k = int(-*c);
            found.lower.push_back(simplify((g_max + (k - 1)) / Expr(k)));
        }
        return true;
    }
};

class ReplaceGuards : public IRMutator {
public:
    explicit ReplaceGuards(const std::set<const IfThenElse *> &guards) : guards(guards) {}

protected:
    using IRMutator::visit;
    Stmt visit(const IfThenElse *op) override {
        if (guards.count(op)) return mutate(op->then_case);
        return IRMutator::visit(op);
    }

private:
    const std::set<const IfThenElse *> &guards;
};

class RemoveLikely : public IRMutator {
protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        if (is_likely(Expr(op))) return mutate(op->args[0]);
        return IRMutator::visit(op);
    }
};

Expr fold(const std::vector<Expr> &es, bool take_min) {
    Expr r = es[0];
    for (size_t i = 1; i < es.size(); i++)
        r = take_min ? min(r, es[i]) : max(r, es[i]);
    return simplify(r);
}

class PartitionLoops : public IRMutator {
protected:
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        if (op->for_type != ForType::Serial && op->for_type != ForType::Parallel) {
            return IRMutator::visit(op);
        }
        FindGuards finder(op->name);
        finder.include(op->body);
        if (finder.provable.empty()) return IRMutator::visit(op);

        Stmt steady_body = mutate(ReplaceGuards(finder.provable).mutate(op->body));
        Stmt cold_body = mutate(RemoveLikely().mutate(op->body));
        const Bounds &b = finder.bounds;
        Expr loop_end = simplify(op->min + op->extent);
        std::string begin_name = op->name + ".steady_begin", end_name = op->name + ".steady_end";
        Expr begin = Variable::make(Int(32), begin_name), end = Variable::make(Int(32), end_name);

        if (b.lower.empty()) begin = op->min;
        if (b.upper.empty()) end = loop_end;
        std::vector<Stmt> loops;
        if (!b.lower.empty()) {
            loops.push_back(
                For::make(op->name, op->min, simplify(begin - op->min), op->for_type, cold_body));
        }
        loops.push_back(
            For::make(op->name, begin, simplify(end - begin), op->for_type, steady_body));
        if (!b.upper.empty()) {
            loops.push_back(
                For::make(op->name, end, simplify(loop_end - end), op->for_type, cold_body));
        }
        Stmt result = Block::make(loops);
        // Clamped, so that prologue, steady state and epilogue have non-negative extents and
        // together cover [min, min + extent) whatever the bounds turn out to be.
        if (!b.upper.empty()) {
            Expr end_value = simplify(clamp(fold(b.upper, true) + 1, begin, loop_end));
            result = LetStmt::make(end_name, end_value, result);
        }
        if (!b.lower.empty()) {
            Expr begin_value = simplify(clamp(fold(b.lower, false), op->min, loop_end));
            result = LetStmt::make(begin_name, begin_value, result);
        }
        return result;
    }
};

// Replaces one statement node (compared by identity) by another.
class ReplaceNode : public IRMutator {
public:
    ReplaceNode(const IRNode *target, Stmt replacement)
        : target(target), replacement(std::move(replacement)) {}

    Stmt mutate(const Stmt &s) override {
        if (s.get() == target) return replacement;
        return IRMutator::mutate(s);
    }
    using IRMutator::mutate;

private:
    const IRNode *target;
    Stmt replacement;
};

// trim_no_ops: see PartitionLoops.h. Inner loops are trimmed first; a conjunct whose bound would
// depend on an enclosing vectorized loop is left alone (the trimmed loop's extent would vary
// across the vector's lanes).
class TrimNoOps : public IRMutator {
protected:
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        bool vector = op->for_type == ForType::Vectorized;
        bool device = op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread;
        if (vector) vectorized.insert(op->name);
        gpu_depth += device;
        Stmt body = mutate(op->body);
        gpu_depth -= device;
        if (vector) vectorized.erase(op->name);
        Stmt rebuilt = body.same_as(op->body)
                           ? Stmt(op)
                           : For::make(op->name, op->min, op->extent, op->for_type, body);
        if (op->for_type != ForType::Serial && op->for_type != ForType::Parallel) return rebuilt;
        if (gpu_depth > 0) return rebuilt;

        // Down to the guard, through lets, inner loops and likely guards (GuardWithIf's, which
        // partition_loops splits off) only: then nothing happens in an iteration where the
        // guard is false.
        std::map<std::string, Expr> lets;
        std::set<std::string> variant{op->name};
        Stmt at = body;
        const IfThenElse *guard = nullptr;
        while (at.defined() && !guard) {
            if (const auto *l = at.as<LetStmt>()) {
                lets[l->name] = substitute(lets, l->value);
                at = l->body;
            } else if (const auto *f = at.as<For>()) {
                variant.insert(f->name);
                lets.erase(f->name);
                at = f->body;
            } else if (const auto *i = at.as<IfThenElse>(); i && !i->else_case.defined()) {
                if (!is_likely(i->condition)) guard = i;
                at = i->then_case;
            } else if (const auto *b = at.as<Block>(); b && only_prefetches(b->first)) {
                // Prefetches (schedule/InjectPrefetch.h) are hints: the trimmed iterations may
                // skip them.
                at = b->rest;
            } else {
                break;
            }
        }
        if (!guard) return rebuilt;

        std::vector<Expr> terms, kept, lower, upper;
        bool hinted = false;
        split_conjunction(guard->condition, terms, &hinted);
        variant.erase(op->name);
        for (const Expr &t : terms) {
            if (!bound(t, op->name, lets, variant, lower, upper)) kept.push_back(t);
        }
        if (lower.empty() && upper.empty()) return rebuilt;

        Expr cond;
        for (const Expr &t : kept)
            cond = cond.defined() ? cond && t : t;
        Stmt inner = cond.defined() ? IfThenElse::make(cond, guard->then_case) : guard->then_case;
        body = ReplaceNode(guard, inner).mutate(body);

        Expr last = simplify(op->min + op->extent - 1), first = op->min;
        for (const Expr &e : lower)
            first = max(first, e);
        for (const Expr &e : upper)
            last = min(last, e);
        first = simplify(first);
        Expr extent = simplify(max(last - first + 1, 0));
        return For::make(op->name, first, extent, op->for_type, body);
    }

private:
    std::set<std::string> vectorized;
    int gpu_depth = 0; // loops inside a kernel keep their bounds: kernels are left as they are

    // A conjunct c * v + g <= 0 with g fixed in the loop: v <= floor(-g / c) for c > 0, v >=
    // ceil(g / -c) for c < 0, exactly, so the conjunct holds on the whole trimmed loop.
    bool bound(const Expr &term, const std::string &v, const std::map<std::string, Expr> &lets,
               const std::set<std::string> &variant, std::vector<Expr> &lower,
               std::vector<Expr> &upper) {
        std::vector<Expr> fs;
        if (const auto *o = term.as<LE>()) fs = {o->a - o->b};
        if (const auto *o = term.as<LT>()) fs = {o->a - o->b + 1};
        if (const auto *o = term.as<GE>()) fs = {o->b - o->a};
        if (const auto *o = term.as<GT>()) fs = {o->b - o->a + 1};
        if (const auto *o = term.as<EQ>()) fs = {o->a - o->b, o->b - o->a};
        if (fs.empty() || fs[0].type() != Int(32)) return false;
        std::vector<Expr> lo, up;
        Expr var = Variable::make(Int(32), v);
        for (Expr f : fs) {
            f = substitute(lets, f);
            if (is_opaque(f) || !expr_uses_var(f, v) || expr_uses_vars(f, variant)) return false;
            auto c = as_const_int(simplify(substitute(v, var + 1, f) - f));
            if (!c || *c == 0) return false;
            Expr g = simplify(f - var * Expr(int(*c)));
            if (expr_uses_var(g, v) || expr_uses_vars(g, vectorized)) return false;
            if (*c > 0) {
                up.push_back(simplify((0 - g) / Expr(int(*c))));
            } else {
                int k = int(-*c);
                lo.push_back(simplify((g + (k - 1)) / Expr(k)));
            }
        }
        lower.insert(lower.end(), lo.begin(), lo.end());
        upper.insert(upper.end(), up.begin(), up.end());
        return true;
    }
};

} // namespace

Stmt partition_loops(const Stmt &s) {
    return PartitionLoops().mutate(s);
}

Stmt trim_no_ops(const Stmt &s) {
    return TrimNoOps().mutate(s);
}

} // namespace kiln
