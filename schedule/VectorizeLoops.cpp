#include "schedule/VectorizeLoops.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>

#include "lang/Error.h"
#include "lang/IREquality.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"

namespace kiln {

namespace {

constexpr int min_lanes = 2;
constexpr int max_lanes = 64;

class FindsNode : public IRVisitor {
public:
    bool vector = false, load = false;

protected:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        load = true;
        IRVisitor::visit(op);
    }
    void visit(const Ramp *) override { vector = true; }
    void visit(const Broadcast *) override { vector = true; }
    void visit(const Variable *op) override { vector = vector || op->type.is_vector(); }
};

bool contains_vectors(const Stmt &s) {
    FindsNode f;
    f.include(s);
    return f.vector;
}

bool contains_load(const Expr &e) {
    FindsNode f;
    f.include(e);
    return f.load;
}

Expr broadcast_to(const Expr &e, int lanes) {
    if (e.type().lanes == lanes) return e;
    internal_assert(e.type().is_scalar(), "vectorize: cannot widen ", e, " to ", lanes, " lanes");
    return Broadcast::make(e, lanes);
}

// The conjunction of two predicates, either of which may be undefined (all lanes on).
Expr and_predicates(const Expr &a, const Expr &b) {
    if (!a.defined()) return b;
    if (!b.defined()) return a;
    int lanes = std::max<int>(a.type().lanes, b.type().lanes);
    return And::make(broadcast_to(a, lanes), broadcast_to(b, lanes));
}

// The condition without `likely` hints, which only mean something to loop partitioning.
Expr strip_likely(const Expr &e) {
    if (const auto *c = e.as<Call>(); c && c->call_type == Call::Intrinsic &&
                                      c->name == intrinsic::likely && c->args.size() == 1) {
        return strip_likely(c->args[0]);
    }
    if (const auto *a = e.as<And>()) return And::make(strip_likely(a->a), strip_likely(a->b));
    return e;
}

bool is_likely(const Expr &e) {
    const auto *c = e.as<Call>();
    return c && c->call_type == Call::Intrinsic && c->name == intrinsic::likely;
}

void split_conjunction(const Expr &e, std::vector<Expr> &terms) {
    if (const auto *a = e.as<And>()) {
        split_conjunction(a->a, terms);
        split_conjunction(a->b, terms);
        return;
    }
    terms.push_back(e);
}

// Whether the integer expression e is c * var + (something free of var) for a constant c.
bool is_linear_in(const Expr &e, const std::string &var) {
    if (!expr_uses_var(e, var)) return true;
    if (e.type() != Int(32) || contains_load(e)) return false;
    Expr v = Variable::make(Int(32), var);
    auto c = as_const_int(simplify(substitute(var, v + 1, e) - e));
    if (!c) return false;
    return !expr_uses_var(simplify(e - v * Expr(int(*c))), var);
}

// ---- Widening -----------------------------------------------------------------------------------

// Rewrites the body of a vectorized loop over `lanes` lanes. Sets `failed` (and stops) when some
// construct cannot be widened without changing the meaning of the loop.
class Widen : public IRMutator {
public:
    Widen(const std::string &var, const Expr &min, int lanes) : var(var), lanes(lanes) {
        replacements[var] = Ramp::make(min, make_one(min.type()), lanes);
        first_lane = min;
        last_lane = simplify(min + Expr(lanes - 1));
    }

    bool failed = false;
    std::string reason;

    Expr mutate(const Expr &e) override { return failed ? e : IRMutator::mutate(e); }
    Stmt mutate(const Stmt &s) override { return failed ? s : IRMutator::mutate(s); }

protected:
    using IRMutator::visit;

    Expr visit(const Variable *op) override {
        auto it = replacements.find(op->name);
        return it == replacements.end() ? Expr(op) : it->second;
    }

    template <typename Op>
    Expr fold(Expr a, Expr b) {
        const auto *ra = a.as<Ramp>(), *rb = b.as<Ramp>();
        const auto *ba = a.as<Broadcast>(), *bb = b.as<Broadcast>();
        if (ba && bb) return Broadcast::make(simplify(Op::make(ba->value, bb->value)), lanes);
        // Affine index arithmetic stays a Ramp, so that codegen sees dense and strided accesses.
        auto ramp = [&](const Expr &base, const Expr &stride) {
            Expr s = simplify(stride);
            if (is_const_zero(s)) return Broadcast::make(simplify(base), lanes);
            return Ramp::make(simplify(base), s, lanes);
        };
        if constexpr (std::is_same_v<Op, Add>) {
            if (ra && bb) return ramp(ra->base + bb->value, ra->stride);
            if (ba && rb) return ramp(ba->value + rb->base, rb->stride);
            if (ra && rb) return ramp(ra->base + rb->base, ra->stride + rb->stride);
        }
        if constexpr (std::is_same_v<Op, Sub>) {
            if (ra && bb) return ramp(ra->base - bb->value, ra->stride);
            if (ba && rb)
                return ramp(ba->value - rb->base, make_zero(rb->stride.type()) - rb->stride);
            if (ra && rb) return ramp(ra->base - rb->base, ra->stride - rb->stride);
        }
        if constexpr (std::is_same_v<Op, Mul>) {
            if (ra && bb) return ramp(ra->base * bb->value, ra->stride * bb->value);
            if (ba && rb) return ramp(ba->value * rb->base, ba->value * rb->stride);
        }
        return Op::make(a, b);
    }

    template <typename Op>
    Expr widen_binary(const Op *op) {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);
        int l = std::max<int>(a.type().lanes, b.type().lanes);
        if (l == 1) return Op::make(a, b);
        return fold<Op>(broadcast_to(a, l), broadcast_to(b, l));
    }

#define KILN_WIDEN_BINARY(Name)                                                                    \
    Expr visit(const Name *op) override {                                                          \
        return widen_binary(op);                                                                   \
    }
    KILN_WIDEN_BINARY(Add)
    KILN_WIDEN_BINARY(Sub)
    KILN_WIDEN_BINARY(Mul)
    KILN_WIDEN_BINARY(Div)
    KILN_WIDEN_BINARY(Mod)
    KILN_WIDEN_BINARY(Min)
    KILN_WIDEN_BINARY(Max)
    KILN_WIDEN_BINARY(EQ)
    KILN_WIDEN_BINARY(NE)
    KILN_WIDEN_BINARY(LT)
    KILN_WIDEN_BINARY(LE)
    KILN_WIDEN_BINARY(GT)
    KILN_WIDEN_BINARY(GE)
    KILN_WIDEN_BINARY(And)
    KILN_WIDEN_BINARY(Or)
#undef KILN_WIDEN_BINARY

    Expr visit(const Cast *op) override {
        Expr v = mutate(op->value);
        if (v.same_as(op->value)) return Expr(op);
        if (const auto *b = v.as<Broadcast>()) {
            return Broadcast::make(Cast::make(op->type, b->value), b->lanes);
        }
        return Cast::make(op->type.with_lanes(v.type().lanes), v);
    }

    Expr visit(const Select *op) override {
        Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
        if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
            return Expr(op);
        }
        int l = std::max<int>({c.type().lanes, t.type().lanes, f.type().lanes});
        // A scalar condition may pick between vectors; only a vector one needs widening.
        if (c.type().is_vector()) c = broadcast_to(c, l);
        return Select::make(c, broadcast_to(t, l), broadcast_to(f, l));
    }

    Expr visit(const Load *op) override {
        Expr index = mutate(op->index), pred = mutate(op->predicate);
        if (!predicate.defined() && index.same_as(op->index) && pred.same_as(op->predicate)) {
            return Expr(op);
        }
        // Under a vector condition every load is masked, also one at a lane-invariant index: the
        // serial loop may never have read it.
        int l = predicate.defined() ? lanes : index.type().lanes;
        if (pred.defined()) l = std::max<int>(l, pred.type().lanes);
        if (l == 1) return Load::make(op->type, op->name, index, pred);
        Expr p = and_predicates(pred.defined() ? broadcast_to(pred, l) : pred, predicate);
        return Load::make(op->type.with_lanes(l), op->name, broadcast_to(index, l), p);
    }

    Expr visit(const Ramp *op) override {
        return fail(Expr(op), "it is already a vector");
    }
    Expr visit(const Broadcast *op) override {
        return fail(Expr(op), "it is already a vector");
    }

    Expr visit(const Let *op) override {
        Expr value = mutate(op->value);
        Binding b = bind(op->name, op->value, value);
        Expr body = mutate(op->body);
        unbind(op->name, b);
        if (value.same_as(op->value) && body.same_as(op->body)) return Expr(op);
        return Let::make(b.name, b.value, body);
    }

    Expr visit(const Call *op) override {
        bool changed = false;
        std::vector<Expr> args = mutate_exprs(op->args, &changed);
        if (!changed) return Expr(op);
        int l = 1;
        for (const Expr &a : args)
            l = std::max<int>(l, a.type().lanes);
        if (l == 1) {
            return Call::make(op->type, op->name, args, op->call_type, op->func, op->value_index,
                              op->param, op->buffer);
        }
        if (op->call_type == Call::Func || op->call_type == Call::Image) {
            return fail(Expr(op),
                        detail::str("the call to '", op->name, "' has a vector argument"));
        }
        bool all_broadcast = true;
        for (Expr &a : args) {
            a = broadcast_to(a, l);
            all_broadcast = all_broadcast && a.as<Broadcast>();
        }
        if (all_broadcast) {
            std::vector<Expr> scalars;
            for (const Expr &a : args)
                scalars.push_back(a.as<Broadcast>()->value);
            return Broadcast::make(Call::make(op->type, op->name, scalars, op->call_type), l);
        }
        return Call::make(op->type.with_lanes(l), op->name, args, op->call_type);
    }

    Stmt visit(const LetStmt *op) override {
        Expr value = mutate(op->value);
        Binding b = bind(op->name, op->value, value);
        Stmt body = mutate(op->body);
        unbind(op->name, b);
        if (value.same_as(op->value) && body.same_as(op->body)) return Stmt(op);
        return LetStmt::make(b.name, b.value, body);
    }

    Stmt visit(const Store *op) override {
        Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
        bool vector = value.type().is_vector() || index.type().is_vector() ||
                      (pred.defined() && pred.type().is_vector()) || predicate.defined();
        if (!vector) {
            if (value.same_as(op->value) && index.same_as(op->index) &&
                pred.same_as(op->predicate)) {
                return Stmt(op);
            }
            return Store::make(op->name, value, index, pred);
        }
        if (index.type().is_scalar()) {
            return fail(Stmt(op), detail::str("it stores a vector value to the single address '",
                                              op->name, "[", index, "]' (a reduction)"));
        }
        Expr p = and_predicates(pred.defined() ? broadcast_to(pred, lanes) : pred, predicate);
        return Store::make(op->name, broadcast_to(value, lanes), index, p);
    }

    Stmt visit(const For *op) override {
        if (op->for_type != ForType::Serial) {
            return fail(Stmt(op), detail::str("it contains the ", for_type_name(op->for_type),
                                              " loop '", op->name, "'"));
        }
        if (predicate.defined()) {
            return fail(Stmt(op),
                        detail::str("the loop '", op->name,
                                    "' runs under a condition that differs between lanes"));
        }
        Expr min = mutate(op->min), extent = mutate(op->extent);
        if (min.type().is_vector() || extent.type().is_vector()) {
            return fail(Stmt(op), detail::str("the bounds of the inner loop '", op->name,
                                              "' differ between lanes"));
        }
        Stmt body = mutate(op->body);
        if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) {
            return Stmt(op);
        }
        return For::make(op->name, min, extent, op->for_type, body);
    }

    Stmt visit(const IfThenElse *op) override {
        Expr c = mutate(op->condition);
        if (c.type().is_scalar() && !predicate.defined()) return IRMutator::visit(op);
        Expr outer = predicate;
        Expr cond = broadcast_to(strip_likely(c), lanes);
        // The branches may store to what the condition loads, so it is computed once, first.
        std::string cond_name;
        if (contains_load(cond)) {
            cond_name = var + ".if" + std::to_string(if_count++);
            cond = Variable::make(cond.type(), cond_name);
        }
        Stmt then_case = with_predicate(and_predicates(outer, cond), op->then_case);
        Stmt else_case;
        if (op->else_case.defined()) {
            else_case = with_predicate(and_predicates(outer, Not::make(cond)), op->else_case);
        }
        Stmt result = Block::make(then_case, else_case);
        if (is_likely(op->condition)) {
            if (Expr all = all_lanes_pass(op->condition); all.defined()) {
                Stmt fast = with_predicate(outer, op->then_case);
                result = IfThenElse::make(likely(all), fast, result);
            }
        }
        if (!cond_name.empty()) {
            result = LetStmt::make(cond_name, broadcast_to(strip_likely(c), lanes), result);
        }
        return failed ? Stmt(op) : result;
    }

    Stmt visit(const AssertStmt *op) override {
        Expr c = mutate(op->condition);
        bool changed = !c.same_as(op->condition), vector = c.type().is_vector();
        std::vector<Expr> args = mutate_exprs(op->args, &changed);
        for (const Expr &e : args)
            vector = vector || e.type().is_vector();
        // An assert has no lanes: it would need all lanes to pass, and under a vector condition
        // it would fire for lanes that never reached it.
        if (vector || predicate.defined()) {
            return fail(Stmt(op), "it contains an assertion that differs between lanes");
        }
        if (!changed) return Stmt(op);
        return AssertStmt::make(c, op->message, args, op->error_code);
    }

    Stmt visit(const Allocate *op) override {
        return fail(Stmt(op), detail::str("it contains the allocation '", op->name, "'"));
    }
    Stmt visit(const Free *op) override {
        return fail(Stmt(op), detail::str("it frees '", op->name, "'"));
    }
    Stmt visit(const Provide *op) override {
        return fail(Stmt(op), "it is not flattened");
    }
    Stmt visit(const Realize *op) override {
        return fail(Stmt(op), "it is not flattened");
    }

private:
    std::string var;
    int lanes;
    Expr first_lane, last_lane;
    std::map<std::string, Expr> replacements; // variables that became vectors
    std::map<std::string, Expr> scalar_lets;  // lets inside the loop, in terms of `var`
    Expr predicate;                           // lanes on in the current region, if any
    int if_count = 0;

    template <typename T>
    T fail(T original, const std::string &why) {
        if (!failed) reason = why;
        failed = true;
        return original;
    }

    struct Binding {
        std::string name;
        Expr value;
        std::optional<Expr> previous_replacement, previous_scalar;
    };

    // A let whose value became a ramp or broadcast keeps its scalar name for the first lane, so
    // that uses still see a dense ramp; any other vector value is rebound under a new name.
    Binding bind(const std::string &name, const Expr &original, const Expr &value) {
        Binding b{name, value, std::nullopt, std::nullopt};
        if (auto it = replacements.find(name); it != replacements.end()) {
            b.previous_replacement = it->second;
            replacements.erase(it);
        }
        if (auto it = scalar_lets.find(name); it != scalar_lets.end())
            b.previous_scalar = it->second;
        scalar_lets[name] = substitute(scalar_lets, original);
        if (value.type().is_scalar()) return b;
        if (const auto *r = value.as<Ramp>()) {
            b.value = r->base;
            replacements[name] =
                Ramp::make(Variable::make(r->base.type(), name), r->stride, r->lanes);
        } else if (const auto *br = value.as<Broadcast>()) {
            b.value = br->value;
            replacements[name] = Broadcast::make(Variable::make(br->value.type(), name), lanes);
        } else {
            b.name = name + ".vec";
            replacements[name] = Variable::make(value.type(), b.name);
        }
        return b;
    }

    void unbind(const std::string &name, const Binding &b) {
        replacements.erase(name);
        scalar_lets.erase(name);
        if (b.previous_replacement) replacements[name] = *b.previous_replacement;
        if (b.previous_scalar) scalar_lets[name] = *b.previous_scalar;
    }

    Stmt with_predicate(const Expr &p, const Stmt &s) {
        Expr saved = predicate;
        predicate = p;
        Stmt r = mutate(s);
        predicate = saved;
        return r;
    }

    // A scalar condition true exactly when `cond` holds on every lane, when cond is a
    // conjunction of comparisons linear in the loop variable: each holds on an interval of lanes,
    // so testing it on the lane at its harder end is enough. Undefined otherwise.
    Expr all_lanes_pass(const Expr &cond) {
        Expr expanded = substitute(scalar_lets, strip_likely(cond));
        std::vector<Expr> terms;
        split_conjunction(expanded, terms);
        Expr v = Variable::make(Int(32), var);
        Expr all;
        for (const Expr &t : terms) {
            Expr a, b;
            bool upper = true; // a < b or a <= b: harder for larger a - b
            if (const auto *op = t.as<LT>()) a = op->a, b = op->b;
            if (const auto *op = t.as<LE>()) a = op->a, b = op->b;
            if (const auto *op = t.as<GT>()) a = op->a, b = op->b, upper = false;
            if (const auto *op = t.as<GE>()) a = op->a, b = op->b, upper = false;
            Expr lane = first_lane;
            if (expr_uses_var(t, var)) {
                if (!a.defined() || !is_linear_in(a - b, var)) return Expr();
                Expr d = a - b;
                auto c = as_const_int(simplify(substitute(var, v + 1, d) - d));
                lane = (*c > 0) == upper ? last_lane : first_lane;
            }
            Expr at_lane = substitute(var, lane, t);
            all = all.defined() ? And::make(all, at_lane) : at_lane;
        }
        return simplify(all);
    }
};

// ---- Memory dependences -------------------------------------------------------------------------

// Running the iterations of a loop as lanes reorders their memory accesses: every statement runs
// for all lanes before the next statement starts. That is only the serial result when no lane
// touches an element another lane stores to. We prove the simple sufficient form: each buffer
// stored in the loop is accessed at one index (after expanding lets), a function of the loop
// variable and of values fixed during the loop, that differs between lanes. A buffer that is only
// written, by a single store, may be written at colliding indices: the last lane still wins.
class MemoryAccesses : public IRVisitor {
public:
    struct Access {
        std::string buffer;
        Expr index;
        bool is_store;
    };
    std::vector<Access> accesses;
    std::set<std::string> inner_loop_vars;

protected:
    using IRVisitor::visit;
    void visit(const Let *op) override { scoped(op->name, op->value, op->body); }
    void visit(const LetStmt *op) override { scoped(op->name, op->value, op->body); }
    void visit(const For *op) override {
        inner_loop_vars.insert(op->name);
        include(op->min);
        include(op->extent);
        // The loop variable hides any let of the same name.
        scoped(op->name, Expr(), op->body);
    }
    void visit(const Load *op) override {
        accesses.push_back({op->name, expand(op->index), false});
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        accesses.push_back({op->name, expand(op->index), true});
        IRVisitor::visit(op);
    }

private:
    std::map<std::string, Expr> lets;
    Expr expand(const Expr &e) { return substitute(lets, e); }

    // Visits body with name bound to value (or to nothing, for a loop variable).
    template <typename Body>
    void scoped(const std::string &name, const Expr &value, const Body &body) {
        include(value);
        ScopedBinding<Expr> binding(lets, name,
                                    value.defined() ? std::optional(expand(value)) : std::nullopt);
        include(body);
    }
};

// The step of an index between consecutive values of var, when the index is affine in var: the
// stride of its widening to two lanes starting at var.
Expr step_of(const std::string &var, const Expr &index) {
    Widen widen(var, Variable::make(Int(32), var), 2);
    Expr wide = widen.mutate(index);
    if (widen.failed) return Expr();
    if (wide.type().is_scalar() || wide.as<Broadcast>()) return make_zero(Int(32));
    if (const auto *r = wide.as<Ramp>()) return simplify(r->stride);
    return Expr();
}

// Whether the iterations of a loop may run as lanes: `unsafe` says why not; otherwise they may
// when every one of `conditions` (scalar, loop-invariant) holds at run time.
struct LaneIndependence {
    std::optional<std::string> unsafe;
    std::vector<Expr> conditions;
};

LaneIndependence lane_independence(const std::string &var, const Stmt &body) {
    MemoryAccesses m;
    m.include(body);
    std::map<std::string, std::vector<const MemoryAccesses::Access *>> by_buffer;
    std::set<std::string> stored;
    for (const auto &a : m.accesses) {
        by_buffer[a.buffer].push_back(&a);
        if (a.is_store) stored.insert(a.buffer);
    }
    LaneIndependence result;
    auto unsafe = [&](std::string why) {
        result.unsafe = std::move(why);
        return result;
    };
    for (const std::string &b : stored) {
        const auto &list = by_buffer[b];
        int stores = 0, loads = 0;
        for (const auto *a : list)
            (a->is_store ? stores : loads)++;
        bool exclusive = loads > 0 || stores > 1;
        Expr first = simplify(list.front()->index);
        for (const auto *a : list) {
            Expr index = simplify(a->index);
            if (!expr_uses_var(index, var)) {
                return unsafe(detail::str("it ", a->is_store ? "stores to" : "loads from", " '", b,
                                          "' at index ", index,
                                          ", which is the same for every lane (a reduction)"));
            }
            if (expr_uses_vars(index, m.inner_loop_vars)) {
                return unsafe(detail::str("it accesses '", b, "' at index ", index,
                                          ", which depends on an inner loop"));
            }
            if (exclusive && !equal(index, first)) {
                return unsafe(detail::str("it accesses '", b, "' at indices ", first, " and ",
                                          index,
                                          ", which may be the same element for different lanes"));
            }
        }
        if (!exclusive) continue;
        // The index is base + step * var when the step does not depend on var; lanes then touch
        // distinct elements exactly when the step is not zero. A symbolic step (a buffer stride)
        // is tested at run time.
        Expr step = step_of(var, first);
        if (!step.defined()) {
            // Not affine in var: fall through to unsafe.
        } else if (auto c = as_const_int(step)) {
            if (*c != 0) continue;
        } else if (!expr_uses_var(step, var) && !contains_load(step)) {
            result.conditions.push_back(step != 0);
            continue;
        }
        return unsafe(detail::str("it reads and writes '", b, "' at index ", first,
                                  ", which may be the same element for different lanes"));
    }
    return result;
}

class VectorizeLoops : public LetScopedMutator {
protected:
    using LetScopedMutator::visit;

    Stmt visit(const For *op) override {
        Stmt body = mutate(op->body);
        if (op->for_type != ForType::Vectorized) {
            if (body.same_as(op->body)) return Stmt(op);
            return For::make(op->name, op->min, op->extent, op->for_type, body);
        }
        auto extent = as_const_int(simplify(lets.apply(op->extent)));
        if (!extent) {
            user_error("vectorize: loop '", op->name, "' has extent ", op->extent,
                       ", which is not a constant; split it by a constant factor first and "
                       "vectorize the inner loop");
        }
        if (*extent < min_lanes || *extent > max_lanes) {
            user_error("vectorize: loop '", op->name, "' has extent ", *extent,
                       ", outside the supported vector widths ", min_lanes, " to ", max_lanes,
                       "; split it by a factor in that range and vectorize the inner loop");
        }
        LaneIndependence independence;
        if (contains_vectors(body)) {
            independence.unsafe = "its body is already vectorized (nested vectorized loops)";
        } else {
            independence = lane_independence(op->name, body);
        }
        Stmt serial = For::make(op->name, op->min, op->extent, ForType::Serial, body);
        std::optional<std::string> why = independence.unsafe;
        if (!why) {
            Widen widen(op->name, op->min, int(*extent));
            Stmt vector_body = widen.mutate(body);
            if (!widen.failed) {
                if (independence.conditions.empty()) return vector_body;
                Expr all = independence.conditions[0];
                for (size_t i = 1; i < independence.conditions.size(); i++) {
                    all = all && independence.conditions[i];
                }
                return IfThenElse::make(simplify(all), vector_body, serial);
            }
            why = widen.reason;
        }
        if (const char *debug = std::getenv("KILN_DEBUG"); debug && std::atoi(debug) >= 1) {
            std::cerr << "vectorize: loop '" << op->name << "' stays serial because " << *why
                      << "\n";
        }
        return serial;
    }
};

} // namespace

Stmt vectorize_loops(const Stmt &s) {
    return VectorizeLoops().mutate(s);
}

} // namespace kiln
