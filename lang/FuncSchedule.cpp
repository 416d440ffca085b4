// The scheduling methods of Func and Stage. They check what can be checked without a loop nest
// and record a Directive; schedule/ validates directives against the loop nest when lowering.
// rfactor is the exception: it rewrites the algorithm (as in Halide), so it is done here.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "lang/RebindRVars.h"
#include "lang/Simplify.h"

namespace kiln {

const char *tail_strategy_name(TailStrategy t) {
    switch (t) {
    case TailStrategy::Auto:
        return "Auto";
    case TailStrategy::GuardWithIf:
        return "GuardWithIf";
    case TailStrategy::ShiftInwards:
        return "ShiftInwards";
    case TailStrategy::RoundUp:
        return "RoundUp";
    }
    return "?";
}

bool parse_tail_strategy(const std::string &s, TailStrategy *out) {
    for (TailStrategy t : {TailStrategy::Auto, TailStrategy::GuardWithIf,
                           TailStrategy::ShiftInwards, TailStrategy::RoundUp}) {
        if (s == tail_strategy_name(t)) {
            *out = t;
            return true;
        }
    }
    return false;
}

const char *prefetch_strategy_name(PrefetchBoundStrategy s) {
    switch (s) {
    case PrefetchBoundStrategy::Clamp:
        return "Clamp";
    case PrefetchBoundStrategy::GuardWithIf:
        return "GuardWithIf";
    case PrefetchBoundStrategy::NonFaulting:
        return "NonFaulting";
    }
    return "?";
}

bool parse_prefetch_strategy(const std::string &s, PrefetchBoundStrategy *out) {
    for (PrefetchBoundStrategy p :
         {PrefetchBoundStrategy::Clamp, PrefetchBoundStrategy::GuardWithIf,
          PrefetchBoundStrategy::NonFaulting}) {
        if (s == prefetch_strategy_name(p)) {
            *out = p;
            return true;
        }
    }
    return false;
}

namespace {
constexpr size_t Many = PrimitiveSpec::Many;
} // namespace

const std::vector<PrimitiveSpec> &primitive_specs() {
    using S = PrimitiveSpec;
    static const std::vector<PrimitiveSpec> specs = {
#define DIRECTIVE(name, on, min_vars, max_vars, ints, target, option, vars)                        \
    {Primitive::name,                                                                              \
     #name,                                                                                        \
     S::On::on,                                                                                    \
     min_vars,                                                                                     \
     max_vars,                                                                                     \
     ints,                                                                                         \
     S::TargetFunc::target,                                                                        \
     S::OptionKind::option,                                                                        \
     S::VarKinds::vars},
#include "lang/Directives.def"
    };
    return specs;
}

const PrimitiveSpec &primitive_spec(Primitive p) {
    const std::vector<PrimitiveSpec> &specs = primitive_specs();
    internal_assert(size_t(p) < specs.size() && specs[size_t(p)].primitive == p, "primitive ",
                    int(p), " has no row in lang/Directives.def");
    return specs[size_t(p)];
}

const char *primitive_name(Primitive p) {
    return primitive_spec(p).name;
}

bool parse_primitive(const std::string &name, Primitive *out) {
    for (const PrimitiveSpec &s : primitive_specs()) {
        if (name == s.name) {
            *out = s.primitive;
            return true;
        }
    }
    return false;
}

int64_t next_directive_sequence() {
    static std::atomic<int64_t> counter{1};
    return counter++;
}

namespace {
void check_factor(const Stage &s, const char *primitive, const VarOrRVar &v, int64_t factor) {
    if (factor <= 0) {
        user_error(primitive, ": factor for '", v.name(), "' of '", s.name(),
                   "' must be a positive constant, got ", factor);
    }
}

void check_named_once(const Stage &s, const char *primitive, const std::vector<VarOrRVar> &vars) {
    for (size_t i = 0; i < vars.size(); i++) {
        for (size_t j = 0; j < i; j++) {
            if (vars[i].name() == vars[j].name()) {
                user_error(primitive, " of '", s.name(), "': '", vars[i].name(),
                           "' is named twice; name each loop once");
            }
        }
    }
}

/// Records a directive on a Func that has a pure definition; the table of lang/Directives.def
/// is the contract between the recording methods and schedule/.
void record_directive(FunctionContents &f, int stage, Primitive primitive,
                      const std::vector<VarOrRVar> &vars, const std::vector<int64_t> &ints,
                      const std::string &option, const std::string &target) {
    const PrimitiveSpec &spec = primitive_spec(primitive);
    if (!f.has_pure_definition()) {
        user_error(spec.name, ": Func '", f.name, "' has no definition to schedule yet");
    }
    internal_assert(vars.size() >= spec.min_vars && vars.size() <= spec.max_vars &&
                        ints.size() == spec.ints &&
                        (spec.target == PrimitiveSpec::TargetFunc::None) == target.empty(),
                    spec.name, " recorded with arguments its row of lang/Directives.def rejects");
    Directive d;
    d.func = f.name;
    d.stage = stage;
    d.primitive = spec.name;
    for (const VarOrRVar &v : vars) {
        d.vars.push_back(v.name());
        d.is_rvar.push_back(v.is_rvar());
    }
    d.ints = ints;
    d.option = option;
    d.target = target;
    d.sequence = next_directive_sequence();
    f.directives.push_back(std::move(d));
}
} // namespace

Stage &Stage::record(Primitive primitive, const std::vector<VarOrRVar> &vars,
                     const std::vector<int64_t> &ints, const std::string &option,
                     const std::string &target) {
    internal_assert(primitive_spec(primitive).on != PrimitiveSpec::On::Func,
                    primitive_name(primitive), " is recorded on the Func, not on a stage");
    record_directive(*func, index, primitive, vars, ints, option, target);
    return *this;
}

Stage &Stage::split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner,
                    int factor, TailStrategy tail) {
    check_factor(*this, "split", old, factor);
    if (outer.name() == inner.name()) {
        user_error("split of '", old.name(), "' in '", name(),
                   "': the outer and inner names are "
                   "both '",
                   outer.name(), "'; give them different names");
    }
    return record(Primitive::split, {old, outer, inner}, {factor}, tail_strategy_name(tail));
}

Stage &Stage::fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused) {
    return record(Primitive::fuse, {inner, outer, fused});
}

Stage &Stage::reorder(const std::vector<VarOrRVar> &vars) {
    check_named_once(*this, "reorder", vars);
    return record(Primitive::reorder, vars);
}

Stage &Stage::tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
                   const VarOrRVar &xi, const VarOrRVar &yi, int xfactor, int yfactor,
                   TailStrategy tail) {
    split(x, xo, xi, xfactor, tail);
    split(y, yo, yi, yfactor, tail);
    return reorder({xi, yi, xo, yo});
}

Stage &Stage::tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xi, const VarOrRVar &yi,
                   int xfactor, int yfactor, TailStrategy tail) {
    return tile(x, y, x, y, xi, yi, xfactor, yfactor, tail);
}

Stage &Stage::tile(const std::vector<VarOrRVar> &vars, const std::vector<VarOrRVar> &outers,
                   const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
                   TailStrategy tail) {
    size_t n = vars.size();
    if (outers.size() != n || inners.size() != n || factors.size() != n) {
        user_error("tile of '", name(), "': got ", n, " vars, ", outers.size(), " outer names, ",
                   inners.size(), " inner names and ", factors.size(),
                   " factors; give the same number of each");
    }
    for (size_t i = 0; i < n; i++)
        split(vars[i], outers[i], inners[i], factors[i], tail);
    std::vector<VarOrRVar> order(inners);
    order.insert(order.end(), outers.begin(), outers.end());
    return reorder(order);
}

Stage &Stage::vectorize(const VarOrRVar &var) {
    return record(Primitive::vectorize, {var});
}

Stage &Stage::vectorize(const VarOrRVar &var, int factor, TailStrategy tail) {
    check_factor(*this, "vectorize", var, factor);
    VarOrRVar inner(var.name() + "_vi", var.is_rvar());
    split(var, var, inner, factor, tail);
    return vectorize(inner);
}

Stage &Stage::unroll(const VarOrRVar &var) {
    return record(Primitive::unroll, {var});
}

Stage &Stage::unroll(const VarOrRVar &var, int factor, TailStrategy tail) {
    check_factor(*this, "unroll", var, factor);
    VarOrRVar inner(var.name() + "_ui", var.is_rvar());
    split(var, var, inner, factor, tail);
    return unroll(inner);
}

Stage &Stage::parallel(const VarOrRVar &var) {
    return record(Primitive::parallel, {var});
}
Stage &Stage::serial(const VarOrRVar &var) {
    return record(Primitive::serial, {var});
}
Stage &Stage::tensorize(const VarOrRVar &var) {
    if (index == 0) {
        user_error("tensorize: '", func->name, "' pure definition is not a reduction; tensorize ",
                   "the update that sums the products, e.g. ", func->name, ".update(0).tensorize(",
                   var.name(), ")");
    }
    return record(Primitive::tensorize, {var});
}

Stage &Stage::gpu_loops(Primitive primitive, const std::vector<VarOrRVar> &vars) {
    check_named_once(*this, primitive_name(primitive), vars);
    return record(primitive, vars);
}

Stage &Stage::gpu_blocks(const VarOrRVar &x) {
    return gpu_loops(Primitive::gpu_blocks, {x});
}
Stage &Stage::gpu_blocks(const VarOrRVar &x, const VarOrRVar &y) {
    return gpu_loops(Primitive::gpu_blocks, {x, y});
}
Stage &Stage::gpu_blocks(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z) {
    return gpu_loops(Primitive::gpu_blocks, {x, y, z});
}
Stage &Stage::gpu_threads(const VarOrRVar &x) {
    return gpu_loops(Primitive::gpu_threads, {x});
}
Stage &Stage::gpu_threads(const VarOrRVar &x, const VarOrRVar &y) {
    return gpu_loops(Primitive::gpu_threads, {x, y});
}
Stage &Stage::gpu_threads(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z) {
    return gpu_loops(Primitive::gpu_threads, {x, y, z});
}

Stage &Stage::gpu_single_thread() {
    return record(Primitive::gpu_single_thread, {});
}

Stage &Stage::prefetch(const Func &f, const VarOrRVar &at, const VarOrRVar &from,
                       const Expr &offset, PrefetchBoundStrategy strategy) {
    if (!f.defined()) user_error("prefetch in '", name(), "': the Func to prefetch is undefined");
    return prefetch_named(f.name(), at, from, offset, strategy);
}

Stage &Stage::prefetch(const ImageParam &image, const VarOrRVar &at, const VarOrRVar &from,
                       const Expr &offset, PrefetchBoundStrategy strategy) {
    if (!image.defined())
        user_error("prefetch in '", name(), "': the ImageParam to prefetch is undefined");
    return prefetch_named(image.name(), at, from, offset, strategy);
}

// Whether `what` is read by this stage, and `from` is `at` or outside it, can only be checked
// against the loop nest (schedule/Schedule.cpp and schedule/InjectPrefetch.cpp).
Stage &Stage::prefetch_named(const std::string &what, const VarOrRVar &at, const VarOrRVar &from,
                             const Expr &offset, PrefetchBoundStrategy strategy) {
    std::optional<int64_t> k = offset.defined() ? as_const_int(simplify(offset)) : std::nullopt;
    if (!k) {
        user_error("prefetch of '", what, "' in '", name(), "' at '", at.name(), "': the offset ",
                   offset.defined() ? to_string(offset) : std::string("(undefined)"),
                   " is not a constant integer; give the number of iterations of '", from.name(),
                   "' to look ahead, e.g. 1 or 2");
    }
    if (*k < INT_MIN || *k > INT_MAX) {
        user_error("prefetch of '", what, "' in '", name(), "': the offset ", *k,
                   " does not fit in int");
    }
    return record(Primitive::prefetch, {at, from}, {*k}, prefetch_strategy_name(strategy), what);
}

// The factors and names are checked before anything is recorded, so a gpu_tile rejected at the
// call leaves no directive behind.
Stage &Stage::gpu_tile_dims(const std::vector<VarOrRVar> &vars,
                            const std::vector<VarOrRVar> &outers,
                            const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
                            TailStrategy tail) {
    for (size_t i = 0; i < vars.size(); i++)
        check_factor(*this, "gpu_tile", vars[i], factors[i]);
    std::vector<VarOrRVar> loops(inners);
    loops.insert(loops.end(), outers.begin(), outers.end());
    check_named_once(*this, "gpu_tile", vars);
    check_named_once(*this, "gpu_tile", loops);
    for (size_t i = 0; i < vars.size(); i++)
        split(vars[i], outers[i], inners[i], factors[i], tail);
    if (vars.size() > 1) reorder(loops);
    gpu_loops(Primitive::gpu_blocks, outers);
    return gpu_loops(Primitive::gpu_threads, inners);
}

Stage &Stage::gpu_tile(const VarOrRVar &x, const VarOrRVar &xo, const VarOrRVar &xi, int tx,
                       TailStrategy tail) {
    return gpu_tile_dims({x}, {xo}, {xi}, {tx}, tail);
}

Stage &Stage::gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo,
                       const VarOrRVar &yo, const VarOrRVar &xi, const VarOrRVar &yi, int tx,
                       int ty, TailStrategy tail) {
    return gpu_tile_dims({x, y}, {xo, yo}, {xi, yi}, {tx, ty}, tail);
}

Stage &Stage::gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z,
                       const VarOrRVar &xo, const VarOrRVar &yo, const VarOrRVar &zo,
                       const VarOrRVar &xi, const VarOrRVar &yi, const VarOrRVar &zi, int tx,
                       int ty, int tz, TailStrategy tail) {
    return gpu_tile_dims({x, y, z}, {xo, yo, zo}, {xi, yi, zi}, {tx, ty, tz}, tail);
}

namespace {

bool calls_func(const Expr &e, const std::string &name);

/// Recognizes an update `f(args) = op(f(args), e)` and returns op's name and e.
bool match_associative(const FunctionContents &f, const Definition &d, std::string *op,
                       Expr *term) {
    if (d.values.size() != 1) return false;
    const Expr &v = d.values[0];
    auto is_self = [&](const Expr &e) {
        const Call *c = e.as<Call>();
        if (!c || c->call_type != Call::Func || c->name != f.name) return false;
        if (c->args.size() != d.args.size()) return false;
        for (size_t i = 0; i < d.args.size(); i++) {
            if (!equal(c->args[i], d.args[i])) return false;
        }
        return true;
    };
    auto check = [&](const Expr &a, const Expr &b, const char *name) {
        if (is_self(a)) {
            *op = name;
            *term = b;
            return true;
        }
        if (is_self(b)) {
            *op = name;
            *term = a;
            return true;
        }
        return false;
    };
    // fma(a, b, f(x)) sums the products a b (op "fma", term fma(a, b, 0)): an intermediate
    // keeps the fused multiply-add, and what merges it into f is a plain +.
    if (const Call *c = v.as<Call>()) {
        if (c->call_type != Call::Math || c->name != "fma" || c->args.size() != 3 ||
            !is_self(c->args[2]) || calls_func(c->args[0], f.name) ||
            calls_func(c->args[1], f.name)) {
            return false;
        }
        *op = "fma";
        *term =
            Call::make(c->type, c->name, {c->args[0], c->args[1], make_zero(c->type)}, Call::Math);
        return true;
    }
    if (const Add *n = v.as<Add>()) return check(n->a, n->b, "+");
    if (const Mul *n = v.as<Mul>()) return check(n->a, n->b, "*");
    if (const Min *n = v.as<Min>()) return check(n->a, n->b, "min");
    if (const Max *n = v.as<Max>()) return check(n->a, n->b, "max");
    return false;
}

/// Whether e calls the Func named `name`.
bool calls_func(const Expr &e, const std::string &name) {
    class Find : public IRVisitor {
    public:
        explicit Find(const std::string &name) : name(name) {}
        bool found = false;

    protected:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            found = found || (op->call_type == Call::Func && op->name == name);
            IRVisitor::visit(op);
        }

    private:
        const std::string &name;
    } find(name);
    find.include(e);
    return find.found;
}

Expr combine(const std::string &op, const Expr &a, const Expr &b) {
    if (op == "fma") {
        const Call *c = b.as<Call>();
        internal_assert(c && c->args.size() == 3, "rfactor: an fma term that is not fma(a, b, 0)");
        return Call::make(c->type, c->name, {c->args[0], c->args[1], a}, Call::Math);
    }
    if (op == "+") return a + b;
    if (op == "*") return a * b;
    if (op == "min") return min(a, b);
    return max(a, b);
}

Expr identity(const std::string &op, Type t) {
    if (op == "+" || op == "fma") return make_zero(t);
    if (op == "*") return make_one(t);
    if (op == "min") return type_max(t);
    return type_min(t);
}

/// Replaces the RVars of one RDom by those of its folded copy: `rv` by min + outer * k + inner,
/// the others by the RVar of the same name.
class FoldSplitRVar : public IRMutator {
public:
    FoldSplitRVar(std::shared_ptr<RDomContents> from, std::shared_ptr<RDomContents> to,
                  std::string rv, Expr min, std::string outer, std::string inner, int64_t k)
        : from(std::move(from)), to(std::move(to)), rv(std::move(rv)), min(std::move(min)),
          outer(std::move(outer)), inner(std::move(inner)), k(k) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override {
        if (op->rdom != from) return Expr(op);
        if (op->name != rv) return Variable::make(op->type, op->name, nullptr, to);
        Expr o = Variable::make(op->type, outer, nullptr, to);
        Expr i = Variable::make(op->type, inner, nullptr, to);
        return min + o * make_const(op->type, k) + i;
    }

private:
    std::shared_ptr<RDomContents> from, to;
    std::string rv;
    Expr min;
    std::string outer, inner;
    int64_t k;
};

/// When `outer` is the outer variable of a split of one of d's RVars (update.split(rv, outer,
/// inner, k)), d with that split made part of the algorithm: rv is replaced by the RVars inner
/// (extent k) and outer (extent E / k) with rv = min + outer * k + inner, and *split is the
/// split's directive. nullopt when there is no such split. The extent E must be a constant
/// multiple of k (a CompileError says so otherwise), so no iteration is added or lost.
std::optional<Definition> fold_split_rvar(FunctionContents &f, int stage, const Definition &d,
                                          const std::string &outer, const std::string &where,
                                          Directive **split) {
    for (auto it = f.directives.rbegin(); it != f.directives.rend(); ++it) {
        Directive &dir = *it;
        if (dir.stage != stage || dir.primitive != primitive_name(Primitive::split) ||
            dir.folded_into_rdom || dir.vars.size() != 3 || dir.vars[1] != outer)
            continue;
        auto rv = std::find_if(d.rdom->vars.begin(), d.rdom->vars.end(),
                               [&](const ReductionVariable &x) { return x.name == dir.vars[0]; });
        if (rv == d.rdom->vars.end()) return std::nullopt;
        int64_t k = dir.ints.at(0);
        std::optional<int64_t> extent = as_const_int(simplify(rv->extent));
        if (!extent || *extent % k != 0) {
            user_error("rfactor: '", outer, "' is the outer part of a split of '", rv->name,
                       "' by ", k, " in ", where,
                       "; rfactor of a split RVar needs the RVar's extent to be a constant "
                       "multiple of the factor, and the extent of '",
                       rv->name, "' is ", rv->extent, " (split it by a divisor of its extent)");
        }
        auto folded = std::make_shared<RDomContents>();
        folded->name = d.rdom->name;
        for (const ReductionVariable &x : d.rdom->vars) {
            if (x.name != rv->name) {
                folded->vars.push_back(x);
                continue;
            }
            folded->vars.push_back(
                {dir.vars[2], make_zero(x.extent.type()), make_const(x.extent.type(), k)});
            folded->vars.push_back({dir.vars[1], make_zero(x.extent.type()),
                                    make_const(x.extent.type(), *extent / k)});
        }
        FoldSplitRVar fold(d.rdom, folded, rv->name, rv->min, dir.vars[1], dir.vars[2], k);
        Definition out = d;
        for (Expr &a : out.args)
            a = fold.mutate(a);
        for (Expr &v : out.values)
            v = fold.mutate(v);
        if (out.predicate.defined()) out.predicate = fold.mutate(out.predicate);
        out.rdom = folded;
        *split = &dir;
        return out;
    }
    return std::nullopt;
}

} // namespace

Func Stage::rfactor(const RVar &r, const Var &v, const std::string &name) {
    return rfactor(std::vector<std::pair<RVar, Var>>{{r, v}}, name);
}

Func Stage::rfactor(const std::vector<std::pair<RVar, Var>> &preserved, const std::string &name) {
    FunctionContents &f = *func;
    if (index == 0) {
        user_error("rfactor: '", f.name,
                   "' pure definition has no RDom; call rfactor on an "
                   "update, e.g. ",
                   f.name, ".update(0).rfactor(r, v)");
    }
    Definition &d = f.updates[index - 1];
    std::string where = this->name();
    if (!d.rdom) user_error("rfactor: ", where, " has no RDom to factor");
    for (size_t i = 0; i < d.args.size(); i++) {
        const Variable *a = d.args[i].as<Variable>();
        if (!a || a->rdom || a->name != f.args[i]) {
            user_error("rfactor: ", where, " must write '", f.name,
                       "' at its pure variables, but argument ", i, " is ", d.args[i]);
        }
    }
    std::string op;
    Expr term;
    if (!match_associative(f, d, &op, &term)) {
        user_error("rfactor: ", where, " = ", d.values[0],
                   " is not an associative update of the form f(x) = f(x) + e (or *, min, max, "
                   "fma(a, b, f(x)))");
    }
    if (d.predicate.defined() && calls_func(d.predicate, f.name)) {
        user_error("rfactor: the where() predicate ", d.predicate, " of ", where, " reads '",
                   f.name,
                   "', which the factored update would read before it is complete; "
                   "rfactor needs a predicate that does not read the Func it reduces into");
    }
    // The update as it will be factored: an RVar that is the outer part of a split
    // (update.split(r, ro, ri, k).rfactor(ro, u), as in Halide) makes the split part of the
    // update's RDom first. Nothing is changed until every pair is checked.
    Definition work = d;
    std::vector<Directive *> splits;
    std::set<std::string> rnames, vnames;
    for (const auto &pair : preserved) {
        const RVar &r = pair.first;
        const Var &v = pair.second;
        auto has_rvar = [&](const Definition &def) {
            return std::any_of(def.rdom->vars.begin(), def.rdom->vars.end(),
                               [&](const ReductionVariable &rv) { return rv.name == r.name(); });
        };
        if (!has_rvar(work)) {
            Directive *split = nullptr;
            std::optional<Definition> folded =
                fold_split_rvar(f, index, work, r.name(), where, &split);
            if (!folded) {
                std::string legal;
                for (const auto &rv : work.rdom->vars)
                    legal += (legal.empty() ? "" : ", ") + rv.name;
                user_error("rfactor: '", r.name(), "' is not an RVar of ", where,
                           "; its RVars are ", legal);
            }
            work = *folded;
            splits.push_back(split);
        }
        if (!rnames.insert(r.name()).second) {
            user_error("rfactor: ", where, " names RVar '", r.name(),
                       "' twice; preserve each RVar once");
        }
        if (std::find(f.args.begin(), f.args.end(), v.name()) != f.args.end()) {
            user_error("rfactor: '", v.name(), "' is already a pure variable of '", f.name,
                       "'; pass a new Var");
        }
        if (!vnames.insert(v.name()).second) {
            user_error("rfactor: ", where, " names Var '", v.name(),
                       "' for two RVars; give each preserved RVar its own new Var");
        }
    }
    match_associative(f, work, &op, &term); // the term in the folded RVars

    if (!f.updates_rewritten) {
        f.original_updates = f.updates;
        f.updates_rewritten = true;
    }
    d = work;
    for (Directive *split : splits)
        split->folded_into_rdom = true;
    // The intermediate reduces over the RVars that are not preserved, with each preserved RVar
    // turned into its pure Var; this update reduces the intermediate over the preserved RVars
    // (none: the update becomes f(x) = f(x) op intermediate(x), with no RDom).
    auto rest = std::make_shared<RDomContents>();
    rest->name = d.rdom->name + "_rest";
    auto outer = std::make_shared<RDomContents>();
    outer->name = d.rdom->name;
    for (const auto &rv : d.rdom->vars) {
        if (rnames.count(rv.name)) {
            outer->vars.push_back(rv);
            outer->name += "_" + rv.name;
        } else {
            rest->vars.push_back(rv);
        }
    }

    // A default name from f and the number of rfactors before this one, not a process-wide
    // counter: the same schedule on a rebuilt pipeline must name the intermediate the same.
    std::string intm_name = name;
    if (intm_name.empty()) {
        int earlier = 0;
        for (const Directive &dir : f.directives)
            earlier += dir.primitive == primitive_name(Primitive::rfactor);
        intm_name = f.name + "_intm" + (earlier ? "_" + std::to_string(earlier + 1) : "");
    }
    Func intm(intm_name);
    intm.function()->made_by_rfactor = true;
    std::vector<Expr> intm_args(d.args), use_args(d.args);
    // A where() predicate goes with the terms: the intermediate skips the points it excludes
    // (they keep the identity), and the merge over the preserved RVars has none.
    Expr predicate = d.predicate;
    for (const auto &[r, v] : preserved) {
        intm_args.push_back(v);
        use_args.push_back(Variable::make(Int(32), r.name(), nullptr, outer));
        term = substitute(r.name(), Expr(v), term);
        if (predicate.defined()) predicate = substitute(r.name(), Expr(v), predicate);
    }
    Type t = f.output_types[0];
    intm(intm_args) = identity(op, t);
    Expr e = rebind_rvars(term, d.rdom.get(), rest);
    Expr current = intm(intm_args);
    Expr intm_value = weaken_self_calls(combine(op, current, e), intm.function().get());
    if (predicate.defined()) {
        predicate =
            weaken_self_calls(rebind_rvars(predicate, d.rdom.get(), rest), intm.function().get());
    }
    intm.function()->updates.push_back(
        Definition{intm_args, {intm_value}, rest->vars.empty() ? nullptr : rest, predicate});

    Expr self_call = Call::make(t, f.name, d.args, Call::Func, func, 0);
    const std::string merge = op == "fma" ? "+" : op;
    d.values = {weaken_self_calls(combine(merge, self_call, intm(use_args)), func.get())};
    d.rdom = outer->vars.empty() ? nullptr : outer;
    d.predicate = Expr();

    std::vector<VarOrRVar> vars;
    for (const auto &[r, v] : preserved) {
        vars.emplace_back(r);
        vars.emplace_back(v);
    }
    record(Primitive::rfactor, vars, {}, "", intm.name());
    return intm;
}

// The schedule of the pure definition, forwarded to its Stage.
Func &Func::split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner, int factor,
                  TailStrategy tail) {
    Stage(contents, 0).split(old, outer, inner, factor, tail);
    return *this;
}

Func &Func::fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused) {
    Stage(contents, 0).fuse(inner, outer, fused);
    return *this;
}

Func &Func::reorder(const std::vector<VarOrRVar> &vars) {
    Stage(contents, 0).reorder(vars);
    return *this;
}

Func &Func::tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
                 const VarOrRVar &xi, const VarOrRVar &yi, int xfactor, int yfactor,
                 TailStrategy tail) {
    Stage(contents, 0).tile(x, y, xo, yo, xi, yi, xfactor, yfactor, tail);
    return *this;
}

Func &Func::tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xi, const VarOrRVar &yi,
                 int xfactor, int yfactor, TailStrategy tail) {
    Stage(contents, 0).tile(x, y, xi, yi, xfactor, yfactor, tail);
    return *this;
}

Func &Func::tile(const std::vector<VarOrRVar> &vars, const std::vector<VarOrRVar> &outers,
                 const std::vector<VarOrRVar> &inners, const std::vector<int> &factors,
                 TailStrategy tail) {
    Stage(contents, 0).tile(vars, outers, inners, factors, tail);
    return *this;
}

Func &Func::vectorize(const VarOrRVar &var) {
    Stage(contents, 0).vectorize(var);
    return *this;
}

Func &Func::vectorize(const VarOrRVar &var, int factor, TailStrategy tail) {
    Stage(contents, 0).vectorize(var, factor, tail);
    return *this;
}

Func &Func::unroll(const VarOrRVar &var) {
    Stage(contents, 0).unroll(var);
    return *this;
}

Func &Func::unroll(const VarOrRVar &var, int factor, TailStrategy tail) {
    Stage(contents, 0).unroll(var, factor, tail);
    return *this;
}

Func &Func::parallel(const VarOrRVar &var) {
    Stage(contents, 0).parallel(var);
    return *this;
}

Func &Func::serial(const VarOrRVar &var) {
    Stage(contents, 0).serial(var);
    return *this;
}

Func &Func::gpu_blocks(const VarOrRVar &x) {
    Stage(contents, 0).gpu_blocks(x);
    return *this;
}

Func &Func::gpu_blocks(const VarOrRVar &x, const VarOrRVar &y) {
    Stage(contents, 0).gpu_blocks(x, y);
    return *this;
}

Func &Func::gpu_blocks(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z) {
    Stage(contents, 0).gpu_blocks(x, y, z);
    return *this;
}

Func &Func::gpu_threads(const VarOrRVar &x) {
    Stage(contents, 0).gpu_threads(x);
    return *this;
}

Func &Func::gpu_threads(const VarOrRVar &x, const VarOrRVar &y) {
    Stage(contents, 0).gpu_threads(x, y);
    return *this;
}

Func &Func::gpu_threads(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z) {
    Stage(contents, 0).gpu_threads(x, y, z);
    return *this;
}

Func &Func::gpu_single_thread() {
    Stage(contents, 0).gpu_single_thread();
    return *this;
}

Func &Func::prefetch(const Func &f, const VarOrRVar &at, const VarOrRVar &from, const Expr &offset,
                     PrefetchBoundStrategy strategy) {
    Stage(contents, 0).prefetch(f, at, from, offset, strategy);
    return *this;
}

Func &Func::prefetch(const ImageParam &image, const VarOrRVar &at, const VarOrRVar &from,
                     const Expr &offset, PrefetchBoundStrategy strategy) {
    Stage(contents, 0).prefetch(image, at, from, offset, strategy);
    return *this;
}

Func &Func::gpu_tile(const VarOrRVar &x, const VarOrRVar &xo, const VarOrRVar &xi, int tx,
                     TailStrategy tail) {
    Stage(contents, 0).gpu_tile(x, xo, xi, tx, tail);
    return *this;
}

Func &Func::gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo,
                     const VarOrRVar &yo, const VarOrRVar &xi, const VarOrRVar &yi, int tx, int ty,
                     TailStrategy tail) {
    Stage(contents, 0).gpu_tile(x, y, xo, yo, xi, yi, tx, ty, tail);
    return *this;
}

Func &Func::gpu_tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &z,
                     const VarOrRVar &xo, const VarOrRVar &yo, const VarOrRVar &zo,
                     const VarOrRVar &xi, const VarOrRVar &yi, const VarOrRVar &zi, int tx, int ty,
                     int tz, TailStrategy tail) {
    Stage(contents, 0).gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, tx, ty, tz, tail);
    return *this;
}

namespace {
void record_func_level(const FunctionPtr &f, Primitive primitive,
                       const std::vector<VarOrRVar> &vars, const std::vector<int64_t> &ints,
                       const std::string &option, const std::string &target) {
    internal_assert(primitive_spec(primitive).on == PrimitiveSpec::On::Func,
                    primitive_name(primitive), " is recorded on a stage, not on the Func");
    record_directive(*f, 0, primitive, vars, ints, option, target);
}
} // namespace

Func &Func::compute_at(const Func &consumer, const VarOrRVar &var) {
    if (consumer.name() == name()) {
        user_error("compute_at: '", name(), "' cannot be computed at one of its own loops");
    }
    record_func_level(contents, Primitive::compute_at, {var}, {}, "", consumer.name());
    return *this;
}

Func &Func::store_at(const Func &consumer, const VarOrRVar &var) {
    if (consumer.name() == name()) {
        user_error("store_at: '", name(), "' cannot be stored at one of its own loops");
    }
    record_func_level(contents, Primitive::store_at, {var}, {}, "", consumer.name());
    return *this;
}

Func &Func::compute_root() {
    record_func_level(contents, Primitive::compute_root, {}, {}, "", "");
    return *this;
}

Func &Func::store_root() {
    record_func_level(contents, Primitive::store_root, {}, {}, "", "");
    return *this;
}

Func &Func::compute_inline() {
    record_func_level(contents, Primitive::compute_inline, {}, {}, "", "");
    return *this;
}

Func &Func::reorder_storage(const std::vector<Var> &vars) {
    std::vector<VarOrRVar> names(vars.begin(), vars.end());
    for (const Var &v : vars) {
        if (std::find(args().begin(), args().end(), v.name()) == args().end()) {
            std::string legal;
            for (const std::string &a : args())
                legal += (legal.empty() ? "" : ", ") + a;
            user_error("reorder_storage: '", v.name(), "' is not a dimension of '", name(),
                       "'; its dimensions are ", legal);
        }
    }
    record_func_level(contents, Primitive::reorder_storage, names, {}, "", "");
    return *this;
}

namespace {

/// CompileError "<what>: 'v' is not a dimension of 'f'; its dimensions are ..." unless it is one.
void check_dimension(const char *what, const Func &f, const Var &var) {
    if (std::find(f.args().begin(), f.args().end(), var.name()) != f.args().end()) return;
    std::string legal;
    for (const std::string &a : f.args())
        legal += (legal.empty() ? "" : ", ") + a;
    user_error(what, ": '", var.name(), "' is not a dimension of '", f.name(),
               "'; its dimensions are ", legal);
}

} // namespace

Func &Func::bound(const Var &var, int min, int extent) {
    check_dimension("bound", *this, var);
    if (extent < 0) {
        user_error("bound: extent of '", var.name(), "' in '", name(), "' must be >= 0, got ",
                   extent);
    }
    record_func_level(contents, Primitive::bound, {var}, {min, extent}, "", "");
    return *this;
}

Func &Func::set_estimate(const Var &var, int64_t min, int64_t extent) {
    check_dimension("set_estimate", *this, var);
    if (extent < 1 || extent > INT32_MAX || min < INT32_MIN || min > INT32_MAX - extent) {
        user_error("set_estimate: the estimate of '", var.name(), "' in '", name(), "' is min ",
                   min, " extent ", extent,
                   "; give an extent of at least 1 and a region inside "
                   "32-bit coordinates");
    }
    contents->estimates[var.name()] = {min, extent};
    return *this;
}

Func &Func::set_estimates(const std::vector<std::pair<int64_t, int64_t>> &region) {
    if (region.size() != args().size()) {
        user_error("set_estimates: '", name(), "' has ", args().size(), " dimensions, but ",
                   region.size(), " estimates were given; give one {min, extent} per dimension");
    }
    for (size_t d = 0; d < region.size(); d++)
        set_estimate(Var(args()[d]), region[d].first, region[d].second);
    return *this;
}

std::vector<std::optional<std::pair<int64_t, int64_t>>> Func::estimates() const {
    std::vector<std::optional<std::pair<int64_t, int64_t>>> r;
    for (const std::string &a : args()) {
        auto it = contents->estimates.find(a);
        r.push_back(it == contents->estimates.end()
                        ? std::nullopt
                        : std::optional<std::pair<int64_t, int64_t>>(it->second));
    }
    return r;
}

Func &Func::store_in(MemoryType memory_type) {
    record_func_level(contents, Primitive::store_in, {}, {}, memory_type_name(memory_type), "");
    return *this;
}

Func &Func::store_nontemporal() {
    record_func_level(contents, Primitive::store_nontemporal, {}, {}, "", "");
    return *this;
}

} // namespace kiln
