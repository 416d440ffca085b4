// Func::in and ImageParam::in: wrappers (Halide's in()). A wrapper is an ordinary pure Func that
// copies what it wraps. The wrapped Func or ImageParam keeps its wrappers by consumer name, and
// lowering redirects the consumers' calls (schedule/ApplyWrappers.h): the definitions the user
// wrote never change, so the algorithm hash and the reference evaluator ignore wrappers, and a
// global wrapper also covers consumers defined after the call. The directive that made a wrapper
// is kept in the wrapper's own list (an ImageParam has none), naming what it wraps.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IRMutator.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"

namespace kiln {

namespace {

/// What is wrapped, a Func or an ImageParam, seen alike.
struct Wrapped {
    std::string name;
    std::map<std::string, FunctionPtr> *wrappers = nullptr;
    const FunctionContents *func = nullptr;   ///< the Func, if a Func is wrapped
    const ParameterContents *image = nullptr; ///< the image, if an ImageParam is wrapped
    std::vector<std::string> args;            ///< the wrapper's pure Vars
    /// Makes the wrapper: a Func of that name whose values at its pure Vars call what is wrapped.
    FunctionPtr (*define)(const Wrapped &, const std::string &name) = nullptr;
    FunctionPtr func_ptr;                         ///< owning: the Func
    std::shared_ptr<ParameterContents> image_ptr; ///< owning: the image

    bool is_call_to(const Call *op) const {
        if (func) return op->call_type == Call::Func && op->func.get() == func;
        return op->call_type == Call::Image && op->param.get() == image;
    }
};

/// Whether a consumer's definitions read what is wrapped: they call it, or (for a wrapper) call
/// what it wraps, which the consumer reads through it (f.in(g).in(g): g reads f_in_g).
class CallsWrapped : public IRVisitor {
public:
    CallsWrapped(const Wrapped &w, const FunctionContents &consumer) : w(w), consumer(consumer) {}
    bool found = false;

private:
    const Wrapped &w;
    const FunctionContents &consumer;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (w.is_call_to(op)) found = true;
        const std::map<std::string, FunctionPtr> *wrappers = nullptr;
        if (op->call_type == Call::Func && op->func) wrappers = &op->func->wrappers;
        if (op->call_type == Call::Image && op->param) wrappers = &op->param->wrappers;
        if (found || !w.func || !wrappers) return;
        FunctionPtr read = wrapper_read_by(*wrappers, op->name, consumer);
        for (int step = 0; read && step < 64; step++) {
            if (read.get() == w.func) found = true;
            read = wrapper_read_by(read->wrappers, read->name, consumer);
        }
    }
};

bool definitions_call(const FunctionContents &f, const Wrapped &w) {
    CallsWrapped calls(w, f);
    auto include = [&](const Definition &d) {
        for (const Expr &e : d.args)
            calls.include(e);
        for (const Expr &e : d.values)
            calls.include(e);
    };
    include(f.init);
    for (const Definition &u : f.updates)
        include(u);
    return calls.found;
}

/// The wrapper's calls to what it wraps, made not to own it: what is wrapped owns the wrapper.
class WeakenCalls : public IRMutator {
public:
    explicit WeakenCalls(const Wrapped &w) : w(w) {}

protected:
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        Expr e = IRMutator::visit(op);
        const Call *c = e.as<Call>();
        if (!w.is_call_to(c)) return e;
        // Aliasing pointers with no control block: they point at the contents, owning nothing.
        std::shared_ptr<FunctionContents> func(std::shared_ptr<void>(), c->func.get());
        std::shared_ptr<ParameterContents> param(std::shared_ptr<void>(), c->param.get());
        if (!c->func) func = nullptr;
        if (!c->param) param = nullptr;
        return Call::make(c->type, c->name, c->args, c->call_type, func, c->value_index, param,
                          c->buffer);
    }

private:
    const Wrapped &w;
};

FunctionPtr define_func_wrapper(const Wrapped &w, const std::string &name) {
    Func wrapper(name);
    std::vector<Expr> vars;
    for (const std::string &a : w.args)
        vars.push_back(Var(a));
    wrapper(vars) = Func(w.func_ptr)(vars);
    return wrapper.function();
}

FunctionPtr define_image_wrapper(const Wrapped &w, const std::string &name) {
    Func wrapper(name);
    std::vector<Expr> vars;
    for (const std::string &a : w.args)
        vars.push_back(Var(a));
    wrapper(vars) = ImageParam(w.image_ptr).call(vars);
    return wrapper.function();
}

std::string joined(const std::vector<std::string> &names) {
    std::string s;
    for (const std::string &n : names)
        s += (s.empty() ? "" : ", ") + n;
    return s;
}

/// The consumers of a wrapper, by the names it is kept under.
std::vector<std::string> consumers_of(const Wrapped &w, const FunctionPtr &wrapper) {
    std::vector<std::string> names;
    for (const auto &[consumer, made] : *w.wrappers) {
        if (made == wrapper) names.push_back(consumer);
    }
    return names;
}

/// Makes a wrapper named after what it wraps and its consumers, records the in directive in
/// the wrapper's list, and keeps the wrapper under each consumer name ("" for every consumer).
Func make_wrapper(const Wrapped &w, const std::vector<std::string> &consumers) {
    std::string base = w.name + "_in";
    for (const std::string &c : consumers)
        base += "_" + c;
    // A name no other wrapper of w has (g_h for in(g_h) and in({g, h})), the same in every
    // process, so traces replay.
    std::string name = base;
    for (int n = 2;; n++) {
        bool taken = false;
        for (const auto &entry : *w.wrappers)
            taken = taken || entry.second->name == name;
        if (!taken) break;
        name = base + "_" + std::to_string(n);
    }
    FunctionPtr wrapper = w.define(w, name);
    WeakenCalls weaken(w);
    for (Expr &v : wrapper->init.values)
        v = weaken.mutate(v);
    wrapper->wrapped = w.name;

    Directive d;
    d.func = w.name;
    d.primitive = primitive_name(Primitive::in);
    d.vars = consumers;
    d.is_rvar.assign(consumers.size(), false);
    d.target = name;
    d.sequence = next_directive_sequence();
    wrapper->directives.push_back(std::move(d));

    if (consumers.empty()) (*w.wrappers)[""] = wrapper;
    for (const std::string &c : consumers)
        (*w.wrappers)[c] = wrapper;
    return Func(wrapper);
}

/// in(): the wrapper every consumer reads.
Func global_wrapper(const Wrapped &w) {
    auto it = w.wrappers->find("");
    if (it != w.wrappers->end()) return Func(it->second);
    return make_wrapper(w, {});
}

/// in(consumers), after the checks every consumer must pass.
Func consumer_wrapper(const Wrapped &w, const std::vector<Func> &consumers) {
    if (consumers.empty()) {
        user_error("in: no consumers given for '", w.name,
                   "'; name at least one Func that calls it, or call ", w.name,
                   ".in() for all of its consumers");
    }
    std::vector<std::string> names;
    for (const Func &c : consumers) {
        if (c.function().get() == w.func) {
            user_error("in: '", w.name, "' cannot wrap its own calls (", w.name, ".in(", w.name,
                       ")); wrap it for another Func that calls it, or call ", w.name,
                       ".in() for all of its consumers");
        }
        if (std::find(names.begin(), names.end(), c.name()) != names.end()) {
            user_error("in: consumer '", c.name(), "' of '", w.name,
                       "' is named twice; name each consumer once");
        }
        if (!c.defined()) {
            user_error("in: consumer '", c.name(), "' has no definition yet; define it before ",
                       "wrapping '", w.name, "' for it");
        }
        if (!definitions_call(*c.function(), w)) {
            std::vector<std::string> callers;
            for (const FunctionPtr &f : reachable_functions({c.function()})) {
                if (definitions_call(*f, w)) callers.push_back(f->name);
            }
            if (callers.empty()) {
                user_error("in: '", c.name(), "' does not call '", w.name,
                           "', so it would never read a wrapper of it; no Func that '", c.name(),
                           "' reaches calls '", w.name, "' either");
            }
            user_error("in: '", c.name(), "' does not call '", w.name,
                       "', so it would never read a wrapper of it; wrap '", w.name,
                       "' for a Func that calls it: ", joined(callers));
        }
        names.push_back(c.name());
    }
    // The same consumers get the same wrapper; a consumer that reads a wrapper made for other
    // consumers cannot get a second one.
    FunctionPtr existing;
    for (const std::string &c : names) {
        auto it = w.wrappers->find(c);
        if (it == w.wrappers->end()) continue;
        std::vector<std::string> of_it = consumers_of(w, it->second);
        std::vector<std::string> asked(names);
        std::sort(asked.begin(), asked.end());
        if (of_it != asked) {
            user_error("in: '", c, "' already reads '", w.name, "' through '", it->second->name,
                       "', the wrapper of ", joined(of_it),
                       "; call in() with exactly those consumers to get it");
        }
        existing = it->second;
    }
    if (existing) return Func(existing);
    return make_wrapper(w, names);
}

Wrapped wrapped_func(const FunctionPtr &f) {
    if (!f->has_pure_definition()) {
        user_error("in: Func '", f->name, "' has no definition to wrap; define it before calling ",
                   f->name, ".in()");
    }
    Wrapped w;
    w.name = f->name;
    w.wrappers = &f->wrappers;
    w.func = f.get();
    w.args = f->args;
    w.define = define_func_wrapper;
    w.func_ptr = f;
    return w;
}

Wrapped wrapped_image(const std::shared_ptr<ParameterContents> &p) {
    if (!p) user_error("in: the ImageParam is undefined; construct it with a type and dimensions");
    Wrapped w;
    w.name = p->name;
    w.wrappers = &p->wrappers;
    w.image = p.get();
    for (int i = 0; i < p->dimensions; i++)
        w.args.push_back("_" + std::to_string(i));
    w.define = define_image_wrapper;
    w.image_ptr = p;
    return w;
}

} // namespace

Func Func::in(const Func &consumer) {
    return in(std::vector<Func>{consumer});
}

Func Func::in(const std::vector<Func> &consumers) {
    return consumer_wrapper(wrapped_func(contents), consumers);
}

Func Func::in() {
    return global_wrapper(wrapped_func(contents));
}

Func ImageParam::in(const Func &consumer) {
    return in(std::vector<Func>{consumer});
}

Func ImageParam::in(const std::vector<Func> &consumers) {
    return consumer_wrapper(wrapped_image(contents), consumers);
}

Func ImageParam::in() {
    return global_wrapper(wrapped_image(contents));
}

} // namespace kiln
