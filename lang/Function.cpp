#include "lang/Function.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "lang/Error.h"
#include "lang/IRVisitor.h"

namespace kiln {

namespace {
class CollectCalls : public IRVisitor {
public:
    std::vector<FunctionPtr> found;
    std::set<const FunctionContents *> seen; // by identity, so that a shared name is not hidden

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func && seen.insert(op->func.get()).second) {
            found.push_back(op->func);
        }
    }
};

void collect(CollectCalls &c, const Definition &d) {
    for (const Expr &e : d.args)
        c.include(e);
    for (const Expr &e : d.values)
        c.include(e);
    if (d.rdom) {
        for (const auto &v : d.rdom->vars) {
            c.include(v.min);
            c.include(v.extent);
        }
    }
}
} // namespace

std::vector<FunctionPtr> direct_callees(const FunctionPtr &f) {
    CollectCalls c;
    collect(c, f->init);
    for (const Definition &u : f->updates)
        collect(c, u);
    return c.found;
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
