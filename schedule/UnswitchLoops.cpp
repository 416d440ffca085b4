#include "schedule/UnswitchLoops.h"

#include <set>
#include <string>

#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

// Copies of one loop for its conditions, and of all loops of a pipeline.
constexpr int kMaxPerLoop = 2;
constexpr int kMaxUnswitches = 16;

bool is_no_op(const Stmt &s) {
    const auto *e = s.as<Evaluate>();
    return !s.defined() || (e && is_const(e->value));
}

// Whether e reads memory or calls anything (an intrinsic's value may differ between calls).
class ReadsOrCalls : public IRVisitor {
public:
    bool result = false;

protected:
    using IRVisitor::visit;
    void visit(const Load *) override { result = true; }
    void visit(const Call *) override { result = true; }
};

// The first condition in a loop's body that no name bound inside the loop changes, written
// without the body's lets (an unrolled copy binds its own `x = xo * 14` next to the condition on
// it; expanded, the condition is on xo alone).
class FindInvariantCondition : public IRVisitor {
public:
    explicit FindInvariantCondition(std::set<std::string> bound_inside)
        : bound_inside(std::move(bound_inside)) {}

    Expr found;

protected:
    using IRVisitor::visit;

    void visit(const LetStmt *op) override {
        lets.push(op->name, op->value);
        include(op->body);
        lets.pop();
    }
    void visit(const IfThenElse *op) override {
        if (found.defined()) return;
        Expr c = lets.apply(op->condition);
        ReadsOrCalls opaque;
        opaque.include(c);
        if (!opaque.result && c.type().is_scalar() && !expr_uses_vars(c, bound_inside)) {
            found = c;
            return;
        }
        IRVisitor::visit(op);
    }
    // Conditions inside a GPU kernel are the kernel's business.
    void visit(const For *op) override {
        if (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread) return;
        IRVisitor::visit(op);
    }

private:
    std::set<std::string> bound_inside;
    LetStack lets;
};

// Replaces every `if` on `condition` (through the lets of the statement it is applied to) by
// the side `value` selects.
class Decide : public LetScopedMutator {
public:
    Decide(Expr condition, bool value) : condition(std::move(condition)), value(value) {}

protected:
    using LetScopedMutator::visit;
    Stmt visit(const IfThenElse *op) override {
        if (equal(lets.apply(op->condition), condition)) {
            Stmt taken = value ? op->then_case : op->else_case;
            return taken.defined() ? mutate(taken) : Evaluate::make(0);
        }
        return LetScopedMutator::visit(op);
    }

private:
    Expr condition;
    bool value;
};

class UnswitchLoops : public IRMutator {
protected:
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        if (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread) {
            return Stmt(op);
        }
        return unswitch(op, 0);
    }

private:
    int total = 0;

    Stmt unswitch(const For *op, int copies) {
        IRNames names = collect_names(op->body);
        std::set<std::string> bound_inside{op->name};
        for (const auto &[name, count] : names.binders)
            bound_inside.insert(name);
        FindInvariantCondition find(bound_inside);
        find.include(op->body);
        if (!find.found.defined()) return IRMutator::visit(op);
        const Expr c = find.found;
        Stmt when_true = simplify(For::make(op->name, op->min, op->extent, op->for_type,
                                            Decide(c, true).mutate(op->body)));
        Stmt when_false = simplify(For::make(op->name, op->min, op->extent, op->for_type,
                                             Decide(c, false).mutate(op->body)));
        const bool free = is_no_op(when_true) || is_no_op(when_false);
        if (!free && (copies >= kMaxPerLoop || total >= kMaxUnswitches)) {
            return IRMutator::visit(op);
        }
        if (!free) total++;
        const int next = free ? copies : copies + 1;
        auto again = [&](const Stmt &s) {
            const auto *loop = s.as<For>();
            return loop ? unswitch(loop, next) : mutate(s);
        };
        if (is_no_op(when_false)) return IfThenElse::make(c, again(when_true));
        if (is_no_op(when_true)) return IfThenElse::make(!c, again(when_false));
        return IfThenElse::make(c, again(when_true), again(when_false));
    }
};

} // namespace

Stmt unswitch_loops(const Stmt &s) {
    return UnswitchLoops().mutate(s);
}

} // namespace kiln
