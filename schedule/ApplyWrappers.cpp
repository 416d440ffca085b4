#include "schedule/ApplyWrappers.h"

#include <memory>
#include <set>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/Param.h"

namespace kiln {

namespace {

/// The owning pointers of the Funcs and images met so far, by address. A wrapper's call to what
/// it wraps does not own it (lang/Function.h); the copy lowering uses owns it again, so that
/// nothing lowered (an argument's ImageParam) points at contents it does not keep alive.
struct Owners {
    std::map<const FunctionContents *, FunctionPtr> funcs;
    std::map<const ParameterContents *, std::shared_ptr<ParameterContents>> images;

    void note(const FunctionPtr &f) {
        if (f && f.use_count() > 0) funcs.emplace(f.get(), f);
    }
    void note(const std::shared_ptr<ParameterContents> &p) {
        if (p && p.use_count() > 0) images.emplace(p.get(), p);
    }
    FunctionPtr owning(const FunctionPtr &f) const {
        auto it = funcs.find(f.get());
        return it == funcs.end() ? f : it->second;
    }
    std::shared_ptr<ParameterContents> owning(const std::shared_ptr<ParameterContents> &p) const {
        auto it = images.find(p.get());
        return it == images.end() ? p : it->second;
    }
};

class RedirectCalls : public IRMutator {
public:
    RedirectCalls(const FunctionContents &consumer, Owners &owners)
        : consumer(consumer), owners(owners) {}

    Definition definition(const Definition &d) {
        Definition out = d;
        for (Expr &a : out.args)
            a = mutate(a);
        for (Expr &v : out.values)
            v = mutate(v);
        if (out.predicate.defined()) out.predicate = mutate(out.predicate);
        return out;
    }

protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        Expr e = IRMutator::visit(op);
        const Call *c = e.as<Call>();
        const std::map<std::string, FunctionPtr> *wrappers = nullptr;
        if (c->call_type == Call::Func && c->func) {
            owners.note(c->func);
            wrappers = &c->func->wrappers;
        } else if (c->call_type == Call::Image && c->param) {
            owners.note(c->param);
            wrappers = &c->param->wrappers;
        } else {
            return e;
        }
        FunctionPtr w = wrapper_read_by(*wrappers, c->name, consumer);
        if (!w) return strengthen(c, e);
        std::set<const FunctionContents *> seen{w.get()};
        owners.note(w);
        while (FunctionPtr next = wrapper_read_by(w->wrappers, w->name, consumer)) {
            if (!seen.insert(next.get()).second) break;
            owners.note(next);
            w = next;
        }
        int index = c->call_type == Call::Func ? c->value_index : 0;
        return Call::make(c->type, w->name, c->args, Call::Func, w, index);
    }

private:
    const FunctionContents &consumer;
    Owners &owners;

    /// A call that does not own its Func or image (a wrapper's), made to own it when its owner
    /// is known. A Func's calls to itself stay as they are.
    Expr strengthen(const Call *c, const Expr &e) const {
        bool weak_func = c->func && c->func.use_count() == 0 && c->func.get() != &consumer;
        bool weak_param = c->param && c->param.use_count() == 0;
        FunctionPtr func = weak_func ? owners.owning(c->func) : c->func;
        std::shared_ptr<ParameterContents> param = weak_param ? owners.owning(c->param) : c->param;
        // Pointers compare by address: what changes here is ownership.
        if (func.use_count() == c->func.use_count() && param.use_count() == c->param.use_count())
            return e;
        return Call::make(c->type, c->name, c->args, c->call_type, func, c->value_index, param,
                          c->buffer);
    }
};

/// f as lowering sees it: a copy with its calls redirected, or f itself when none moves.
FunctionPtr redirect(const FunctionPtr &f, Owners &owners) {
    RedirectCalls redirect_calls(*f, owners);
    Definition init = redirect_calls.definition(f->init);
    std::vector<Definition> updates;
    for (const Definition &u : f->updates)
        updates.push_back(redirect_calls.definition(u));
    auto same = [](const Definition &a, const Definition &b) {
        for (size_t i = 0; i < a.args.size(); i++) {
            if (!a.args[i].same_as(b.args[i])) return false;
        }
        for (size_t i = 0; i < a.values.size(); i++) {
            if (!a.values[i].same_as(b.values[i])) return false;
        }
        return a.predicate.same_as(b.predicate);
    };
    bool changed = !same(init, f->init);
    for (size_t i = 0; i < updates.size(); i++)
        changed = changed || !same(updates[i], f->updates[i]);
    FunctionPtr owned = owners.owning(f);
    if (!changed) return owned;
    auto copy = std::make_shared<FunctionContents>(*f);
    copy->init = std::move(init);
    copy->updates = std::move(updates);
    return copy;
}

} // namespace

std::map<std::string, FunctionPtr> apply_wrappers(const std::vector<FunctionPtr> &outputs) {
    reachable_functions(outputs); // rejects call cycles and shared names as written
    Owners owners;
    for (const FunctionPtr &o : outputs)
        owners.note(o);
    std::map<std::string, FunctionPtr> lowered;
    std::map<std::string, const FunctionContents *> originals;
    std::vector<FunctionPtr> work(outputs.rbegin(), outputs.rend());
    while (!work.empty()) {
        FunctionPtr f = work.back();
        work.pop_back();
        auto [named, inserted] = originals.emplace(f->name, f.get());
        if (!inserted) {
            if (named->second == f.get()) continue;
            user_error("two different Funcs are named '", f->name,
                       "' in one pipeline; give each Func a unique name");
        }
        FunctionPtr g = redirect(f, owners);
        lowered[f->name] = g;
        for (const FunctionPtr &callee : direct_callees(g))
            work.push_back(callee);
    }
    return lowered;
}

} // namespace kiln
