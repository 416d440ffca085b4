#include "schedule/BoxesTouched.h"

#include <map>
#include <set>
#include <string>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

/// Substitutes the values of lets into an expression, recursively (unlike lang/IRToolbox.h's
/// substitute(map, e), the values may refer to each other), in one traversal, with the same result
/// as substituting them one at a time in name order (each value then sees only the substitutions of
/// later names): expand_lets() runs for every LetStmt and For, and one substitute() pass per
/// enclosing let made bounds inference quadratic in the number of lets.
class ExpandLetsInNameOrder : public IRMutator {
public:
    explicit ExpandLetsInNameOrder(const std::map<std::string, Expr> &values) : values(values) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override {
        if (masked.count(op->name)) return Expr(op);
        auto found = values.find(op->name);
        if (found == values.end() || (after && found->first <= *after)) return Expr(op);
        // Only the names after this one apply inside its value.
        const std::string *saved = after;
        after = &found->first;
        Expr r = mutate(found->second);
        after = saved;
        return r;
    }
    Expr visit(const Let *op) override {
        Expr v = mutate(op->value);
        bool inserted = masked.insert(op->name).second;
        Expr b = mutate(op->body);
        if (inserted) masked.erase(op->name);
        if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
        return Let::make(op->name, v, b);
    }

private:
    const std::map<std::string, Expr> &values;
    const std::string *after = nullptr; ///< only names greater than this one are substituted
    std::set<std::string> masked;       ///< names bound by an enclosing Let
};

/// The LetStmts and For loops whose subtree (values included) accesses one of the names: the
/// others cannot change a box, and BoxesTouched skips them rather than bound their lets.
class FindAccessingStmts : public IRVisitor {
public:
    FindAccessingStmts(const std::set<std::string> &calls, const std::set<std::string> &provides)
        : calls(calls), provides(provides) {}
    std::set<const IRNode *> accessing;

private:
    const std::set<std::string> &calls, &provides;
    size_t found = 0;

    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if ((op->call_type == Call::Func || op->call_type == Call::Image) && calls.count(op->name))
            found++;
    }
    void visit(const Provide *op) override {
        IRVisitor::visit(op);
        if (provides.count(op->name)) found++;
    }
    void visit(const LetStmt *op) override {
        size_t before = found;
        IRVisitor::visit(op);
        if (found > before) accessing.insert(op);
    }
    void visit(const For *op) override {
        size_t before = found;
        IRVisitor::visit(op);
        if (found > before) accessing.insert(op);
    }
};

class BoxesTouched : public IRVisitor {
public:
    BoxesTouched(std::set<std::string> calls, std::set<std::string> provides, const Scope &scope)
        : calls(std::move(calls)), provides(std::move(provides)), scope(scope) {}
    std::map<std::string, Box> boxes;

    /// Visits s, skipping the lets and loops that access none of the names.
    void include_stmt(const Stmt &s) {
        FindAccessingStmts finder(calls, provides);
        finder.include(s);
        accessing = std::move(finder.accessing);
        skip_unrelated = true;
        include(s);
    }

private:
    std::set<std::string> calls, provides;
    std::set<const IRNode *> accessing;
    bool skip_unrelated = false;
    bool unrelated(const IRNode *op) const { return skip_unrelated && !accessing.count(op); }
    Scope scope;
    std::map<std::string, Expr> let_values; // LetStmts entered so far, for loop bounds

    void merge(const std::string &name, const std::vector<Expr> &args) {
        Box &box = boxes[name];
        if (box.empty()) {
            for (const Expr &a : args)
                box.push_back(bounds_of_expr(a, scope));
            return;
        }
        internal_assert(box.size() == args.size(), "'", name, "' accessed with ", args.size(),
                        " and ", box.size(), " coordinates");
        for (size_t i = 0; i < args.size(); i++) {
            box[i] = Interval::make_union(box[i], bounds_of_expr(args[i], scope));
        }
    }

    /// Binds a name for the duration of a visit, restoring any outer binding afterwards.
    template <typename F>
    void with_binding(const std::string &n, const Interval &i, F &&f) {
        ScopedBinding<Interval> binding(scope, n, i);
        f();
    }

    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if ((op->call_type == Call::Func || op->call_type == Call::Image) &&
            calls.count(op->name)) {
            merge(op->name, op->args);
        }
    }
    void visit(const Provide *op) override {
        IRVisitor::visit(op);
        if (provides.count(op->name)) merge(op->name, op->args);
    }
    void visit(const Let *op) override {
        include(op->value);
        with_binding(op->name, bounds_of_expr(op->value, scope), [&] { include(op->body); });
    }
    /// e with the values of enclosing lets substituted and simplified: bounding
    /// `f.x.max - f.x.min + 1` term by term would lose that both ends move together. Each level
    /// substitutes, in name order, what the previous one's simplification left; chains of loop
    /// bounds (a split's steady end of a loop max of a loop extent of a max and a min) need up to
    /// four, and the loop stops at the first level that changes nothing.
    Expr expand_lets(const Expr &e) const {
        Expr r = e;
        for (int level = 0; level < max_expand_levels; level++) {
            Expr next = simplify(ExpandLetsInNameOrder(let_values).mutate(r));
            if (equal(next, r)) break;
            r = next;
        }
        return r;
    }
    static constexpr int max_expand_levels = 6;

    void visit(const LetStmt *op) override {
        if (unrelated(op)) return;
        include(op->value);
        Interval value = bounds_of_expr(expand_lets(op->value), scope);
        ScopedBinding<Expr> let(let_values, op->name, op->value);
        with_binding(op->name, value, [&] { include(op->body); });
    }
    void visit(const For *op) override {
        if (unrelated(op)) return;
        include(op->min);
        include(op->extent);
        // The last iteration is min + extent - 1 as one expression: with the loop bounds' lets
        // substituted it usually simplifies to a single symbol (f.x.max), whereas bounding min
        // and extent separately would lose that they are correlated.
        Expr last = expand_lets(op->min + op->extent - 1);
        Interval mn = bounds_of_expr(op->min, scope), mx = bounds_of_expr(last, scope);
        Interval range(mn.min, mx.max);
        with_binding(op->name, range, [&] { include(op->body); });
    }
    void visit(const IfThenElse *op) override {
        include(op->condition);
        // A guard `v <= e` or `v < e` (from GuardWithIf splits) narrows v in the then-branch.
        Expr cond = op->condition;
        if (const Call *c = cond.as<Call>(); c && c->name == intrinsic::likely) cond = c->args[0];
        const Variable *v = nullptr;
        Expr last; // the largest value v takes in the then-branch
        if (const LE *le = cond.as<LE>()) {
            v = le->a.as<Variable>();
            last = le->b;
        } else if (const LT *lt = cond.as<LT>()) {
            v = lt->a.as<Variable>();
            last = lt->b - 1;
        }
        if (v && v->type.is_int() && scope.count(v->name)) {
            Interval narrowed = scope[v->name];
            // With the enclosing lets substituted, as for loop bounds: `loop_min + loop_extent`
            // bounded term by term would lose that both move with the same outer loop.
            Interval bound = bounds_of_expr(expand_lets(last), scope);
            if (bound.has_upper_bound()) {
                narrowed.max =
                    narrowed.has_upper_bound() ? simplify(min(narrowed.max, bound.max)) : bound.max;
            }
            // The narrowed range is what counts now: stop expanding v into its let value.
            ScopedBinding<Expr> hidden(let_values, v->name, std::nullopt);
            with_binding(v->name, narrowed, [&] { include(op->then_case); });
        } else {
            include(op->then_case);
        }
        include(op->else_case);
    }
};

} // namespace

Box boxes_touched(const Stmt &s, const std::string &name, bool calls, bool provides,
                  const Scope &scope) {
    std::set<std::string> none, one{name};
    BoxesTouched b(calls ? one : none, provides ? one : none, scope);
    b.include_stmt(s);
    return b.boxes[name];
}

std::map<std::string, Box> boxes_touched(const Stmt &s, const std::set<std::string> &calls,
                                         const std::set<std::string> &provides) {
    BoxesTouched b(calls, provides, {});
    b.include_stmt(s);
    return b.boxes;
}

Box boxes_touched(const Expr &e, const std::string &name, const Scope &scope) {
    BoxesTouched b({name}, {}, scope);
    b.include(e);
    return b.boxes[name];
}

} // namespace kiln
