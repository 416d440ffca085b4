#include "codegen/InjectProfiling.h"

#include <map>

#include "lang/IRMutator.h"

namespace kiln {

namespace {

Expr profiler_switch(Expr id, int mode) {
    return Call::make(Int(32), intrinsic::profiler_switch, {std::move(id), Expr(mode)},
                      Call::Intrinsic);
}

class InjectProfiling : public IRMutator {
public:
    std::vector<std::string> funcs = {profile_overhead_name};

    int id_of(const std::string &func) {
        auto [it, added] = ids.emplace(func, int(funcs.size()));
        if (added) funcs.push_back(func);
        return it->second;
    }

private:
    using IRMutator::visit;

    std::map<std::string, int> ids;
    int current = 0; ///< the Func whose code is being mutated (0: none)
    int next_name = 0;

    /// body between a switch to `id` and a switch back to what ran before.
    Stmt wrap(const Stmt &body, int id) {
        const std::string prev = "profiler.prev" + std::to_string(next_name++);
        return LetStmt::make(
            prev, profiler_switch(Expr(id), 0),
            Block::make(body, Evaluate::make(profiler_switch(Variable::make(Int(32), prev), 0))));
    }

    Stmt visit(const ProducerConsumer *op) override {
        if (!op->is_producer) return IRMutator::visit(op);
        const int id = id_of(op->name), outer = current;
        current = id;
        Stmt body = mutate(op->body);
        current = outer;
        return ProducerConsumer::make(op->name, true, wrap(body, id));
    }

    Stmt visit(const For *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->for_type != ForType::Parallel) return s;
        const For *f = s.as<For>();
        return For::make(f->name, f->min, f->extent, f->for_type, wrap(f->body, current));
    }
};

} // namespace

LoweredFunc inject_profiling(const LoweredFunc &f, std::vector<std::string> *funcs) {
    InjectProfiling inject;
    Stmt body = inject.mutate(f.body);
    LoweredFunc g = f;
    g.body = Block::make(Block::make(Evaluate::make(profiler_switch(Expr(0), 1)), body),
                         Evaluate::make(profiler_switch(Expr(-1), 2)));
    *funcs = inject.funcs;
    return g;
}

} // namespace kiln
