// Pure variables (Var) and reduction domains (RDom) with their variables (RVar).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lang/IR.h"

namespace kiln {

/// A name unique within the process, made from a prefix ("f" gives "f0", "f1", ...).
std::string unique_name(const std::string &prefix);

/// A pure variable of a Func's definition; two Vars with the same name are the same variable.
class Var {
public:
    Var();
    explicit Var(const std::string &name);
    const std::string &name() const { return var_name; }
    operator Expr() const;
    /// Whether this Var's name is an implicit one made by the default constructor.
    bool is_implicit() const;

private:
    std::string var_name;
};

/// Positional Vars, as in Halide: `_0` names dimension 0 of an ImageParam's wrapper
/// (ImageParam::in), so `B.in().vectorize(_0, 8)`; also the pure Vars kiln gives a Func whose
/// first definition is an update (`f(r.x) += ...`).
// NOLINTBEGIN(readability-identifier-naming): Halide's names
inline const Var _0("_0"), _1("_1"), _2("_2"), _3("_3"), _4("_4"), _5("_5"), _6("_6"), _7("_7"),
    _8("_8"), _9("_9");
// NOLINTEND(readability-identifier-naming)

/// One dimension of a reduction domain.
struct ReductionVariable {
    std::string name;
    Expr min, extent;
};

/// The shared state of an RDom; RVars point to it, so the compiler can tell which RDom a
/// variable belongs to.
struct RDomContents {
    std::string name;
    std::vector<ReductionVariable> vars;
    /// RDom::where: the points of the domain an update visits (the conjunction of every where()
    /// call); undefined means all of them. An update definition copies it when it is defined.
    Expr predicate;
    /// The first definition that used the RDom ("f.update(0)"), after which where() is an error.
    std::string used_by;
};

/// A variable of a reduction domain.
class RVar {
public:
    RVar() = default;
    RVar(std::shared_ptr<RDomContents> dom, int index) : dom(std::move(dom)), index(index) {}
    /// An RVar that names a dimension before it exists (for schedules: rfactor, split results).
    explicit RVar(const std::string &name) : free_name(name) {}
    const std::string &name() const;
    Expr min() const;
    Expr extent() const;
    const std::shared_ptr<RDomContents> &domain() const { return dom; }
    operator Expr() const;

private:
    std::shared_ptr<RDomContents> dom;
    int index = 0;
    std::string free_name;
};

/// A multi-dimensional reduction domain, iterated with its first dimension innermost.
/// `RDom r(0, n)` is one-dimensional; `RDom r({{0, n}, {0, m}})` has r.x and r.y.
class RDom {
public:
    RDom() = default;
    RDom(Expr min, Expr extent, const std::string &name = "");
    explicit RDom(const std::vector<Range> &ranges, const std::string &name = "");

    RVar x, y, z, w;
    RVar operator[](int i) const;
    int dimensions() const;
    const std::string &name() const;
    bool defined() const { return contents != nullptr; }
    const std::shared_ptr<RDomContents> &get_contents() const { return contents; }
    /// Restricts the domain to the points where `predicate` (a boolean of the RDom's RVars, the
    /// pure Vars of the update that uses it and Params) is true, as Halide's RDom::where:
    /// `RDom r(0, n, 0, n); r.where(r.x < r.y);`. Several calls are combined with &&. Call it
    /// before the RDom is used in a definition. Lowering guards the update with the predicate
    /// and shrinks the loops whose bounds it implies (`r.x < r.y` runs r.x up to r.y - 1).
    RDom &where(const Expr &predicate);
    /// The conjunction of the where() predicates; undefined when there is none.
    Expr predicate() const { return contents ? contents->predicate : Expr(); }
    /// A one-dimensional RDom is its own variable.
    operator Expr() const;
    operator RVar() const;

private:
    std::shared_ptr<RDomContents> contents;
};

} // namespace kiln
