#include "schedule/CSE.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

// Fresh names t0, t1, ... that do not occur in the IR being rewritten.
class NameGenerator {
public:
    explicit NameGenerator(std::set<std::string> used) : used(std::move(used)) {}
    std::string make() {
        std::string n;
        do {
            n = "t" + std::to_string(next++);
        } while (used.count(n));
        used.insert(n);
        return n;
    }

private:
    std::set<std::string> used;
    int next = 0;
};

// The node's kind, type, fields and child identities: equal keys mean equal expressions once
// the children are canonical (shared).
std::string shallow_key(const Expr &e) {
    std::ostringstream k;
    auto ptr = [&](const Expr &c) { k << '|' << static_cast<const void *>(c.get()); };
    auto name = [&](const std::string &n) { k << '|' << n.size() << ':' << n; };
    k << int(e->node_type) << ':' << e.type();
    switch (e->node_type) {
    case IRNodeType::IntImm:
        k << '|' << e.as<IntImm>()->value;
        break;
    case IRNodeType::UIntImm:
        k << '|' << e.as<UIntImm>()->value;
        break;
    case IRNodeType::FloatImm: {
        uint64_t bits;
        double v = e.as<FloatImm>()->value;
        std::memcpy(&bits, &v, sizeof bits);
        k << '|' << bits;
        break;
    }
    case IRNodeType::Cast:
        ptr(e.as<Cast>()->value);
        break;
    case IRNodeType::Variable: {
        const auto *op = e.as<Variable>();
        name(op->name);
        k << '|' << op->param.get() << '|' << op->rdom.get();
        break;
    }
#define KILN_KEY_BINARY(Name)                                                                      \
    case IRNodeType::Name:                                                                         \
        ptr(e.as<Name>()->a);                                                                      \
        ptr(e.as<Name>()->b);                                                                      \
        break;
        KILN_KEY_BINARY(Add)
        KILN_KEY_BINARY(Sub)
        KILN_KEY_BINARY(Mul)
        KILN_KEY_BINARY(Div)
        KILN_KEY_BINARY(Mod)
        KILN_KEY_BINARY(Min)
        KILN_KEY_BINARY(Max)
        KILN_KEY_BINARY(EQ)
        KILN_KEY_BINARY(NE)
        KILN_KEY_BINARY(LT)
        KILN_KEY_BINARY(LE)
        KILN_KEY_BINARY(GT)
        KILN_KEY_BINARY(GE)
        KILN_KEY_BINARY(And)
        KILN_KEY_BINARY(Or)
#undef KILN_KEY_BINARY
    case IRNodeType::Not:
        ptr(e.as<Not>()->a);
        break;
    case IRNodeType::Select: {
        const auto *op = e.as<Select>();
        ptr(op->condition);
        ptr(op->true_value);
        ptr(op->false_value);
        break;
    }
    case IRNodeType::Load: {
        const auto *op = e.as<Load>();
        name(op->name);
        ptr(op->index);
        ptr(op->predicate);
        break;
    }
    case IRNodeType::Ramp: {
        const auto *op = e.as<Ramp>();
        ptr(op->base);
        ptr(op->stride);
        break;
    }
    case IRNodeType::Broadcast:
        ptr(e.as<Broadcast>()->value);
        break;
    case IRNodeType::Let: {
        const auto *op = e.as<Let>();
        name(op->name);
        ptr(op->value);
        ptr(op->body);
        break;
    }
    case IRNodeType::Call: {
        const auto *op = e.as<Call>();
        name(op->name);
        k << '|' << int(op->call_type) << '|' << op->value_index << '|' << op->func.get() << '|'
          << op->param.get() << '|' << op->buffer.get();
        for (const Expr &a : op->args)
            ptr(a);
        break;
    }
    default:
        internal_error("cse: statement node ", node_type_name(e->node_type), " in an expression");
    }
    return k.str();
}

// The direct subexpressions of e (which has no lets left).
std::vector<Expr> children(const Expr &e) {
    switch (e->node_type) {
    case IRNodeType::Cast:
        return {e.as<Cast>()->value};
#define KILN_CHILDREN_BINARY(Name)                                                                 \
    case IRNodeType::Name:                                                                         \
        return {e.as<Name>()->a, e.as<Name>()->b};
        KILN_CHILDREN_BINARY(Add)
        KILN_CHILDREN_BINARY(Sub)
        KILN_CHILDREN_BINARY(Mul)
        KILN_CHILDREN_BINARY(Div)
        KILN_CHILDREN_BINARY(Mod)
        KILN_CHILDREN_BINARY(Min)
        KILN_CHILDREN_BINARY(Max)
        KILN_CHILDREN_BINARY(EQ)
        KILN_CHILDREN_BINARY(NE)
        KILN_CHILDREN_BINARY(LT)
        KILN_CHILDREN_BINARY(LE)
        KILN_CHILDREN_BINARY(GT)
        KILN_CHILDREN_BINARY(GE)
        KILN_CHILDREN_BINARY(And)
        KILN_CHILDREN_BINARY(Or)
#undef KILN_CHILDREN_BINARY
    case IRNodeType::Not:
        return {e.as<Not>()->a};
    case IRNodeType::Select: {
        const auto *op = e.as<Select>();
        return {op->condition, op->true_value, op->false_value};
    }
    case IRNodeType::Load: {
        const auto *op = e.as<Load>();
        if (op->predicate.defined()) return {op->index, op->predicate};
        return {op->index};
    }
    case IRNodeType::Ramp:
        return {e.as<Ramp>()->base, e.as<Ramp>()->stride};
    case IRNodeType::Broadcast:
        return {e.as<Broadcast>()->value};
    case IRNodeType::Call:
        return e.as<Call>()->args;
    default:
        return {};
    }
}

bool is_trivial(const Expr &e) {
    switch (e->node_type) {
    case IRNodeType::IntImm:
    case IRNodeType::UIntImm:
    case IRNodeType::FloatImm:
    case IRNodeType::Variable:
        return true;
    case IRNodeType::Broadcast:
        return is_trivial(e.as<Broadcast>()->value);
    case IRNodeType::Ramp:
        return is_trivial(e.as<Ramp>()->base) && is_trivial(e.as<Ramp>()->stride);
    default:
        return false;
    }
}

bool should_extract(const Expr &e) {
    if (is_trivial(e)) return false;
    // Loop partitioning and codegen look for the hint in place.
    const auto *c = e.as<Call>();
    return !(c && c->call_type == Call::Intrinsic && c->name == intrinsic::likely);
}

// Shares structurally equal subexpressions, so that node identity is value identity.
class Canonicalize : public IRMutator {
public:
    Expr mutate(const Expr &e) override {
        if (!e.defined()) return e;
        if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
        Expr r = IRMutator::mutate(e);
        auto [it, inserted] = canonical.emplace(shallow_key(r), r);
        memo[e.get()] = it->second;
        return it->second;
    }

private:
    std::map<std::string, Expr> canonical;
    std::map<const BaseExprNode *, Expr> memo;
};

// Rebuilds a canonical expression with every shared node replaced by a variable, recording the
// lets innermost (earliest completed) first.
class ReplaceShared : public IRMutator {
public:
    ReplaceShared(const std::set<const BaseExprNode *> &shared, NameGenerator &names)
        : shared(shared), names(names) {}
    std::vector<std::pair<std::string, Expr>> lets;

    Expr mutate(const Expr &e) override {
        if (!e.defined()) return e;
        if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
        Expr r = IRMutator::mutate(e);
        if (shared.count(e.get())) {
            std::string n = names.make();
            lets.emplace_back(n, r);
            r = Variable::make(r.type(), n);
        }
        memo[e.get()] = r;
        return r;
    }

private:
    const std::set<const BaseExprNode *> &shared;
    NameGenerator &names;
    std::map<const BaseExprNode *, Expr> memo;
};

// Substitutes every Let of an expression into its body. Lets are pure, so this keeps the value,
// and sharing can then cross them; the substituted values are shared nodes, so the expression
// grows as a DAG, not as a tree.
class RemoveLets : public IRMutator {
public:
    Expr mutate(const Expr &e) override {
        if (!e.defined()) return e;
        // Within one let scope a node always means the same thing.
        auto key = std::make_pair(e.get(), scope_id);
        if (auto it = memo.find(key); it != memo.end()) return it->second;
        Expr r = IRMutator::mutate(e);
        memo[key] = r;
        return r;
    }

protected:
    using IRMutator::visit;

    Expr visit(const Variable *op) override {
        auto it = scope.find(op->name);
        return it == scope.end() ? Expr(op) : it->second;
    }

    Expr visit(const Let *op) override {
        Expr value = mutate(op->value);
        ScopedBinding<Expr> let(scope, op->name, value);
        int saved_id = scope_id;
        scope_id = ++scopes;
        // The value is already let-free and is not visited again, so a let in the body that
        // rebinds one of its names cannot capture it.
        Expr body = mutate(op->body);
        scope_id = saved_id;
        return body;
    }

private:
    std::map<std::string, Expr> scope;
    std::map<std::pair<const BaseExprNode *, int>, Expr> memo;
    int scope_id = 0, scopes = 0;
};

Expr eliminate(const Expr &e, NameGenerator &names) {
    if (!e.defined()) return e;
    Expr inner = RemoveLets().mutate(e);
    Expr root = Canonicalize().mutate(inner);

    // A node is worth a let when more than one edge of the DAG points at it; the children of a
    // shared node are counted once, since the let computes them once.
    std::map<const BaseExprNode *, int> uses;
    std::vector<Expr> stack{root};
    std::set<const BaseExprNode *> seen{root.get()};
    while (!stack.empty()) {
        Expr n = stack.back();
        stack.pop_back();
        for (const Expr &c : children(n)) {
            uses[c.get()]++;
            if (seen.insert(c.get()).second) stack.push_back(c);
        }
    }
    std::set<const BaseExprNode *> shared;
    for (const auto &[node, count] : uses) {
        if (count > 1 && should_extract(Expr(node))) shared.insert(node);
    }
    // Nothing to share: keep the original, lets and all, so that "unchanged" stays cheap.
    if (shared.empty()) return e;

    ReplaceShared replace(shared, names);
    Expr body = replace.mutate(root);
    for (auto it = replace.lets.rbegin(); it != replace.lets.rend(); ++it) {
        body = Let::make(it->first, it->second, body);
    }
    return body;
}

// Applies elimination to every expression of a statement; a Store's value, index and predicate
// share their lets, which become LetStmts around it.
class EliminateInStmt : public IRMutator {
public:
    explicit EliminateInStmt(NameGenerator &names) : names(names) {}

    Expr mutate(const Expr &e) override { return eliminate(e, names); }
    using IRMutator::mutate;

protected:
    using IRMutator::visit;

    Stmt visit(const Store *op) override {
        std::vector<Expr> parts{op->value, op->index};
        if (op->predicate.defined()) parts.push_back(op->predicate);
        // A stand-in call holds the parts together; it is never extracted, being the root.
        Expr joined = eliminate(Call::make(Int(32), "cse.store", parts, Call::Intrinsic), names);
        std::vector<std::pair<std::string, Expr>> lets;
        while (const auto *let = joined.as<Let>()) {
            lets.emplace_back(let->name, let->value);
            joined = let->body;
        }
        const auto *call = joined.as<Call>();
        internal_assert(call && call->args.size() == parts.size(),
                        "cse: the parts of a store were not kept together");
        bool unchanged = lets.empty();
        for (size_t i = 0; i < parts.size(); i++)
            unchanged = unchanged && call->args[i].same_as(parts[i]);
        if (unchanged) return Stmt(op);
        Stmt s = Store::make(op->name, call->args[0], call->args[1],
                             op->predicate.defined() ? call->args[2] : Expr());
        for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
            s = LetStmt::make(it->first, it->second, s);
        }
        return s;
    }

private:
    NameGenerator &names;
};

} // namespace

Expr cse(const Expr &e) {
    NameGenerator names(collect_names(e).all());
    return eliminate(e, names);
}

Stmt cse(const Stmt &s) {
    NameGenerator names(collect_names(s).all());
    return EliminateInStmt(names).mutate(s);
}

} // namespace kiln
