#include "lang/IRToolbox.h"

#include "lang/IRMutator.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {

class SubstituteMap : public IRMutator {
public:
    explicit SubstituteMap(const std::map<std::string, Expr> &replacements)
        : replacements(replacements) {}

protected:
    using IRMutator::visit;
    Expr visit(const Variable *op) override {
        if (masked.count(op->name)) return Expr(op);
        auto it = replacements.find(op->name);
        return it == replacements.end() ? Expr(op) : it->second;
    }
    Expr visit(const Let *op) override {
        Expr v = mutate(op->value);
        Expr b = masking(op->name, [&] { return mutate(op->body); });
        if (v.same_as(op->value) && b.same_as(op->body)) return Expr(op);
        return Let::make(op->name, v, b);
    }
    Stmt visit(const LetStmt *op) override {
        Expr v = mutate(op->value);
        Stmt b = masking(op->name, [&] { return mutate(op->body); });
        if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
        return LetStmt::make(op->name, v, b);
    }
    Stmt visit(const For *op) override {
        Expr min = mutate(op->min), extent = mutate(op->extent);
        Stmt b = masking(op->name, [&] { return mutate(op->body); });
        if (min.same_as(op->min) && extent.same_as(op->extent) && b.same_as(op->body)) {
            return Stmt(op);
        }
        return For::make(op->name, min, extent, op->for_type, b);
    }

private:
    const std::map<std::string, Expr> &replacements;
    std::multiset<std::string> masked;

    template <typename F>
    auto masking(const std::string &name, F &&f) -> decltype(f()) {
        if (!replacements.count(name)) return f();
        auto it = masked.insert(name);
        auto r = f();
        masked.erase(it);
        return r;
    }
};

class UsesVars : public IRVisitor {
public:
    explicit UsesVars(const std::set<std::string> &names) : names(names) {}
    bool result = false;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override { result = result || names.count(op->name); }

private:
    const std::set<std::string> &names;
};

class ReadsOrCalls : public IRVisitor {
public:
    bool result = false;

protected:
    using IRVisitor::visit;
    void visit(const Load *) override { result = true; }
    void visit(const Call *) override { result = true; }
};

class CollectNames : public IRVisitor {
public:
    IRNames names;

protected:
    using IRVisitor::visit;
    void visit(const Variable *op) override {
        names.variables.insert(op->name);
        if (!bound.count(op->name)) names.free_variables.insert(op->name);
    }
    void visit(const Let *op) override {
        include(op->value);
        binding(op->name, [&] { include(op->body); });
    }
    void visit(const LetStmt *op) override {
        include(op->value);
        binding(op->name, [&] { include(op->body); });
    }
    void visit(const For *op) override {
        include(op->min);
        include(op->extent);
        binding(op->name, [&] { include(op->body); });
    }
    void visit(const Load *op) override {
        names.loads.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        names.stores.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        names.allocations.insert(op->name);
        IRVisitor::visit(op);
    }

private:
    std::multiset<std::string> bound;

    template <typename F>
    void binding(const std::string &name, F &&f) {
        names.binders[name]++;
        auto it = bound.insert(name);
        f();
        bound.erase(it);
    }
};

template <typename T>
bool uses(const T &node, const std::set<std::string> &names) {
    UsesVars v(names);
    v.include(node);
    return v.result;
}

template <typename T>
IRNames collect(const T &node) {
    CollectNames c;
    c.include(node);
    return std::move(c.names);
}

} // namespace

Expr substitute(const std::map<std::string, Expr> &replacements, const Expr &e) {
    if (replacements.empty()) return e;
    return SubstituteMap(replacements).mutate(e);
}

Stmt substitute(const std::map<std::string, Expr> &replacements, const Stmt &s) {
    if (replacements.empty()) return s;
    return SubstituteMap(replacements).mutate(s);
}

bool expr_uses_var(const Expr &e, const std::string &name) {
    return uses(e, {name});
}
bool expr_uses_vars(const Expr &e, const std::set<std::string> &names) {
    return uses(e, names);
}
bool stmt_uses_var(const Stmt &s, const std::string &name) {
    return uses(s, {name});
}
bool stmt_uses_vars(const Stmt &s, const std::set<std::string> &names) {
    return uses(s, names);
}

std::set<std::string> IRNames::buffers() const {
    std::set<std::string> r = loads;
    r.insert(stores.begin(), stores.end());
    r.insert(allocations.begin(), allocations.end());
    return r;
}

std::set<std::string> IRNames::all() const {
    std::set<std::string> r = buffers();
    r.insert(variables.begin(), variables.end());
    for (const auto &[name, count] : binders)
        r.insert(name);
    return r;
}

bool reads_memory_or_calls(const Expr &e) {
    ReadsOrCalls v;
    v.include(e);
    return v.result;
}

IRNames collect_names(const Expr &e) {
    return collect(e);
}
IRNames collect_names(const Stmt &s) {
    return collect(s);
}

Expr LetStack::apply(Expr e) const {
    for (auto it = lets.rbegin(); it != lets.rend(); ++it)
        e = substitute(it->first, it->second, e);
    return e;
}

Stmt LetScopedMutator::visit(const LetStmt *op) {
    Expr value = mutate(op->value);
    lets.push(op->name, value);
    Stmt body = mutate(op->body);
    lets.pop();
    if (value.same_as(op->value) && body.same_as(op->body)) return Stmt(op);
    return LetStmt::make(op->name, value, body);
}

} // namespace kiln
