// The small IR helpers every pass needs: substitution with a map, whether an expression or
// statement uses some variables, the names a piece of IR mentions, scoped bindings in a symbol
// table, and a stack of enclosing lets (with a mutator that keeps it). Write a pass against these
// instead of a private copy.
//
// Pitfalls shared by all of them:
// - Names, not pointers, identify variables, so a binder (Let, LetStmt, For) can shadow an outer
//   binding of the same name. Each helper says below whether it respects shadowing.
// - Substituted values are inserted as they are: a value that mentions a name bound between the
//   substitution's scope and the use (variable capture) would change meaning. Lowering makes
//   fresh names, so this does not happen in kiln's passes; keep it that way in new ones.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lang/IR.h"
#include "lang/IRMutator.h"

namespace kiln {

/// Replaces free occurrences of each name of `replacements` by its value, in one traversal.
/// Respects shadowing: inside the body of a Let, LetStmt or For binding a name, that name is not
/// replaced (its value and a loop's bounds still are). The values are not substituted into each
/// other: expand them first when they refer to one another. Returns the same node when nothing
/// changed. For one name, `substitute(name, value, e)` in IRMutator.h does the same for lets
/// (it does not mask For loops).
Expr substitute(const std::map<std::string, Expr> &replacements, const Expr &e);
Stmt substitute(const std::map<std::string, Expr> &replacements, const Stmt &s);

/// Whether a Variable with one of these names occurs anywhere in e or s. Does not respect
/// shadowing: a use bound by a Let (or LetStmt, For) inside e or s counts too, which errs on the
/// side of "uses" for the dependence questions passes ask. Buffer names of Loads, Stores and
/// Allocates are not variables and do not count.
bool expr_uses_var(const Expr &e, const std::string &name);
bool expr_uses_vars(const Expr &e, const std::set<std::string> &names);
bool stmt_uses_var(const Stmt &s, const std::string &name);
bool stmt_uses_vars(const Stmt &s, const std::set<std::string> &names);

/// The names a piece of IR mentions, each kind apart. `variables` holds every Variable's name,
/// bound or free; `free_variables` those used where no Let, LetStmt or For of theirs is in scope
/// (shadowing respected); `binders` each name a Let, LetStmt or For binds, with how many times
/// (an Allocate is not counted: it binds a buffer); `loads`, `stores` and `allocations` the buffer
/// names of those nodes (Func and Image calls are not buffers here).
struct IRNames {
    std::set<std::string> variables, free_variables;
    std::map<std::string, int> binders;
    std::set<std::string> loads, stores, allocations;
    /// Every buffer name: loads, stores and allocations.
    std::set<std::string> buffers() const;
    /// Every name of any kind: what a fresh name must avoid.
    std::set<std::string> all() const;
};
IRNames collect_names(const Expr &e);
IRNames collect_names(const Stmt &s);

/// Whether e reads memory (a Load) or calls anything (a Func, an extern or an intrinsic, whose
/// value may differ between two evaluations): then it is not a pure function of its variables,
/// and a pass may not move it, evaluate it once for many or reason about it as arithmetic.
bool reads_memory_or_calls(const Expr &e);

/// Binds `name` in `table` for the lifetime of this object and then restores what was there
/// before: the outer binding, or no binding. A value of std::nullopt hides an outer binding for
/// the lifetime (a loop variable hiding a let of the same name). Nested bindings must be
/// destroyed in the reverse order of their creation (automatic with scoped objects).
template <typename T>
class ScopedBinding {
public:
    ScopedBinding(std::map<std::string, T> &table, std::string name, std::optional<T> value)
        : table(table), name(std::move(name)) {
        if (auto it = this->table.find(this->name); it != this->table.end()) {
            outer = std::move(it->second);
            this->table.erase(it);
        }
        if (value) this->table.emplace(this->name, std::move(*value));
    }
    ~ScopedBinding() {
        table.erase(name);
        if (outer) table.emplace(name, std::move(*outer));
    }
    ScopedBinding(const ScopedBinding &) = delete;
    ScopedBinding &operator=(const ScopedBinding &) = delete;

private:
    std::map<std::string, T> &table;
    std::string name;
    std::optional<T> outer;
};

/// The LetStmts enclosing the point a pass has reached, innermost last. A mutator pushes in its
/// LetStmt visit and pops after the body. `apply()` substitutes them into an expression from the
/// innermost out, so a let's value sees the lets outside it, and respects shadowing like
/// `substitute`. It makes a closed expression of a loop extent for `as_const_int(simplify(...))`.
/// Pitfall: a For between a let and the use is not recorded, so a let whose value uses that
/// loop's variable is substituted as if the loop were not there (the result then mentions the
/// loop variable, which is right for a value computed inside the loop).
class LetStack {
public:
    void push(const std::string &name, const Expr &value) { lets.emplace_back(name, value); }
    void pop() { lets.pop_back(); }
    bool empty() const { return lets.empty(); }
    Expr apply(Expr e) const;

private:
    std::vector<std::pair<std::string, Expr>> lets;
};

/// A mutator that keeps the LetStmts enclosing the node being visited in `lets` (values as
/// mutated). A subclass overriding visit(const LetStmt *) must call this one to keep the stack.
class LetScopedMutator : public IRMutator {
protected:
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override;
    LetStack lets;
};

} // namespace kiln
