#include "lang/Function.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "lang/Error.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"

namespace kiln {

std::string buffer_name(const FunctionContents &f, int index) {
    return f.output_types.size() == 1 ? f.name : f.name + "." + std::to_string(index);
}

namespace {
class CollectCalls : public IRVisitor {
public:
    std::vector<FunctionPtr> found;
    std::set<const FunctionContents *> seen; // by identity, so that a shared name is not hidden
    std::vector<std::shared_ptr<ParameterContents>> images;
    std::set<const ParameterContents *> seen_images;

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func && seen.insert(op->func.get()).second) {
            found.push_back(op->func);
        }
        if (op->call_type == Call::Image && op->param &&
            seen_images.insert(op->param.get()).second) {
            images.push_back(op->param);
        }
    }
};

void collect(CollectCalls &c, const Definition &d) {
    for (const Expr &e : d.args)
        c.include(e);
    for (const Expr &e : d.values)
        c.include(e);
    if (d.predicate.defined()) c.include(d.predicate);
    if (d.rdom) {
        for (const auto &v : d.rdom->vars) {
            c.include(v.min);
            c.include(v.extent);
        }
    }
}
} // namespace

namespace {
void collect_all(CollectCalls &c, const FunctionPtr &f) {
    collect(c, f->init);
    for (const Definition &u : f->updates)
        collect(c, u);
}
} // namespace

std::vector<FunctionPtr> direct_callees(const FunctionPtr &f) {
    CollectCalls c;
    collect_all(c, f);
    return c.found;
}

std::vector<std::shared_ptr<ParameterContents>> direct_image_params(const FunctionPtr &f) {
    CollectCalls c;
    collect_all(c, f);
    return c.images;
}

FunctionPtr wrapper_read_by(const std::map<std::string, FunctionPtr> &wrappers,
                            const std::string &wrapped, const FunctionContents &consumer) {
    auto it = wrappers.find(consumer.name);
    if (it == wrappers.end() && consumer.wrapped != wrapped) it = wrappers.find("");
    if (it == wrappers.end() || it->second.get() == &consumer) return nullptr;
    return it->second;
}

std::vector<FunctionPtr> scheduled_functions(const std::vector<FunctionPtr> &outputs) {
    std::vector<FunctionPtr> all = reachable_functions(outputs);
    std::set<const FunctionContents *> listed;
    for (const FunctionPtr &f : all)
        listed.insert(f.get());
    auto add = [&](const std::map<std::string, FunctionPtr> &wrappers) {
        for (const auto &entry : wrappers) {
            if (listed.insert(entry.second.get()).second) all.push_back(entry.second);
        }
    };
    // A wrapper calls only what it wraps, which is listed already; its own wrappers are found
    // when the loop reaches it.
    for (size_t i = 0; i < all.size(); i++) {
        FunctionPtr f = all[i];
        add(f->wrappers);
        for (const auto &p : direct_image_params(f))
            add(p->wrappers);
    }
    return all;
}

std::vector<FunctionPtr> reachable_functions(const std::vector<FunctionPtr> &outputs) {
    std::vector<FunctionPtr> order;
    std::map<std::string, int> state; // 1 = on the stack, 2 = done
    std::map<std::string, const FunctionContents *> by_name;
    std::vector<std::string> stack;
    std::function<void(const FunctionPtr &)> dfs = [&](const FunctionPtr &f) {
        auto [named, inserted] = by_name.emplace(f->name, f.get());
        if (!inserted && named->second != f.get()) {
            user_error("two different Funcs are named '", f->name,
                       "' in one pipeline; give each Func a unique name");
        }
        auto it = state.find(f->name);
        if (it != state.end() && it->second == 2) return;
        if (it != state.end() && it->second == 1) {
            std::string cycle;
            auto start = std::find(stack.begin(), stack.end(), f->name);
            for (auto s = start; s != stack.end(); ++s)
                cycle += *s + " -> ";
            cycle += f->name;
            user_error("recursive definition: ", cycle,
                       "; Funcs may not call each other in a cycle (a Func may call only itself, "
                       "in an update definition); compute the shared values in a separate Func");
        }
        state[f->name] = 1;
        stack.push_back(f->name);
        for (const FunctionPtr &g : direct_callees(f)) {
            if (g == f) continue; // self-calls in updates are reductions
            dfs(g);
        }
        stack.pop_back();
        state[f->name] = 2;
        order.push_back(f);
    };
    for (const FunctionPtr &f : outputs)
        dfs(f);
    return order;
}

} // namespace kiln
