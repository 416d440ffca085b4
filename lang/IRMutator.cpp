#include "lang/IRMutator.h"

#include "lang/Error.h"

namespace kiln {

Expr IRMutator::mutate(const Expr &e) {
    if (!e.defined()) return e;
    switch (e->node_type) {
#define EXPR_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return visit(static_cast<const Name *>(e.get()));
#include "lang/IRNodes.def"
    default:
        internal_error("statement node in an expression");
    }
}

Stmt IRMutator::mutate(const Stmt &s) {
    if (!s.defined()) return s;
    switch (s->node_type) {
#define STMT_NODE(Name)                                                                            \
    case IRNodeType::Name:                                                                         \
        return visit(static_cast<const Name *>(s.get()));
#include "lang/IRNodes.def"
    default:
        internal_error("expression node in a statement");
    }
}

std::vector<Expr> IRMutator::mutate_exprs(const std::vector<Expr> &v, bool *changed) {
    std::vector<Expr> out;
    out.reserve(v.size());
    for (const Expr &e : v) {
        out.push_back(mutate(e));
        if (!out.back().same_as(e)) *changed = true;
    }
    return out;
}

Expr IRMutator::visit(const IntImm *op) {
    return Expr(op);
}
Expr IRMutator::visit(const UIntImm *op) {
    return Expr(op);
}
Expr IRMutator::visit(const FloatImm *op) {
    return Expr(op);
}
Expr IRMutator::visit(const Variable *op) {
    return Expr(op);
}

Expr IRMutator::visit(const Cast *op) {
    Expr v = mutate(op->value);
    if (v.same_as(op->value)) return Expr(op);
    return Cast::make(op->type, v);
}

#define KILN_MUTATE_BINARY(Name)                                                                   \
    Expr IRMutator::visit(const Name *op) {                                                        \
        Expr a = mutate(op->a), b = mutate(op->b);                                                 \
        if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);                                 \
        return Name::make(a, b);                                                                   \
    }
KILN_MUTATE_BINARY(Add)
KILN_MUTATE_BINARY(Sub)
KILN_MUTATE_BINARY(Mul)
KILN_MUTATE_BINARY(Div)
KILN_MUTATE_BINARY(Mod)
KILN_MUTATE_BINARY(Min)
KILN_MUTATE_BINARY(Max)
KILN_MUTATE_BINARY(EQ)
KILN_MUTATE_BINARY(NE)
KILN_MUTATE_BINARY(LT)
KILN_MUTATE_BINARY(LE)
KILN_MUTATE_BINARY(GT)
KILN_MUTATE_BINARY(GE)
KILN_MUTATE_BINARY(And)
KILN_MUTATE_BINARY(Or)
#undef KILN_MUTATE_BINARY

Expr IRMutator::visit(const Not *op) {
    Expr a = mutate(op->a);
    if (a.same_as(op->a)) return Expr(op);
    return Not::make(a);
}

Expr IRMutator::visit(const Select *op) {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
        return Expr(op);
    }
    return Select::make(c, t, f);
}

Expr IRMutator::visit(const Load *op) {
    Expr i = mutate(op->index), p = mutate(op->predicate);
    if (i.same_as(op->index) && p.same_as(op->predicate)) return Expr(op);
    return Load::make(op->type.with_lanes(i.type().lanes), op->name, i, p);
}

Expr IRMutator::visit(const Ramp *op) {
    Expr b = mutate(op->base), s = mutate(op->stride);
    if (b.same_as(op->base) && s.same_as(op->stride)) return Expr(op);
    return Ramp::make(b, s, op->lanes);
}

Expr IRMutator::visit(const Broadcast *op) {
    Expr v = mutate(op->value);
    if (v.same_as(op->value)) return Expr(op);
    return Broadcast::make(v, op->lanes);
}

Expr IRMutator::visit(const Let *op) {
    Expr v = mutate(op->value), b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
    return Let::make(op->name, v, b);
}

Expr IRMutator::visit(const Call *op) {
    bool changed = false;
    std::vector<Expr> args = mutate_exprs(op->args, &changed);
    if (!changed) return Expr(op);
    int lanes = 1;
    for (const Expr &a : args)
        lanes = std::max<int>(lanes, a.type().lanes);
    Type t = op->call_type == Call::Func || op->call_type == Call::Image
                 ? op->type
                 : op->type.with_lanes(std::max<int>(lanes, op->type.lanes));
    return Call::make(t, op->name, std::move(args), op->call_type, op->func, op->value_index,
                      op->param, op->buffer);
}

Stmt IRMutator::visit(const LetStmt *op) {
    Expr v = mutate(op->value);
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
    return LetStmt::make(op->name, v, b);
}

Stmt IRMutator::visit(const AssertStmt *op) {
    Expr c = mutate(op->condition);
    bool changed = !c.same_as(op->condition);
    std::vector<Expr> args = mutate_exprs(op->args, &changed);
    if (!changed) return Stmt(op);
    return AssertStmt::make(c, op->message, std::move(args), op->error_code);
}

Stmt IRMutator::visit(const For *op) {
    Expr m = mutate(op->min), e = mutate(op->extent);
    Stmt b = mutate(op->body);
    if (m.same_as(op->min) && e.same_as(op->extent) && b.same_as(op->body)) return Stmt(op);
    return For::make(op->name, m, e, op->for_type, b);
}

Stmt IRMutator::visit(const Provide *op) {
    bool changed = false;
    std::vector<Expr> values = mutate_exprs(op->values, &changed);
    std::vector<Expr> args = mutate_exprs(op->args, &changed);
    if (!changed) return Stmt(op);
    return Provide::make(op->name, std::move(values), std::move(args));
}

Stmt IRMutator::visit(const Realize *op) {
    bool changed = false;
    std::vector<Range> bounds;
    for (const Range &r : op->bounds) {
        Expr m = mutate(r.min), e = mutate(r.extent);
        changed |= !m.same_as(r.min) || !e.same_as(r.extent);
        bounds.emplace_back(m, e);
    }
    Expr c = mutate(op->condition);
    Stmt b = mutate(op->body);
    if (!changed && c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
    return Realize::make(op->name, op->types, op->memory_type, std::move(bounds), c, b);
}

Stmt IRMutator::visit(const Store *op) {
    Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
    if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return Stmt(op);
    return Store::make(op->name, v, i, p);
}

Stmt IRMutator::visit(const Allocate *op) {
    bool changed = false;
    std::vector<Expr> extents = mutate_exprs(op->extents, &changed);
    Expr c = mutate(op->condition);
    Stmt b = mutate(op->body);
    if (!changed && c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
    return Allocate::make(op->name, op->type, op->memory_type, std::move(extents), c, b);
}

Stmt IRMutator::visit(const Free *op) {
    return Stmt(op);
}

Stmt IRMutator::visit(const Block *op) {
    Stmt f = mutate(op->first), r = mutate(op->rest);
    if (f.same_as(op->first) && r.same_as(op->rest)) return Stmt(op);
    return Block::make(f, r);
}

Stmt IRMutator::visit(const IfThenElse *op) {
    Expr c = mutate(op->condition);
    Stmt t = mutate(op->then_case), e = mutate(op->else_case);
    if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) {
        return Stmt(op);
    }
    return IfThenElse::make(c, t, e);
}

Stmt IRMutator::visit(const Evaluate *op) {
    Expr v = mutate(op->value);
    if (v.same_as(op->value)) return Stmt(op);
    return Evaluate::make(v);
}

Stmt IRMutator::visit(const ProducerConsumer *op) {
    Stmt b = mutate(op->body);
    if (b.same_as(op->body)) return Stmt(op);
    return ProducerConsumer::make(op->name, op->is_producer, b);
}

namespace {
class Substitute : public IRMutator {
public:
    Substitute(const std::string &n, const Expr &r) : name(n), replacement(r) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override { return op->name == name ? replacement : Expr(op); }
    Expr visit(const Let *op) override {
        Expr v = mutate(op->value);
        Expr b = op->name == name ? op->body : mutate(op->body);
        if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
        return Let::make(op->name, v, b);
    }
    Stmt visit(const LetStmt *op) override {
        Expr v = mutate(op->value);
        Stmt b = op->name == name ? op->body : mutate(op->body);
        if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
        return LetStmt::make(op->name, v, b);
    }

private:
    const std::string &name;
    const Expr &replacement;
};
} // namespace

Expr substitute(const std::string &name, const Expr &replacement, const Expr &e) {
    return Substitute(name, replacement).mutate(e);
}

Stmt substitute(const std::string &name, const Expr &replacement, const Stmt &s) {
    return Substitute(name, replacement).mutate(s);
}

} // namespace kiln
