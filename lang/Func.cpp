#include "lang/Func.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/IRVisitor.h"
#include "lang/RebindRVars.h"

namespace kiln {

namespace {

/// "1 argument", "2 arguments": a count with its noun, for messages.
std::string count(size_t n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string site(const std::string &name, const std::vector<Expr> &args) {
    std::ostringstream s;
    s << name << "(";
    for (size_t i = 0; i < args.size(); i++)
        s << (i ? ", " : "") << args[i];
    s << ")";
    return s.str();
}

std::string site(const std::string &name, const std::vector<std::string> &args) {
    std::string s = name + "(";
    for (size_t i = 0; i < args.size(); i++)
        s += (i ? ", " : "") + args[i];
    return s + ")";
}

/// Free variables, RVars and self-calls of a definition's expressions.
class DefinitionUses : public IRVisitor {
public:
    explicit DefinitionUses(const FunctionContents *self) : self(self) {}
    std::vector<const Variable *> pure_vars; ///< plain variables (not params, not RVars)
    std::vector<const Variable *> rvars;
    bool calls_self = false;

    void include_all(const std::vector<Expr> &v) {
        for (const Expr &e : v)
            include(e);
    }

private:
    const FunctionContents *self; // compared by identity: two Funcs may share a name
    std::set<std::string> bound;  // let-bound names

    using IRVisitor::visit;
    void visit(const Variable *op) override {
        if (op->param || bound.count(op->name)) return;
        (op->rdom ? rvars : pure_vars).push_back(op);
    }
    void visit(const Let *op) override {
        include(op->value);
        bool inserted = bound.insert(op->name).second;
        include(op->body);
        if (inserted) bound.erase(op->name);
    }
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func && op->func.get() == self) calls_self = true;
    }
};

/// An RDom's where() predicate with its RVars bound to it again (RDom::where stores them
/// unbound, so that the RDom does not own itself); undefined when it has none.
Expr bind_rdom_predicate(const std::shared_ptr<RDomContents> &dom) {
    if (!dom || !dom->predicate.defined()) return Expr();
    return rebind_rvars(dom->predicate, nullptr, dom);
}

/// Makes the calls to `self` refer to it without owning it (as Halide's weak FunctionPtr): a
/// Func's definitions are owned by the Func, so owning calls to itself would form a cycle.
class WeakenSelfCalls : public IRMutator {
public:
    explicit WeakenSelfCalls(const FunctionContents *self) : self(self) {}

protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        Expr e = IRMutator::visit(op);
        const Call *c = e.as<Call>();
        if (c->call_type != Call::Func || c->func.get() != self || c->func.use_count() == 0) {
            return e;
        }
        // An aliasing pointer with no control block: it points at f but keeps nothing alive.
        std::shared_ptr<FunctionContents> weak(std::shared_ptr<void>(), c->func.get());
        return Call::make(c->type, c->name, c->args, c->call_type, std::move(weak), c->value_index,
                          c->param, c->buffer);
    }

private:
    const FunctionContents *self;
};

void check_values(const std::string &where, const std::vector<Expr> &values) {
    if (values.empty()) user_error(where, ": a definition needs at least one value");
    for (size_t i = 0; i < values.size(); i++) {
        if (!values[i].defined()) user_error(where, ": value ", i, " is undefined");
        if (values[i].type().is_vector()) {
            user_error(where, ": value ", values[i], " is a vector of type ", values[i].type(),
                       "; definitions take scalar values");
        }
    }
}

std::vector<Expr> int_args(const std::string &name, const std::vector<Expr> &args) {
    std::vector<Expr> out;
    for (size_t i = 0; i < args.size(); i++) {
        const Expr &a = args[i];
        if (!a.defined()) user_error("argument ", i, " of ", name, " is undefined");
        if (!a.type().is_int_or_uint() || a.type().is_vector()) {
            user_error("argument ", i, " of ", site(name, args), " must be a scalar integer, got ",
                       a, " of type ", a.type(),
                       "; convert it with cast<int>(...), or cast<int>(floor(...)) to round down");
        }
        out.push_back(cast(Int(32), a));
    }
    return out;
}

} // namespace

Expr weaken_self_calls(const Expr &e, const FunctionContents *self) {
    return WeakenSelfCalls(self).mutate(e);
}

const Expr &Tuple::operator[](size_t i) const {
    if (i >= exprs.size()) {
        user_error("tuple of ", exprs.size(), " values has no element ", i);
    }
    return exprs[i];
}

FuncRef &FuncRef::operator=(const Expr &e) {
    define({e});
    return *this;
}

FuncRef &FuncRef::operator=(const Tuple &t) {
    define(t.as_vector());
    return *this;
}

// Not a copy: f(x) = g(x) defines f from g's value (also when g is f), so there is no
// self-assignment to guard against.
FuncRef &FuncRef::operator=(const FuncRef &other) { // NOLINT(bugprone-unhandled-self-assignment)
    if (other.func->output_types.size() > 1) {
        std::vector<Expr> values;
        for (size_t i = 0; i < other.func->output_types.size(); i++)
            values.push_back(other[int(i)]);
        define(values);
    } else {
        define({Expr(other)});
    }
    return *this;
}

void FuncRef::define(std::vector<Expr> values) {
    FunctionContents &f = *func;
    std::string where = site(f.name, args);
    check_values("definition of " + where, values);

    if (!f.has_pure_definition()) {
        // The pure definition: distinct Vars on the left, only those Vars (and Params) on the
        // right.
        std::vector<std::string> names;
        for (size_t i = 0; i < args.size(); i++) {
            const Variable *v = args[i].as<Variable>();
            if (!v || v->rdom || v->param) {
                user_error("the first definition of '", f.name, "' must be pure: argument ", i,
                           " of ", where, " must be a Var, got ", args[i],
                           "; give it a pure definition first, e.g. ", f.name, "(x) = 0");
            }
            if (std::find(names.begin(), names.end(), v->name) != names.end()) {
                user_error("pure definition of '", f.name, "': Var '", v->name,
                           "' appears twice in ", where, "; each argument needs its own Var");
            }
            names.push_back(v->name);
        }
        DefinitionUses uses(&f);
        uses.include_all(values);
        if (uses.calls_self) {
            user_error("recursive definition: '", f.name, "' calls itself in its pure definition ",
                       where, " = ", values[0],
                       "; a Func may refer to itself only in an update definition");
        }
        if (!uses.rvars.empty()) {
            const Variable *r = uses.rvars[0];
            user_error("pure definition ", where, " = ", values[0], " uses RVar '", r->name,
                       "' of RDom '", r->rdom->name,
                       "'; RVars belong in update definitions (or inside sum(), maximum(), ...)");
        }
        for (const Variable *v : uses.pure_vars) {
            if (std::find(names.begin(), names.end(), v->name) == names.end()) {
                user_error("definition of ", where, ": variable '", v->name,
                           "' is not one of its arguments; add it as an argument of '", f.name,
                           "' or make it a Param");
            }
        }
        f.args = names;
        f.init.args = args;
        f.init.values = values;
        f.output_types.clear();
        for (const Expr &v : values)
            f.output_types.push_back(v.type());
        return;
    }

    // An update definition.
    if (args.size() != f.args.size()) {
        user_error("update ", where, " gives ", count(args.size(), "argument"), ", but '", f.name,
                   "' has ", count(f.args.size(), "dimension"), ", as in ", site(f.name, f.args));
    }
    args = int_args(f.name, args);

    DefinitionUses lhs(&f), rhs(&f);
    lhs.include_all(args);
    rhs.include_all(values);

    std::shared_ptr<RDomContents> rdom;
    const Variable *first_rvar = nullptr;
    for (const auto *uses : {&lhs, &rhs}) {
        for (const Variable *r : uses->rvars) {
            if (rdom && r->rdom != rdom) {
                user_error("update ", where, " uses RVar '", first_rvar->name, "' of RDom '",
                           rdom->name, "' and RVar '", r->name, "' of RDom '", r->rdom->name,
                           "'; one update may use only one RDom, so combine them into one "
                           "multi-dimensional RDom");
            }
            if (!rdom) first_rvar = r;
            rdom = r->rdom;
        }
    }

    // Pure variables on the left must be whole arguments in the positions of the pure definition.
    std::set<std::string> lhs_pure;
    bool all_pure_in_place = true;
    for (size_t i = 0; i < args.size(); i++) {
        const Variable *v = args[i].as<Variable>();
        bool is_plain = v && !v->rdom && !v->param;
        all_pure_in_place &= is_plain && v->name == f.args[i];
        if (!is_plain) continue;
        auto pos = std::find(f.args.begin(), f.args.end(), v->name);
        if (pos == f.args.end()) {
            user_error("update ", where, ": variable '", v->name, "' is not a pure variable of ",
                       site(f.name, f.args), " nor an RVar; use the pure Vars of '", f.name,
                       "' or an RDom");
        }
        if (v->name != f.args[i]) {
            user_error("update ", where, ": pure variable '", v->name, "' is argument ", i,
                       ", but the pure definition ", site(f.name, f.args), " has it as argument ",
                       pos - f.args.begin(), "; pure variables keep their positions in updates");
        }
        lhs_pure.insert(v->name);
    }
    for (const Variable *v : lhs.pure_vars) {
        if (lhs_pure.count(v->name)) continue;
        if (std::find(f.args.begin(), f.args.end(), v->name) == f.args.end()) {
            user_error("update ", where, ": variable '", v->name, "' is not a pure variable of ",
                       site(f.name, f.args), " nor an RVar; use the pure Vars of '", f.name,
                       "' or an RDom");
        }
        user_error("update ", where, ": pure variable '", v->name,
                   "' appears inside an argument; on the left a pure variable may only be a whole "
                   "argument in its own position, so use an RVar to update shifted sites");
    }

    if (all_pure_in_place && !rdom && !rhs.calls_self) {
        user_error("'", f.name, "' is defined twice: ", where, " = ", values[0],
                   " replaces its pure definition; use a new Func, or refer to '", f.name,
                   "' on the right-hand side to update it");
    }
    if (values.size() != f.output_types.size()) {
        user_error("update ", where, " gives ", values.size(), " values, but '", f.name, "' has ",
                   f.output_types.size());
    }
    for (size_t i = 0; i < values.size(); i++) {
        if (values[i].type() != f.output_types[i]) {
            std::string which = values.size() > 1 ? detail::str("value ", i, " ") : "the value ";
            user_error("update ", where, ": ", which, values[i], " has type ", values[i].type(),
                       ", but '", f.name, "' has type ", f.output_types[i], "; cast it, e.g. cast<",
                       f.output_types[i].c_name(), ">(...)");
        }
    }
    for (const Variable *v : rhs.pure_vars) {
        if (lhs_pure.count(v->name)) continue;
        auto pos = std::find(f.args.begin(), f.args.end(), v->name);
        if (pos == f.args.end()) {
            user_error("update ", where, " = ", values[0], ": variable '", v->name,
                       "' is neither a pure variable of ", site(f.name, f.args),
                       " nor an RVar; make it an RDom, a Param or an argument of '", f.name, "'");
        }
        user_error("update ", where, " = ", values[0], ": pure variable '", v->name,
                   "' is used on the right-hand side but is not an argument on the left; put it "
                   "on the left as argument ",
                   pos - f.args.begin(), " as in ", site(f.name, f.args), ", or use an RVar");
    }
    // RDom::where: the predicate may use the RDom's RVars, the pure Vars of the site and Params.
    Expr predicate = bind_rdom_predicate(rdom);
    if (predicate.defined()) {
        DefinitionUses pred(&f);
        pred.include(predicate);
        for (const Variable *r : pred.rvars) {
            if (r->rdom == rdom) continue;
            user_error("update ", where, ": the where() predicate ", predicate, " of RDom '",
                       rdom->name, "' uses RVar '", r->name, "' of RDom '", r->rdom->name,
                       "'; a predicate may use only the RVars of its own RDom");
        }
        for (const Variable *v : pred.pure_vars) {
            if (lhs_pure.count(v->name)) continue;
            user_error("update ", where, ": the where() predicate ", predicate, " of RDom '",
                       rdom->name, "' uses variable '", v->name,
                       "', which is not a pure variable on the left of the update; use the "
                       "update's pure Vars, the RDom's RVars or Params");
        }
        if (rdom->used_by.empty()) rdom->used_by = "update " + where;
    } else if (rdom && rdom->used_by.empty()) {
        rdom->used_by = "update " + where;
    }
    // The update's calls to f itself must not own f, or f would own itself and never be freed.
    WeakenSelfCalls weaken(&f);
    for (Expr &a : args)
        a = weaken.mutate(a);
    for (Expr &v : values)
        v = weaken.mutate(v);
    if (predicate.defined()) {
        predicate = weaken.mutate(predicate);
        // The RDom keeps its predicate too: calls to f there would make f own itself through
        // its update's RDom.
        rdom->predicate = weaken.mutate(rdom->predicate);
    }
    f.updates.push_back(Definition{args, values, rdom, predicate});
}

namespace {
/// a op b for the update operators. A constant b stands for the C++ number the user wrote, so it
/// takes a's type (rule 1 of IROperator.h): `f(x) += 1` keeps a uint8 Func uint8.
Expr apply_update_op(char op, const Expr &a, const Expr &b) {
    auto apply = [op](const Expr &l, const auto &r) -> Expr {
        switch (op) {
        case '+':
            return l + r;
        case '-':
            return l - r;
        case '*':
            return l * r;
        default:
            return l / r;
        }
    };
    if (const IntImm *i = b.as<IntImm>(); i && b.type() == Int(32)) return apply(a, int(i->value));
    if (const FloatImm *f = b.as<FloatImm>()) return apply(a, f->value);
    return apply(a, b);
}
} // namespace

void FuncRef::update_with(const Expr &e, const char *op, int identity) {
    if (!e.defined()) user_error("update ", site(func->name, args), " ", op, " an undefined value");
    // Without a pure definition, the identity of the operator becomes one; arguments that are
    // plain Vars keep their names, the others get fresh ones. It is undone if the update fails.
    bool implicit = !func->has_pure_definition();
    FunctionContents saved = *func;
    try {
        if (implicit) {
            // Positional names (`_0`, `_1`, as in Halide), so the algorithm hash is the same in
            // every process.
            std::vector<Expr> pure_args;
            for (size_t i = 0; i < args.size(); i++) {
                const Variable *v = args[i].as<Variable>();
                bool plain = v && !v->rdom && !v->param;
                pure_args.push_back(plain ? args[i] : Expr(Var("_" + std::to_string(i))));
            }
            FuncRef(func, pure_args).define({make_const(e.type(), int64_t(identity))});
        }
        Expr value = apply_update_op(op[0], *this, e);
        if (func->output_types.size() == 1 && value.type() != func->output_types[0]) {
            Type t = func->output_types[0];
            user_error("update ", site(func->name, args), " ", op, " ", e, ": the value has type ",
                       value.type(), ", but '", func->name, "' has type ", t, "; cast it, e.g. ",
                       site(func->name, args), " ", op, " cast<", t.c_name(), ">(", e, ")");
        }
        define({value});
    } catch (...) {
        if (implicit) *func = saved;
        throw;
    }
}

FuncRef &FuncRef::operator+=(const Expr &e) {
    update_with(e, "+=", 0);
    return *this;
}
FuncRef &FuncRef::operator-=(const Expr &e) {
    update_with(e, "-=", 0);
    return *this;
}
FuncRef &FuncRef::operator*=(const Expr &e) {
    update_with(e, "*=", 1);
    return *this;
}
FuncRef &FuncRef::operator/=(const Expr &e) {
    update_with(e, "/=", 1);
    return *this;
}

FuncRef::operator Expr() const {
    if (!func->has_pure_definition()) {
        user_error("call ", site(func->name, args), " to Func '", func->name,
                   "' before it is defined; define '", func->name,
                   "' first (a Func can call itself only in an update, after its pure definition)");
    }
    if (func->output_types.size() != 1) {
        user_error("call ", site(func->name, args), " used as one value, but Func '", func->name,
                   "' has ", func->output_types.size(), " values; select one with ",
                   site(func->name, args), "[i]");
    }
    return (*this)[0];
}

Expr FuncRef::operator[](int i) const {
    const FunctionContents &f = *func;
    if (!f.has_pure_definition()) {
        user_error("call ", site(f.name, args), " to Func '", f.name,
                   "' before it is defined; define '", f.name,
                   "' first (a Func can call itself only in an update, after its pure definition)");
    }
    if (args.size() != f.args.size()) {
        user_error("call ", site(f.name, args), " gives ", count(args.size(), "argument"),
                   ", but Func '", f.name, "' has ", count(f.args.size(), "dimension"), ", as in ",
                   site(f.name, f.args));
    }
    if (i < 0 || i >= int(f.output_types.size())) {
        user_error("call ", site(f.name, args), "[", i, "]: Func '", f.name, "' has ",
                   f.output_types.size(), " values, so index ", i, " is out of range");
    }
    return Call::make(f.output_types[i], f.name, int_args(f.name, args), Call::Func, func, i);
}

std::string Stage::name() const {
    if (index == 0) return func->name;
    return func->name + ".update(" + std::to_string(index - 1) + ")";
}

Func::Func() : Func(unique_name("f")) {}

Func::Func(const std::string &name) {
    if (name.empty()) user_error("a Func needs a non-empty name");
    contents = std::make_shared<FunctionContents>();
    contents->name = name;
}

std::vector<Var> Func::vars() const {
    std::vector<Var> v;
    for (const std::string &a : contents->args)
        v.emplace_back(a);
    return v;
}

Type Func::output_type() const {
    if (!defined()) user_error("output_type of Func '", name(), "': it has no definition yet");
    if (num_values() != 1) {
        user_error("output_type of Func '", name(), "': it has ", num_values(),
                   " values; use output_types()");
    }
    return contents->output_types[0];
}

const Definition &Func::update_definition(int i) const {
    if (i < 0 || i >= num_updates()) {
        user_error("update ", i, " of Func '", name(), "' does not exist; it has ",
                   count(num_updates(), "update definition"));
    }
    return contents->updates[i];
}

Expr Func::value() const {
    if (!defined()) user_error("value of Func '", name(), "': it has no definition yet");
    if (num_values() != 1) {
        user_error("value of Func '", name(), "': it has ", num_values(),
                   " values; use definition().values");
    }
    return contents->init.values[0];
}

Stage Func::update(int i) const {
    update_definition(i);
    return Stage(contents, i + 1);
}

FuncRef Func::operator()(std::vector<Expr> args) const {
    for (size_t i = 0; i < args.size(); i++) {
        if (!args[i].defined()) user_error("argument ", i, " of '", name(), "' is undefined");
    }
    return FuncRef(contents, std::move(args));
}

namespace {
void print_definition(std::ostream &s, const std::string &name, const Definition &d) {
    s << site(name, d.args) << " = ";
    if (d.values.size() > 1) s << "{";
    for (size_t i = 0; i < d.values.size(); i++)
        s << (i ? ", " : "") << d.values[i];
    if (d.values.size() > 1) s << "}";
    if (d.rdom) {
        s << "  where";
        for (size_t i = 0; i < d.rdom->vars.size(); i++) {
            const ReductionVariable &r = d.rdom->vars[i];
            s << (i ? "," : "") << " " << r.name << " in [" << r.min << ", ";
            auto mn = as_const_int(r.min), ext = as_const_int(r.extent);
            if (mn && ext) {
                s << *mn + *ext;
            } else if (mn && *mn == 0) {
                s << r.extent;
            } else {
                s << r.min << " + " << r.extent;
            }
            s << ")";
        }
    }
    if (d.predicate.defined()) s << (d.rdom ? " and " : "  where ") << d.predicate;
    s << "\n";
}
} // namespace

std::string Func::to_string() const {
    std::ostringstream s;
    for (const FunctionPtr &f : reachable_functions({contents})) {
        if (!f->has_pure_definition()) {
            s << f->name << ": (undefined)\n";
            continue;
        }
        print_definition(s, f->name, f->init);
        for (const Definition &u : f->updates)
            print_definition(s, f->name, u);
    }
    return s.str();
}

std::ostream &operator<<(std::ostream &s, const Func &f) {
    return s << f.to_string();
}

std::vector<OutputImageParam> Func::output_buffers() const {
    if (!defined()) {
        user_error("output_buffer: Func '", name(),
                   "' has no definition yet; define it (f(x, y) = ...) before promising the shape "
                   "of its output buffer");
    }
    FunctionContents &f = *contents;
    f.output_buffers.resize(f.output_types.size());
    std::vector<OutputImageParam> result;
    for (size_t i = 0; i < f.output_types.size(); i++) {
        std::shared_ptr<ParameterContents> &b = f.output_buffers[i];
        if (!b) {
            b = std::make_shared<ParameterContents>();
            b->name = buffer_name(f, int(i));
            b->type = f.output_types[i];
            b->is_buffer = true;
            b->is_output = true;
            b->dimensions = f.dimensions();
        }
        result.emplace_back(b);
    }
    return result;
}

OutputImageParam Func::output_buffer() const {
    std::vector<OutputImageParam> buffers = output_buffers();
    if (buffers.size() != 1) {
        user_error("output_buffer: Func '", name(), "' has ", buffers.size(),
                   " values, each in a buffer of its own; use output_buffers()[i] for value i");
    }
    return buffers[0];
}

} // namespace kiln
