#include "lang/Reduce.h"

#include <algorithm>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

/// "1 dimension", "2 dimensions": a count with its noun, for messages.
std::string count(size_t n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// Checks that a body of `vars` Vars fits the shape, before any Func is made.
void check_rank(const std::vector<Expr> &shape, size_t vars, const std::string &name) {
    if (shape.size() == vars) return;
    user_error("compute '", name.empty() ? "(unnamed)" : name, "': the body takes ",
               count(vars, "Var"), ", but the shape has ", count(shape.size(), "dimension"));
}

Func compute_impl(const std::vector<Expr> &shape, const std::string &name,
                  const std::function<Expr(const std::vector<Var> &)> &body) {
    Func f(name.empty() ? unique_name("compute") : name);
    static const char *names[] = {"i", "j", "k", "l"};
    std::vector<Var> vars;
    std::vector<Expr> args;
    for (size_t d = 0; d < shape.size(); d++) {
        if (!shape[d].defined() || !shape[d].type().is_int_or_uint()) {
            user_error("compute '", f.name(), "': extent ", d, " of the shape must be an integer");
        }
        vars.emplace_back(f.name() + "." + (d < 4 ? names[d] : "d" + std::to_string(d)));
        args.push_back(vars.back());
    }
    Expr value = body(vars);
    if (!value.defined()) user_error("compute '", f.name(), "': the body returned no value");
    f(args) = value;
    for (const Expr &e : shape)
        f.function()->shape.push_back(cast(Int(32), e));
    return f;
}

/// The free pure Vars (in order of first use) and the single RDom of a reducer's argument.
struct ReductionUses : IRVisitor {
    std::vector<std::string> vars;
    std::shared_ptr<RDomContents> rdom;
    std::string reducer;

    using IRVisitor::visit;
    void visit(const Variable *op) override {
        if (op->param) return;
        if (op->rdom) {
            if (rdom && rdom != op->rdom) {
                user_error(reducer, ": the argument uses RVars of two RDoms, '", rdom->name,
                           "' and '", op->rdom->name, "'; combine them into one RDom");
            }
            rdom = op->rdom;
            return;
        }
        if (std::find(vars.begin(), vars.end(), op->name) == vars.end()) vars.push_back(op->name);
    }
};

ReductionUses analyze(const Expr &e, const char *reducer) {
    if (!e.defined()) user_error(reducer, ": the argument is undefined");
    ReductionUses uses;
    uses.reducer = reducer;
    uses.include(e);
    if (!uses.rdom) {
        user_error(reducer, "(", e,
                   "): the argument uses no RVar, so there is nothing to reduce "
                   "over; use an RDom inside it");
    }
    return uses;
}

std::vector<Expr> as_exprs(const std::vector<std::string> &vars) {
    std::vector<Expr> args;
    for (const std::string &v : vars)
        args.push_back(Var(v));
    return args;
}

Expr fold(const Expr &e, const std::string &name, const char *reducer, const Expr &init,
          const std::function<Expr(Expr, Expr)> &combine) {
    ReductionUses uses = analyze(e, reducer);
    Func f(name.empty() ? unique_name(reducer) : name);
    std::vector<Expr> args = as_exprs(uses.vars);
    f(args) = init;
    f(args) = combine(f(args), e);
    return f(args);
}

Tuple arg_reduce(const Expr &e, const std::string &name, const char *reducer, bool is_max) {
    ReductionUses uses = analyze(e, reducer);
    Func f(name.empty() ? unique_name(reducer) : name);
    std::vector<Expr> args = as_exprs(uses.vars);
    int dims = int(uses.rdom->vars.size());
    std::vector<Expr> init, better, keep;
    for (int d = 0; d < dims; d++)
        init.push_back(uses.rdom->vars[d].min);
    init.push_back(is_max ? type_min(e.type()) : type_max(e.type()));
    f(args) = Tuple(init);
    Expr best = f(args)[dims];
    // Strict comparison keeps the first extreme value in iteration order.
    Expr improves = is_max ? e > best : e < best;
    std::vector<Expr> values;
    for (int d = 0; d < dims; d++) {
        Expr rv = Variable::make(Int(32), uses.rdom->vars[d].name, nullptr, uses.rdom);
        values.push_back(select(improves, rv, f(args)[d]));
    }
    values.push_back(select(improves, e, best));
    f(args) = Tuple(values);
    std::vector<Expr> result;
    for (int d = 0; d <= dims; d++)
        result.push_back(f(args)[d]);
    return Tuple(result);
}

} // namespace

Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var)> &body,
             const std::string &name) {
    check_rank(shape, 1, name);
    return compute_impl(shape, name, [&](const std::vector<Var> &v) { return body(v[0]); });
}

Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var)> &body,
             const std::string &name) {
    check_rank(shape, 2, name);
    return compute_impl(shape, name, [&](const std::vector<Var> &v) { return body(v[0], v[1]); });
}

Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var, Var)> &body,
             const std::string &name) {
    check_rank(shape, 3, name);
    return compute_impl(shape, name,
                        [&](const std::vector<Var> &v) { return body(v[0], v[1], v[2]); });
}

Func compute(const std::vector<Expr> &shape, const std::function<Expr(Var, Var, Var, Var)> &body,
             const std::string &name) {
    check_rank(shape, 4, name);
    return compute_impl(shape, name,
                        [&](const std::vector<Var> &v) { return body(v[0], v[1], v[2], v[3]); });
}

Func compute(const std::vector<Expr> &shape,
             const std::function<Expr(const std::vector<Var> &)> &body, const std::string &name) {
    return compute_impl(shape, name, body);
}

Expr sum(const Expr &e, const std::string &name) {
    return fold(e, name, "sum", make_zero(e.defined() ? e.type() : Int(32)),
                [](Expr a, Expr b) { return std::move(a) + std::move(b); });
}

Expr maximum(const Expr &e, const std::string &name) {
    return fold(e, name, "maximum", type_min(e.defined() ? e.type() : Int(32)),
                [](Expr a, Expr b) { return max(std::move(a), std::move(b)); });
}

Expr minimum(const Expr &e, const std::string &name) {
    return fold(e, name, "minimum", type_max(e.defined() ? e.type() : Int(32)),
                [](Expr a, Expr b) { return min(std::move(a), std::move(b)); });
}

Tuple argmax(const Expr &e, const std::string &name) {
    return arg_reduce(e, name, "argmax", true);
}
Tuple argmin(const Expr &e, const std::string &name) {
    return arg_reduce(e, name, "argmin", false);
}

} // namespace kiln
