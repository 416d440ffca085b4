#include "schedule/UnswitchLoops.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

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
// Conditions weighed per loop (each costs two copies of the body, simplified).
constexpr size_t kMaxCandidates = 8;

bool is_no_op(const Stmt &s) {
    const auto *e = s.as<Evaluate>();
    return !s.defined() || (e && is_const(e->value));
}

// The conditions in a loop's body that no name bound inside the loop changes, in the order they
// appear, each once, written without the body's lets (an unrolled copy binds its own
// `x = xo * 14` next to the condition on it; expanded, the condition is on xo alone).
class FindInvariantCondition : public IRVisitor {
public:
    explicit FindInvariantCondition(std::set<std::string> bound_inside)
        : bound_inside(std::move(bound_inside)) {}

    std::vector<Expr> found;

protected:
    using IRVisitor::visit;

    void visit(const LetStmt *op) override {
        lets.push(op->name, op->value);
        include(op->body);
        lets.pop();
    }
    void visit(const IfThenElse *op) override {
        if (found.size() >= kMaxCandidates) return;
        Expr c = lets.apply(op->condition);
        if (!reads_memory_or_calls(c) && c.type().is_scalar() && !expr_uses_vars(c, bound_inside) &&
            std::none_of(found.begin(), found.end(), [&](const Expr &f) { return equal(f, c); })) {
            found.push_back(c);
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
        // The first condition that costs no copy (one side does nothing), else the first one
        // while this loop and the pipeline have copies left.
        const bool copies_left = copies < kMaxPerLoop && total < kMaxUnswitches;
        Expr c;
        Stmt when_true, when_false;
        bool free = false;
        for (const Expr &candidate : find.found) {
            Stmt t = simplify(For::make(op->name, op->min, op->extent, op->for_type,
                                        Decide(candidate, true).mutate(op->body)));
            Stmt f = simplify(For::make(op->name, op->min, op->extent, op->for_type,
                                        Decide(candidate, false).mutate(op->body)));
            const bool candidate_free = is_no_op(t) || is_no_op(f);
            if (!candidate_free && (!copies_left || c.defined())) continue;
            c = candidate;
            when_true = t;
            when_false = f;
            free = candidate_free;
            if (free) break;
        }
        if (!c.defined()) return IRMutator::visit(op);
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
