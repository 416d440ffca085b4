#include "lang/Var.h"

#include <atomic>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/RebindRVars.h"

namespace kiln {

std::string unique_name(const std::string &prefix) {
    static std::atomic<int> counter{0};
    return prefix + std::to_string(counter++);
}

Var::Var() : var_name(unique_name("v")) {}
Var::Var(const std::string &name) : var_name(name) {
    if (name.empty()) user_error("a Var needs a non-empty name");
}
Var::operator Expr() const {
    return Variable::make(Int(32), var_name);
}
bool Var::is_implicit() const {
    return var_name.size() > 1 && var_name[0] == 'v' &&
           var_name.find_first_not_of("0123456789", 1) == std::string::npos;
}

const std::string &RVar::name() const {
    return dom ? dom->vars[index].name : free_name;
}

Expr RVar::min() const {
    if (!dom) user_error("min of RVar '", free_name, "': it does not belong to an RDom");
    return dom->vars[index].min;
}

Expr RVar::extent() const {
    if (!dom) user_error("extent of RVar '", free_name, "': it does not belong to an RDom");
    return dom->vars[index].extent;
}

RVar::operator Expr() const {
    if (!dom && free_name.empty()) {
        user_error("use of an RVar that names no dimension (such as r.y of a one-dimensional "
                   "RDom); use only as many of r.x, r.y, r.z, r.w as the RDom has dimensions");
    }
    if (!dom) {
        user_error("unbound RVar '", free_name, "' used in an expression; only RVars of an RDom ",
                   "can appear in definitions, e.g. RDom r(0, n); ... r.x");
    }
    return Variable::make(Int(32), name(), nullptr, dom);
}

namespace {
Expr int32_bound(const Expr &e, const std::string &rdom, int dim, const char *what) {
    if (!e.defined()) user_error(what, " of RDom '", rdom, "' dimension ", dim, " is undefined");
    if (!e.type().is_int_or_uint() || e.type().is_vector()) {
        user_error(what, " of RDom '", rdom, "' dimension ", dim, " must be a scalar integer, got ",
                   e, " of type ", e.type());
    }
    return cast(Int(32), e);
}
} // namespace

RDom::RDom(Expr min, Expr extent, const std::string &name)
    : RDom(std::vector<Range>{Range(std::move(min), std::move(extent))}, name) {}

RDom::RDom(const std::vector<Range> &ranges, const std::string &name) {
    contents = std::make_shared<RDomContents>();
    contents->name = name.empty() ? unique_name("r") : name;
    if (ranges.empty())
        user_error("an RDom needs at least one dimension; '", contents->name, "' has none");
    static const char *suffix[] = {"x", "y", "z", "w"};
    for (size_t i = 0; i < ranges.size(); i++) {
        std::string var_name = contents->name + "." + (i < 4 ? suffix[i] : std::to_string(i));
        Expr mn = int32_bound(ranges[i].min, contents->name, int(i), "min");
        Expr ext = int32_bound(ranges[i].extent, contents->name, int(i), "extent");
        if (auto e = as_const_int(ext); e && *e < 0) {
            user_error("extent of RDom '", contents->name, "' dimension ", i, " must be >= 0, got ",
                       *e);
        }
        contents->vars.push_back({var_name, mn, ext});
    }
    RVar *named[] = {&x, &y, &z, &w};
    for (size_t i = 0; i < ranges.size() && i < 4; i++)
        *named[i] = RVar(contents, int(i));
}

RVar RDom::operator[](int i) const {
    if (!contents) user_error("use of an undefined RDom; give it a domain, e.g. RDom r(0, n)");
    if (i < 0 || i >= dimensions()) {
        user_error("index ", i, " is out of range for RDom '", name(), "', which has ",
                   dimensions(), " dimensions");
    }
    return RVar(contents, i);
}

RDom &RDom::where(const Expr &predicate) {
    if (!contents)
        user_error("where() on an undefined RDom; give it a domain first, e.g. RDom r(0, n)");
    if (!predicate.defined())
        user_error("RDom '", name(), "': where() needs a condition, got an undefined Expr");
    if (!predicate.type().is_bool() || predicate.type().is_vector()) {
        user_error("RDom '", name(), "': where(", predicate,
                   ") needs a boolean condition, got type ", predicate.type(),
                   "; compare it, e.g. r.where(", predicate, " != 0)");
    }
    if (!contents->used_by.empty()) {
        user_error("RDom '", name(), "': where(", predicate, ") comes after ", contents->used_by,
                   " used the RDom; a definition keeps the predicate it was defined with, so "
                   "call where() before defining anything over '",
                   name(), "'");
    }
    // Kept with this RDom's RVars unbound (plain Variables of their names): a predicate holding
    // them would own the RDom that holds it, a cycle that never frees. A definition binds them
    // again when it copies the predicate (Func.cpp: bind_rdom_predicate).
    Expr p = rebind_rvars(predicate, contents.get(), nullptr);
    contents->predicate = contents->predicate.defined() ? contents->predicate && p : p;
    return *this;
}

int RDom::dimensions() const {
    return contents ? int(contents->vars.size()) : 0;
}

const std::string &RDom::name() const {
    static const std::string none = "(undefined)";
    return contents ? contents->name : none;
}

RDom::operator Expr() const {
    return Expr(RVar(*this));
}

RDom::operator RVar() const {
    if (!contents) user_error("use of an undefined RDom; give it a domain, e.g. RDom r(0, n)");
    if (dimensions() != 1) {
        user_error("multi-dimensional RDom '", name(), "' used as one variable: it has ",
                   dimensions(), " dimensions; use r.x, r.y, ... to name one of them");
    }
    return RVar(contents, 0);
}

Expr rebind_rvars(const Expr &e, const RDomContents *from,
                  const std::shared_ptr<RDomContents> &to) {
    class Rebind : public IRMutator {
    public:
        Rebind(const RDomContents *from, const std::shared_ptr<RDomContents> &to)
            : from(from), to(to) {}

    protected:
        using IRMutator::visit;
        Expr visit(const Variable *op) override {
            bool bound_to_from = from ? op->rdom.get() == from : !op->rdom && !op->param;
            if (!bound_to_from) return Expr(op);
            if (!to) return Variable::make(op->type, op->name);
            for (const ReductionVariable &v : to->vars) {
                if (v.name == op->name) return Variable::make(op->type, op->name, nullptr, to);
            }
            return Expr(op);
        }

    private:
        const RDomContents *from;
        const std::shared_ptr<RDomContents> &to;
    } rebind(from, to);
    return rebind.mutate(e);
}

} // namespace kiln
