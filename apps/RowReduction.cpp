#include <limits>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

RowReduction row_reduction(const std::string &name, const std::function<Expr(Expr, Expr)> &value,
                           int n, int lanes, bool is_max) {
    Var l("l"), y("y");
    Func partial(name + "_partial"), total(name);
    // The lowest finite float rather than -infinity: every input of the operators is finite.
    Expr init = is_max ? Expr(std::numeric_limits<float>::lowest()) : Expr(0.f);
    auto combine = [&](Expr a, Expr b) { return is_max ? max(a, b) : a + b; };
    int blocks = n / lanes;
    partial(l, y) = init;
    if (blocks > 0) {
        RDom b(0, blocks, name + "_b");
        partial(l, y) = combine(partial(l, y), value(l + lanes * b, y));
    }
    RDom r(0, lanes, name + "_r");
    total(y) = init;
    total(y) = combine(total(y), partial(r, y));
    if (n % lanes) {
        RDom t(blocks * lanes, n % lanes, name + "_t");
        total(y) = combine(total(y), value(t, y));
    }
    return {partial, total};
}

} // namespace kiln::apps
