#include "lang/Simplify.h"

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IRVisitor.h"
#include "lang/SimplifyInternal.h"

namespace kiln {

namespace simplify_internal {

namespace {

// Finds whether an expression binds or mentions a name, to decide whether a let can be
// substituted without capture or dropped.
class NameFinder : public IRVisitor {
public:
    NameFinder(const std::string &n, bool binders) : name(n), look_for_binders(binders) {}
    bool found = false;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override { found |= !look_for_binders && op->name == name; }
    void visit(const Let *op) override {
        found |= look_for_binders && op->name == name;
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        found |= look_for_binders && op->name == name;
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        found |= look_for_binders && op->name == name;
        IRVisitor::visit(op);
    }

private:
    const std::string &name;
    bool look_for_binders;
};

template <typename T>
bool mentions(const T &node, const std::string &name) {
    NameFinder f(name, false);
    f.include(node);
    return f.found;
}

template <typename T>
bool binds(const T &node, const std::string &name) {
    NameFinder f(name, true);
    f.include(node);
    return f.found;
}

// Whether e is built from ramps and broadcasts by + - * / % with constants, scalar variables
// (added to names) and constants.
bool index_arithmetic(const Expr &e, std::vector<std::string> &names) {
    if (is_const(e)) return true;
    if (const auto *v = e.as<Variable>()) {
        names.push_back(v->name);
        return v->type.is_scalar();
    }
    if (const auto *r = e.as<Ramp>())
        return index_arithmetic(r->base, names) && index_arithmetic(r->stride, names);
    if (const auto *b = e.as<Broadcast>()) return index_arithmetic(b->value, names);
    if (const auto *a = e.as<Add>())
        return index_arithmetic(a->a, names) && index_arithmetic(a->b, names);
    if (const auto *d = e.as<Sub>())
        return index_arithmetic(d->a, names) && index_arithmetic(d->b, names);
    if (const auto *m = e.as<Mul>()) {
        return (is_const(m->b) && index_arithmetic(m->a, names)) ||
               (is_const(m->a) && index_arithmetic(m->b, names));
    }
    if (const auto *d = e.as<Div>()) return is_const(d->b) && index_arithmetic(d->a, names);
    if (const auto *m = e.as<Mod>()) return is_const(m->b) && index_arithmetic(m->a, names);
    return false;
}

// A vector of indices of index_arithmetic (what the vectorizer binds to a name for a fused
// loop's coordinate, `let c.vec = ramp(f, 1, 16) % x16(4)`), none of whose variables the body
// rebinds: cheap to recompute at each use, and substituted, the uses can recombine it
// (recombine_div_mod: c + 4 x is the dense ramp of f again, not a gather).
template <typename Body>
bool cheap_vector_index(const Expr &value, const Body &body) {
    if (!value.type().is_vector() || !value.type().is_int_or_uint()) return false;
    std::vector<std::string> names;
    if (!index_arithmetic(value, names)) return false;
    for (const std::string &n : names)
        if (binds(body, n)) return false;
    return true;
}

// Whether a let's value can be substituted into the body: constants always, variables and a
// scalar variable plus a constant when no binder in the body would capture the variable. The
// latter (an unrolled copy's `j = j.min + 16`, as in Halide) lets offsets from a common base
// cancel: a register tile's index `(j.min + 16) - j.min` becomes the constant that lets LLVM
// keep the tile in registers. Not a value that reads the let's own name (`let x = x + 1`): rules
// that simplify an already simplified part again would substitute it twice. Also a vector index
// of cheap_vector_index.
template <typename Body>
bool substitutable(const std::string &name, const Expr &value, const Body &body) {
    if (is_const(value)) return true;
    if (cheap_vector_index(value, body) && !mentions(value, name)) return true;
    const auto *v = value.as<Variable>();
    if (const auto *add = value.as<Add>(); add && value.type().is_scalar() && is_const(add->b))
        v = add->a.as<Variable>();
    return v && v->name != name && !binds(body, v->name);
}

} // namespace

Simplifier::Simplifier(const std::map<std::string, ConstantBounds> &bounds) {
    for (const auto &[name, b] : bounds) {
        ConstInterval i;
        if (b.min) i.min = *b.min;
        if (b.max) i.max = *b.max;
        var_bounds[name] = i;
    }
}

Simplifier::ScopedName::ScopedName(Simplifier &s, const std::string &name, const Expr &replacement,
                                   std::optional<ConstInterval> bounds,
                                   std::optional<std::pair<Int128, Int128>> alignment)
    : s(s), name(name) {
    if (auto it = s.replacements.find(name); it != s.replacements.end()) {
        old_replacement = it->second;
    }
    if (auto it = s.var_bounds.find(name); it != s.var_bounds.end()) {
        old_bounds = it->second;
    }
    if (auto it = s.let_alignments.find(name); it != s.let_alignments.end()) {
        old_alignment = it->second;
    }
    s.replacements.erase(name);
    s.var_bounds.erase(name);
    s.let_alignments.erase(name);
    if (replacement.defined()) s.replacements[name] = replacement;
    if (bounds) s.var_bounds[name] = *bounds;
    if (alignment) s.let_alignments[name] = *alignment;
}
Simplifier::ScopedName::~ScopedName() {
    s.replacements.erase(name);
    s.var_bounds.erase(name);
    s.let_alignments.erase(name);
    if (old_replacement.defined()) s.replacements[name] = old_replacement;
    if (old_bounds) s.var_bounds[name] = *old_bounds;
    if (old_alignment) s.let_alignments[name] = *old_alignment;
}

Expr Simplifier::visit(const Variable *op) {
    auto it = replacements.find(op->name);
    if (it == replacements.end()) return Expr(op);
    internal_assert(it->second.type() == op->type, "simplify: let '", op->name, "' of type ",
                    it->second.type(), " used as ", op->type);
    return it->second;
}

std::optional<ConstInterval> Simplifier::bounds_for_binding(const Expr &value) {
    if (!value.type().is_int_or_uint()) return std::nullopt;
    return bounds_of(value);
}

// Lets whose value is a constant or a variable are substituted; other lets lend the bounds of
// their value to the body and are dropped when the body no longer uses them.
template <typename Node, typename Body>
Body Simplifier::visit_let(const Node *op) {
    Expr value = mutate(op->value);
    // `let x = a + c` (a constant c, a neither a constant nor a variable) becomes `let x.b = a`
    // with x replaced by `x.b + c` in the body, as Halide's simplifier does: the constant offset
    // is then visible where x is used. An unrolled copy's `x = (x.min + xo * 16) + 16` so gives
    // indices that differ from the other copies' by constants, which LLVM needs to keep a tile
    // of sums at those places in registers.
    if (const auto *add = value.as<Add>(); add && value.type().is_int() &&
                                           value.type().is_scalar() && is_const(add->b) &&
                                           !is_const(add->a) && !add->a.template as<Variable>()) {
        const std::string base = op->name + ".b";
        if (!mentions(op->body, base) && !binds(op->body, base)) {
            Body body = kiln::substitute(
                op->name, Add::make(Variable::make(value.type(), base), add->b), op->body);
            return mutate(Node::make(base, add->a, body));
        }
    }
    bool substitute = substitutable(op->name, value, op->body);
    Body body;
    {
        // The value's alignment is taken here, where its names mean what they meant outside.
        bool aligned = !substitute && value.type().is_int() && value.type().is_scalar();
        ScopedName scope(*this, op->name, substitute ? value : Expr(),
                         substitute ? std::nullopt : bounds_for_binding(value),
                         aligned ? std::optional(alignment(value)) : std::nullopt);
        body = mutate(op->body);
    }
    if (!body.defined()) return Body();
    if (substitute || !mentions(body, op->name)) return body;
    // A variable that could not be substituted for fear of capture may be substitutable now
    // that the body is simpler.
    if (value.as<Variable>() && substitutable(op->name, value, body)) {
        return mutate(kiln::substitute(op->name, value, body));
    }
    if (value.same_as(op->value) && body.same_as(op->body)) return Body(op);
    return Node::make(op->name, value, body);
}

Expr Simplifier::visit(const Let *op) {
    return visit_let<Let, Expr>(op);
}
Stmt Simplifier::visit(const LetStmt *op) {
    return visit_let<LetStmt, Stmt>(op);
}

Stmt Simplifier::visit(const For *op) {
    Expr min = mutate(op->min), extent = mutate(op->extent);
    auto e = const_value(extent);
    if (e && *e <= 0) return Stmt();
    // A GPU loop of one iteration still says where the code runs (gpu_single_thread), and a
    // tensorized one that its nest goes to the matrix unit (a block of one row).
    bool keep = op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread ||
                op->for_type == ForType::Tensorized;
    if (e && *e == 1 && !keep) return mutate(LetStmt::make(op->name, min, op->body));
    // Inside the body the loop variable lies in [min, min + extent - 1].
    ConstInterval m = bounds_of(min), x = bounds_of(extent), range;
    range.min = m.min;
    if (m.max && x.max) range.max = *m.max + *x.max - 1;
    Stmt body;
    {
        ScopedName scope(*this, op->name, Expr(), range);
        body = mutate(op->body);
    }
    if (!body.defined()) return Stmt();
    if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) {
        return Stmt(op);
    }
    return For::make(op->name, min, extent, op->for_type, body);
}

Stmt Simplifier::visit(const IfThenElse *op) {
    Expr c = mutate(op->condition);
    if (is_const_true(c)) return mutate(op->then_case);
    if (is_const_false(c)) return mutate(op->else_case);
    Stmt t = mutate(op->then_case), f = mutate(op->else_case);
    if (!t.defined() && !f.defined()) return Stmt();
    if (!t.defined()) return IfThenElse::make(negation(c), f);
    if (c.same_as(op->condition) && t.same_as(op->then_case) && f.same_as(op->else_case)) {
        return Stmt(op);
    }
    return IfThenElse::make(c, t, f);
}

Stmt Simplifier::visit(const AssertStmt *op) {
    Stmt s = IRMutator::visit(op);
    const auto *a = s.as<AssertStmt>();
    if (a && is_const_true(a->condition)) return Stmt();
    return s;
}

Stmt Simplifier::visit(const Evaluate *op) {
    Expr v = mutate(op->value);
    if (is_const(v)) return Stmt(); // a no-op
    if (v.same_as(op->value)) return Stmt(op);
    return Evaluate::make(v);
}

Stmt Simplifier::visit(const Block *op) {
    Stmt first = mutate(op->first), rest = mutate(op->rest);
    if (first.same_as(op->first) && rest.same_as(op->rest)) return Stmt(op);
    return Block::make(first, rest);
}

Stmt Simplifier::visit(const ProducerConsumer *op) {
    Stmt body = mutate(op->body);
    if (!body.defined()) return Stmt();
    if (body.same_as(op->body)) return Stmt(op);
    return ProducerConsumer::make(op->name, op->is_producer, body);
}

Stmt Simplifier::visit(const Realize *op) {
    std::vector<Range> bounds;
    bool changed = false;
    for (const Range &r : op->bounds) {
        bounds.emplace_back(mutate(r.min), mutate(r.extent));
        changed |= !bounds.back().min.same_as(r.min) || !bounds.back().extent.same_as(r.extent);
    }
    Expr c = mutate(op->condition);
    Stmt body = mutate(op->body);
    if (!body.defined()) return Stmt();
    if (!changed && c.same_as(op->condition) && body.same_as(op->body)) return Stmt(op);
    return Realize::make(op->name, op->types, op->memory_type, std::move(bounds), c, body);
}

Stmt Simplifier::visit(const Allocate *op) {
    bool changed = false;
    std::vector<Expr> extents = mutate_exprs(op->extents, &changed);
    Expr c = mutate(op->condition);
    Stmt body = mutate(op->body);
    if (!body.defined()) return Stmt();
    if (!changed && c.same_as(op->condition) && body.same_as(op->body)) return Stmt(op);
    return Allocate::make(op->name, op->type, op->memory_type, std::move(extents), c, body);
}

} // namespace simplify_internal

using simplify_internal::Simplifier;

Expr simplify(const Expr &e, const std::map<std::string, ConstantBounds> &bounds) {
    if (!e.defined()) return e;
    Expr r = Simplifier(bounds).mutate(e);
    return equal(r, e) ? e : r;
}

Stmt simplify(const Stmt &s, const std::map<std::string, ConstantBounds> &bounds) {
    if (!s.defined()) return s;
    Stmt r = Simplifier(bounds).mutate(s);
    if (!r.defined()) return Evaluate::make(0); // everything was a no-op
    return equal(r, s) ? s : r;
}

bool can_prove(const Expr &e, const std::map<std::string, ConstantBounds> &bounds) {
    internal_assert(e.defined() && e.type().is_bool(),
                    "can_prove: expected a bool expression, got ",
                    e.defined() ? e.type().to_string() : "an undefined one");
    return is_const_true(simplify(e, bounds));
}

} // namespace kiln
