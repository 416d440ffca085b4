#include "schedule/UnrollLoops.h"

#include <map>
#include <vector>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRToolbox.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

// Beyond this many copies the code size costs more than the loop overhead saves.
constexpr int64_t max_unroll_extent = 256;

class UnrollLoops : public LetScopedMutator {
protected:
    using LetScopedMutator::visit;

    // Lowering binds loop extents to lets (`x.loop_extent = 8`) outside the loop, so the extent
    // is only constant once those lets (`lets`, kept by LetScopedMutator) are seen through.
    Stmt visit(const For *op) override {
        Stmt body = mutate(op->body);
        if (op->for_type != ForType::Unrolled) {
            if (body.same_as(op->body)) return Stmt(op);
            return For::make(op->name, op->min, op->extent, op->for_type, body);
        }
        auto extent = as_const_int(simplify(lets.apply(op->extent)));
        if (!extent) {
            user_error("unroll: loop '", op->name, "' has extent ", op->extent,
                       ", which is not a constant; split it by a constant factor first and "
                       "unroll the inner loop");
        }
        if (*extent > max_unroll_extent) {
            user_error("unroll: loop '", op->name, "' has extent ", *extent,
                       ", more than the limit of ", max_unroll_extent,
                       "; split it by a constant factor of at most ", max_unroll_extent,
                       " first and unroll the inner loop");
        }
        std::vector<Stmt> copies;
        for (int64_t i = 0; i < *extent; i++) {
            Expr value = simplify(op->min + Expr(int(i)));
            copies.push_back(substitute(op->name, value, body));
        }
        // A loop that never runs is a no-op, which a Stmt cannot be undefined to express here.
        if (copies.empty()) return Evaluate::make(0);
        return Block::make(copies);
    }
};

} // namespace

Stmt unroll_loops(const Stmt &s) {
    return UnrollLoops().mutate(s);
}

} // namespace kiln
