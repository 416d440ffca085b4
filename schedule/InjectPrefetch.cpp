#include "schedule/InjectPrefetch.h"

#include <algorithm>
#include <map>
#include <vector>

#include "lang/Error.h"
#include "lang/IRMutator.h"
#include "lang/IROperator.h"
#include "lang/IRToolbox.h"
#include "lang/IRVisitor.h"
#include "lang/Simplify.h"
#include "schedule/BoxesTouched.h"

namespace kiln {

namespace {

// The bytes of a cache line: one prefetch per line of the innermost dimension.
constexpr int64_t cache_line_bytes = 64;

struct Request {
    std::string func; ///< the stage's Func, for messages
    int stage = 0;
    StagePrefetch p;
    bool found = false;
};

std::string describe(const Request &r) {
    std::string stage = r.stage == 0 ? "" : ".update(" + std::to_string(r.stage - 1) + ")";
    return "prefetch of '" + r.p.what + "' in '" + r.func + stage + "' at '" + r.p.at + "'";
}

// The first call to `name` in s: its type and what it refers to, to build the prefetched
// element's call.
class FirstCall : public IRVisitor {
public:
    explicit FirstCall(const std::string &name) : name(name) {}
    const Call *call = nullptr;

private:
    const std::string &name;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        if (!call && op->name == name &&
            (op->call_type == Call::Func || op->call_type == Call::Image)) {
            call = op;
        }
        IRVisitor::visit(op);
    }
};

class InjectPrefetches : public IRMutator {
public:
    explicit InjectPrefetches(std::vector<Request> &requests) : requests(requests) {}

private:
    std::vector<Request> &requests;
    std::vector<const For *> enclosing;
    using IRMutator::visit;

    Stmt visit(const For *op) override {
        enclosing.push_back(op);
        Stmt body = mutate(op->body);
        enclosing.pop_back();
        std::vector<Stmt> prefetches;
        for (Request &r : requests) {
            if (r.p.at_var != op->name) continue;
            r.found = true;
            prefetches.push_back(prefetch(r, op, body));
        }
        if (prefetches.empty() && body.same_as(op->body)) return Stmt(op);
        for (auto it = prefetches.rbegin(); it != prefetches.rend(); ++it)
            body = Block::make(*it, body);
        return For::make(op->name, op->min, op->extent, op->for_type, body);
    }

    const For *from_loop(const Request &r, const For *at) const {
        if (r.p.from_var == at->name) return at;
        for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it) {
            if ((*it)->name == r.p.from_var) return *it;
        }
        internal_error(describe(r), ": loop '", r.p.from_var, "' does not enclose '", at->name,
                       "'");
    }

    Stmt prefetch(const Request &r, const For *at, const Stmt &body) const {
        for (const For *outer : enclosing) {
            bool vector = outer->for_type == ForType::Vectorized;
            if (vector || outer->for_type == ForType::GPUBlock ||
                outer->for_type == ForType::GPUThread) {
                user_error(describe(r), ": the loop lies inside the ",
                           vector ? "vectorized" : "GPU", " loop '", outer->name,
                           "'; prefetch is for CPU loops outside vectorized ones");
            }
        }
        FirstCall first(r.p.what);
        first.include(body);
        Box box = boxes_touched(body, r.p.what, true, false);
        if (!first.call || box.empty()) {
            user_error(describe(r), ": the body of '", r.p.at, "' does not read '", r.p.what,
                       "'; prefetch something the loop reads, or at a loop that reads it");
        }
        // Bounds inference has refused unbounded reads of every Func and input before this pass
        // ("cannot infer how much of ... to allocate", "cannot check the region ..."), so one
        // iteration's reads are bounded too.
        for (size_t d = 0; d < box.size(); d++) {
            internal_assert(box[d].is_bounded(), describe(r), ": unbounded reads of dimension ", d,
                            " of '", r.p.what, "'");
        }
        // The iteration `offset` steps ahead, and whether it exists.
        const For *from = from_loop(r, at);
        Expr v = Variable::make(Int(32), from->name);
        Expr last = from->min + from->extent - 1;
        Expr ahead = v + int(r.p.offset);
        Expr exists = r.p.offset >= 0 ? ahead <= last : ahead >= from->min;
        if (r.p.strategy == PrefetchBoundStrategy::Clamp)
            ahead = r.p.offset >= 0 ? min(ahead, last) : max(ahead, from->min);
        std::map<std::string, Expr> shift{{from->name, ahead}};
        std::vector<Expr> mins, maxs;
        for (const Interval &i : box) {
            mins.push_back(simplify(substitute(shift, i.min)));
            maxs.push_back(simplify(substitute(shift, i.max)));
        }
        // One prefetch per cache line along dimension 0 (lines stepped from its min, and its
        // max, so that an unaligned region's last line is not missed), a loop per other one.
        const Call *c = first.call;
        const int64_t lanes = std::max<int64_t>(1, cache_line_bytes / c->type.element_of().bytes());
        std::string prefix = at->name + ".prefetch_" + r.p.what;
        std::vector<Expr> args(box.size());
        for (size_t d = 1; d < box.size(); d++)
            args[d] = Variable::make(Int(32), prefix + "." + std::to_string(d));
        Expr line = Variable::make(Int(32), prefix + ".line");
        args[0] = min(mins[0] + line * int(lanes), maxs[0]);
        Expr element = Call::make(c->type.element_of(), c->name, args, c->call_type, c->func,
                                  c->value_index, c->param, c->buffer);
        Stmt s =
            Evaluate::make(Call::make(Int(32), intrinsic::prefetch, {element}, Call::Intrinsic));
        Expr lines = (maxs[0] - mins[0] + int(lanes - 1)) / int(lanes) + 1;
        s = For::make(prefix + ".line", 0, simplify(lines), ForType::Serial, s);
        for (size_t d = 1; d < box.size(); d++) {
            s = For::make(prefix + "." + std::to_string(d), mins[d],
                          simplify(maxs[d] - mins[d] + 1), ForType::Serial, s);
        }
        if (r.p.strategy == PrefetchBoundStrategy::GuardWithIf) s = IfThenElse::make(exists, s);
        return s;
    }
};

class OnlyPrefetches : public IRVisitor {
public:
    bool only = true;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        const Call *c = op->value.as<Call>();
        only = only && c && c->call_type == Call::Intrinsic && c->name == intrinsic::prefetch;
    }
    void visit(const Store *) override { only = false; }
    void visit(const Provide *) override { only = false; }
    void visit(const Allocate *) override { only = false; }
    void visit(const Realize *) override { only = false; }
    void visit(const AssertStmt *) override { only = false; }
    void visit(const ProducerConsumer *) override { only = false; }
};

} // namespace

bool only_prefetches(const Stmt &s) {
    OnlyPrefetches v;
    v.include(s);
    return v.only;
}

Stmt inject_prefetches(const Stmt &s, const PipelineEnv &env) {
    std::vector<Request> requests;
    for (const auto &[name, schedule] : env.schedules) {
        for (size_t i = 0; i < schedule.stages.size(); i++) {
            for (const StagePrefetch &p : schedule.stages[i].prefetches)
                requests.push_back({name, int(i), p});
        }
    }
    if (requests.empty()) return s;
    Stmt result = InjectPrefetches(requests).mutate(s);
    for (const Request &r : requests) {
        if (r.found) continue;
        const auto &f = env.schedules.at(r.func);
        user_error(
            describe(r), ": '", r.func, "' has no loop '", r.p.at, "' in the lowered pipeline",
            f.compute_level.is_inline ? " (it is inlined: compute it at root or at a loop)" : "");
    }
    return result;
}

} // namespace kiln
