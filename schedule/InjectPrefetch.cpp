#include "schedule/InjectPrefetch.h"

#include <algorithm>
#include <map>
#include <optional>
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

class InjectPrefetches : public LetScopedMutator {
public:
    explicit InjectPrefetches(std::vector<Request> &requests) : requests(requests) {}

private:
    std::vector<Request> &requests;
    std::vector<const For *> enclosing;
    using LetScopedMutator::visit;

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
        Stmt s = straight_prefetches(c, mins, lanes, widths(mins, maxs, from, r.p));
        if (!s.defined())
            s = prefetch_loops(c, mins, maxs, lanes, at->name + ".prefetch_" + r.p.what);
        if (r.p.strategy == PrefetchBoundStrategy::GuardWithIf) s = IfThenElse::make(exists, s);
        return s;
    }

    static Stmt prefetch_of(const Call *c, const std::vector<Expr> &args) {
        Expr element = Call::make(c->type.element_of(), c->name, args, c->call_type, c->func,
                                  c->value_index, c->param, c->buffer);
        return Evaluate::make(Call::make(Int(32), intrinsic::prefetch, {element}, Call::Intrinsic));
    }

    // The region's lines as loops: the line count along dimension 0 and the other dimensions'
    // extents may depend on the loops around.
    static Stmt prefetch_loops(const Call *c, const std::vector<Expr> &mins,
                               const std::vector<Expr> &maxs, int64_t lanes,
                               const std::string &prefix) {
        std::vector<Expr> args(mins.size());
        for (size_t d = 1; d < mins.size(); d++)
            args[d] = Variable::make(Int(32), prefix + "." + std::to_string(d));
        Expr line = Variable::make(Int(32), prefix + ".line");
        args[0] = min(mins[0] + line * int(lanes), maxs[0]);
        Stmt s = prefetch_of(c, args);
        Expr lines = (maxs[0] - mins[0] + int(lanes - 1)) / int(lanes) + 1;
        s = For::make(prefix + ".line", 0, simplify(lines), ForType::Serial, s);
        for (size_t d = 1; d < mins.size(); d++) {
            s = For::make(prefix + "." + std::to_string(d), mins[d],
                          simplify(maxs[d] - mins[d] + 1), ForType::Serial, s);
        }
        return s;
    }

    // max - min per dimension where each is a constant; empty otherwise. Seen through the lets
    // around (a loop's extent is a name bound outside it), with the from loop's variable where
    // the prefetch happens: the region there may look variable only for iterations whose ahead
    // is past the loop, which the guard skips (GuardWithIf) or the clamp moves back (Clamp).
    std::vector<int64_t> widths(const std::vector<Expr> &mins, const std::vector<Expr> &maxs,
                                const For *from, const StagePrefetch &p) const {
        std::map<std::string, ConstantBounds> bounds;
        std::optional<int64_t> lo = as_const_int(simplify(lets.apply(from->min)));
        std::optional<int64_t> extent = as_const_int(simplify(lets.apply(from->extent)));
        if (lo && extent && p.strategy != PrefetchBoundStrategy::NonFaulting) {
            int64_t first = *lo, last = *lo + *extent - 1;
            if (p.strategy == PrefetchBoundStrategy::GuardWithIf) {
                first -= std::min<int64_t>(p.offset, 0);
                last -= std::max<int64_t>(p.offset, 0);
            }
            if (first <= last) bounds[from->name] = {first, last};
        }
        std::vector<int64_t> result;
        for (size_t d = 0; d < mins.size(); d++) {
            std::optional<int64_t> w =
                as_const_int(simplify(lets.apply(maxs[d] - mins[d]), bounds));
            if (!w || *w < 0) return {};
            result.push_back(*w);
        }
        return result;
    }

    // A region of constant size (widths) and at most max_straight_lines lines as straight-line
    // prefetches, each at its min plus a constant: no loop counters and no min per line (a
    // tile's 6 rows of A, 12 prefetches). Undefined otherwise. (Inside the innermost loop of a
    // register tile LLVM still spills part of it for them: prefetch at a loop around it.)
    static Stmt straight_prefetches(const Call *c, const std::vector<Expr> &mins, int64_t lanes,
                                    const std::vector<int64_t> &widths) {
        constexpr int64_t max_straight_lines = 16;
        if (widths.empty()) return Stmt();
        int64_t count = 1;
        for (size_t d = 0; d < widths.size(); d++) {
            count *= d == 0 ? (widths[d] + lanes - 1) / lanes + 1 : widths[d] + 1;
            if (count > max_straight_lines) return Stmt();
        }
        std::vector<Stmt> lines;
        std::vector<int64_t> at(mins.size(), 0); // the line's offsets from the mins
        while (true) {
            std::vector<Expr> args;
            for (size_t d = 0; d < mins.size(); d++)
                args.push_back(simplify(mins[d] + int(at[d])));
            lines.push_back(prefetch_of(c, args));
            // The next line: dimension 0 steps by a line up to its last element, then the
            // next dimension by one.
            size_t d = 0;
            for (; d < at.size(); d++) {
                int64_t step = d == 0 ? lanes : 1;
                if (at[d] < widths[d]) {
                    at[d] = std::min(at[d] + step, widths[d]);
                    break;
                }
                at[d] = 0;
            }
            if (d == at.size()) break;
        }
        return Block::make(lines);
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
