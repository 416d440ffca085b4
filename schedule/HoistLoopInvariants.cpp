#include "schedule/HoistLoopInvariants.h"

#include <map>
#include <set>
#include <vector>

#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

bool intersects(const std::set<std::string> &a, const std::set<std::string> &b) {
    for (const std::string &n : a) {
        if (b.count(n)) return true;
    }
    return false;
}

// Whether a let of this name may change scope: bound once in the whole statement and never used
// outside that binding, so no other use can be captured.
struct Movable {
    const IRNames &names;
    bool operator()(const std::string &n) const {
        auto it = names.binders.find(n);
        return it != names.binders.end() && it->second == 1 && !names.free_variables.count(n);
    }
};

// Turns the lets at the top of a statement's expressions into LetStmts around the statement.
class LiftLets : public IRMutator {
public:
    explicit LiftLets(Movable movable) : movable(movable) {}

protected:
    using IRMutator::visit;
    using Lets = std::vector<std::pair<std::string, Expr>>;

    Stmt visit(const LetStmt *op) override {
        Lets lets;
        Expr value = peel(op->value, lets);
        Stmt body = mutate(op->body);
        if (lets.empty() && body.same_as(op->body)) return Stmt(op);
        return wrap(LetStmt::make(op->name, value, body), lets);
    }
    Stmt visit(const Store *op) override {
        Lets lets;
        Expr value = peel(op->value, lets), index = peel(op->index, lets);
        Expr pred = peel(op->predicate, lets);
        if (lets.empty()) return Stmt(op);
        return wrap(Store::make(op->name, value, index, pred), lets);
    }
    Stmt visit(const IfThenElse *op) override {
        Lets lets;
        Expr c = peel(op->condition, lets);
        Stmt then_case = mutate(op->then_case), else_case = mutate(op->else_case);
        if (lets.empty() && then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) {
            return Stmt(op);
        }
        return wrap(IfThenElse::make(c, then_case, else_case), lets);
    }
    Stmt visit(const Evaluate *op) override {
        Lets lets;
        Expr value = peel(op->value, lets);
        if (lets.empty()) return Stmt(op);
        return wrap(Evaluate::make(value), lets);
    }
    Stmt visit(const For *op) override {
        Lets lets;
        Expr min = peel(op->min, lets), extent = peel(op->extent, lets);
        Stmt body = mutate(op->body);
        if (lets.empty() && body.same_as(op->body)) return Stmt(op);
        return wrap(For::make(op->name, min, extent, op->for_type, body), lets);
    }

private:
    Movable movable;

    Expr peel(Expr e, Lets &lets) const {
        while (e.defined()) {
            const auto *let = e.as<Let>();
            if (!let || !movable(let->name)) break;
            lets.emplace_back(let->name, let->value);
            e = let->body;
        }
        return e;
    }

    static Stmt wrap(Stmt s, const Lets &lets) {
        for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
            s = LetStmt::make(it->first, it->second, s);
        }
        return s;
    }
};

// Removes the hoistable lets from the body of one loop, recording them in order.
class RemoveInvariantLets : public IRMutator {
public:
    RemoveInvariantLets(const std::set<std::string> &bound_inside,
                        const std::set<std::string> &written, Movable movable)
        : variant(bound_inside), written(written), movable(movable) {}

    std::vector<std::pair<std::string, Expr>> hoisted;
    bool hoisted_loads = false;

    Expr mutate(const Expr &e) override { return e; }
    using IRMutator::mutate;

protected:
    using IRMutator::visit;

    Stmt visit(const LetStmt *op) override {
        IRNames reads = collect_names(op->value);
        bool invariant =
            !intersects(reads.free_variables, variant) && !intersects(reads.loads, written);
        // A load under a condition may be out of bounds where the condition is false.
        bool loads = !reads.loads.empty();
        if (invariant && movable(op->name) && !(loads && conditional)) {
            hoisted.emplace_back(op->name, op->value);
            hoisted_loads = hoisted_loads || loads;
            variant.erase(op->name);
            return mutate(op->body);
        }
        Stmt body = mutate(op->body);
        if (body.same_as(op->body)) return Stmt(op);
        return LetStmt::make(op->name, op->value, body);
    }

    // Inner loops were already processed: what they still hold depends on them.
    Stmt visit(const For *op) override { return Stmt(op); }

    Stmt visit(const IfThenElse *op) override {
        bool saved = conditional;
        conditional = true;
        Stmt s = IRMutator::visit(op);
        conditional = saved;
        return s;
    }

private:
    std::set<std::string> variant;
    const std::set<std::string> &written;
    Movable movable;
    bool conditional = false;
};

class HoistLoopInvariants : public IRMutator {
public:
    explicit HoistLoopInvariants(Movable movable) : movable(movable) {}

protected:
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        Stmt body = mutate(op->body);
        if (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread) {
            if (body.same_as(op->body)) return Stmt(op);
            return For::make(op->name, op->min, op->extent, op->for_type, body);
        }
        IRNames writes = collect_names(body);
        std::set<std::string> bound_inside;
        for (const auto &[name, count] : writes.binders)
            bound_inside.insert(name);
        bound_inside.insert(op->name);
        std::set<std::string> written = writes.stores;
        written.insert(writes.allocations.begin(), writes.allocations.end());
        RemoveInvariantLets remove(bound_inside, written, movable);
        Stmt new_body = remove.mutate(body);
        Stmt loop = For::make(op->name, op->min, op->extent, op->for_type, new_body);
        if (remove.hoisted.empty()) {
            if (body.same_as(op->body)) return Stmt(op);
            return loop;
        }
        for (auto it = remove.hoisted.rbegin(); it != remove.hoisted.rend(); ++it) {
            loop = LetStmt::make(it->first, it->second, loop);
        }
        // An empty loop loaded nothing; its hoisted loads must not happen either.
        if (remove.hoisted_loads && !can_prove(op->extent > 0)) {
            loop = IfThenElse::make(op->extent > 0, loop);
        }
        return loop;
    }

private:
    Movable movable;
};

} // namespace

Stmt hoist_loop_invariants(const Stmt &s) {
    IRNames names = collect_names(s);
    Movable movable{names};
    Stmt lifted = LiftLets(movable).mutate(s);
    return HoistLoopInvariants(movable).mutate(lifted);
}

} // namespace kiln
