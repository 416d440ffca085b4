#include "schedule/BoxesTouched.h"

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRMutator.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

class BoxesTouched : public IRVisitor {
public:
    BoxesTouched(const std::string &name, bool calls, bool provides, const Scope &scope)
        : name(name), calls(calls), provides(provides), scope(scope) {}
    Box box;

private:
    const std::string &name;
    bool calls, provides;
    Scope scope;
    std::map<std::string, Expr> let_values; // LetStmts entered so far, for loop bounds

    void merge(const std::vector<Expr> &args) {
        if (box.empty()) {
            for (const Expr &a : args) box.push_back(bounds_of_expr(a, scope));
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
        if (calls && op->name == name && (op->call_type == Call::Func || op->call_type == Call::Image)) {
            merge(op->args);
        }
    }
    void visit(const Provide *op) override {
        IRVisitor::visit(op);
        if (provides && op->name == name) merge(op->args);
    }
    void visit(const Let *op) override {
        include(op->value);
        with_binding(op->name, bounds_of_expr(op->value, scope), [&] { include(op->body); });
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        auto old = let_values.find(op->name);
        Expr saved = old == let_values.end() ? Expr() : old->second;
        let_values[op->name] = op->value;
        with_binding(op->name, bounds_of_expr(op->value, scope), [&] { include(op->body); });
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
            for (const auto &[name, value] : let_values) last = substitute(name, value, last);
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
                narrowed.max = narrowed.has_upper_bound() ? simplify(min(narrowed.max, bound.max))
                                                          : bound.max;
            }
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
    BoxesTouched b(name, calls, provides, scope);
    b.include(s);
    return b.box;
}

Box boxes_touched(const Expr &e, const std::string &name, const Scope &scope) {
    BoxesTouched b(name, true, false, scope);
    b.include(e);
    return b.box;
}

} // namespace kiln
