#include "schedule/BoxesTouched.h"

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

class BoxesTouched : public IRVisitor {
public:
    BoxesTouched(std::set<std::string> calls, std::set<std::string> provides, const Scope &scope)
        : calls(std::move(calls)), provides(std::move(provides)), scope(scope) {}
    std::map<std::string, Box> boxes;

private:
    std::set<std::string> calls, provides;
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
        auto old = scope.find(n);
        bool had = old != scope.end();
        Interval saved = had ? old->second : Interval();
        scope[n] = i;
        f();
        if (had) {
            scope[n] = saved;
        } else {
            scope.erase(n);
        }
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
    /// e with the values of enclosing lets substituted (two levels) and simplified: bounding
    /// `f.x.max - f.x.min + 1` term by term would lose that both ends move together.
    Expr expand_lets(const Expr &e) const {
        Expr r = e;
        for (int level = 0; level < 2; level++) {
            for (const auto &[name, value] : let_values)
                r = substitute(name, value, r);
            r = simplify(r);
        }
        return r;
    }

    void visit(const LetStmt *op) override {
        include(op->value);
        Interval value = bounds_of_expr(expand_lets(op->value), scope);
        auto old = let_values.find(op->name);
        Expr saved = old == let_values.end() ? Expr() : old->second;
        let_values[op->name] = op->value;
        with_binding(op->name, value, [&] { include(op->body); });
        if (saved.defined()) {
            let_values[op->name] = saved;
        } else {
            let_values.erase(op->name);
        }
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        // The last iteration is min + extent - 1 as one expression: with the loop bounds' lets
        // substituted it usually simplifies to a single symbol (f.x.max), whereas bounding min
        // and extent separately would lose that they are correlated.
        Expr last = op->min + op->extent - 1;
        for (int level = 0; level < 2; level++) {
            for (const auto &[name, value] : let_values)
                last = substitute(name, value, last);
            last = simplify(last);
        }
        Interval mn = bounds_of_expr(op->min, scope), mx = bounds_of_expr(last, scope);
        Interval range(mn.min, mx.max);
        with_binding(op->name, range, [&] { include(op->body); });
    }
    void visit(const IfThenElse *op) override {
        include(op->condition);
        // A guard `v <= e` (from GuardWithIf splits) narrows v in the then-branch.
        Expr cond = op->condition;
        if (const Call *c = cond.as<Call>(); c && c->name == intrinsic::likely) cond = c->args[0];
        const LE *le = cond.as<LE>();
        const Variable *v = le ? le->a.as<Variable>() : nullptr;
        if (v && scope.count(v->name)) {
            Interval narrowed = scope[v->name];
            Interval bound = bounds_of_expr(le->b, scope);
            if (bound.has_upper_bound()) {
                narrowed.max =
                    narrowed.has_upper_bound() ? simplify(min(narrowed.max, bound.max)) : bound.max;
            }
            // The narrowed range is what counts now: stop expanding v into its let value.
            auto it = let_values.find(v->name);
            Expr saved = it == let_values.end() ? Expr() : it->second;
            let_values.erase(v->name);
            with_binding(v->name, narrowed, [&] { include(op->then_case); });
            if (saved.defined()) let_values[v->name] = saved;
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
    b.include(s);
    return b.boxes[name];
}

std::map<std::string, Box> boxes_touched(const Stmt &s, const std::set<std::string> &calls,
                                         const std::set<std::string> &provides) {
    BoxesTouched b(calls, provides, {});
    b.include(s);
    return b.boxes;
}

Box boxes_touched(const Expr &e, const std::string &name, const Scope &scope) {
    BoxesTouched b({name}, {}, scope);
    b.include(e);
    return b.boxes[name];
}

} // namespace kiln
