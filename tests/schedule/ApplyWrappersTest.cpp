// apply_wrappers and the lowered loop nest: which Funcs read a wrapper and which still read the
// original, wrappers of wrappers, wrappers no consumer of the pipeline reads, and the user's Funcs
// left unchanged by lowering (twice).
#include "schedule/ApplyWrappers.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lang/Func.h"
#include "lang/IROperator.h"
#include "lang/IRVisitor.h"
#include "lang/Param.h"
#include "schedule/Lower.h"

namespace kiln {
namespace {

/// f read by g and by h; out reads both.
struct Diamond {
    Func f{"f"}, g{"g"}, h{"h"}, out{"out"};
    Diamond() {
        Var x("x"), y("y");
        f(x, y) = x * 2 + y;
        g(x, y) = f(x, y) + f(x + 1, y);
        h(x, y) = f(x, y) * 3;
        out(x, y) = g(x, y) - h(x, y);
    }
    std::vector<FunctionPtr> outputs() const { return {out.function()}; }
};

class CallNames : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Func || op->call_type == Call::Image) names.insert(op->name);
    }
};

/// The Funcs and images each definition of f calls.
std::set<std::string> calls_of(const FunctionContents &f) {
    CallNames c;
    for (const Expr &v : f.init.values)
        c.include(v);
    for (const Definition &u : f.updates) {
        for (const Expr &v : u.values)
            c.include(v);
    }
    return c.names;
}

std::set<std::string> names_of(const std::map<std::string, FunctionPtr> &funcs) {
    std::set<std::string> names;
    for (const auto &entry : funcs)
        names.insert(entry.first);
    return names;
}

using Names = std::set<std::string>;

TEST(ApplyWrappers, TheConsumerReadsItsWrapperAndTheOtherConsumerTheOriginal) {
    Diamond d;
    d.f.in(d.g);
    std::map<std::string, FunctionPtr> funcs = apply_wrappers(d.outputs());
    EXPECT_EQ(names_of(funcs), (Names{"f", "f_in_g", "g", "h", "out"}));
    EXPECT_EQ(calls_of(*funcs.at("g")), Names{"f_in_g"});
    EXPECT_EQ(calls_of(*funcs.at("h")), Names{"f"});
    EXPECT_EQ(calls_of(*funcs.at("f_in_g")), Names{"f"});
    // Only g changed: the others are the user's own Funcs; g is a copy, the user's g unchanged.
    EXPECT_EQ(funcs.at("h"), d.h.function());
    EXPECT_EQ(funcs.at("f"), d.f.function());
    EXPECT_NE(funcs.at("g"), d.g.function());
    EXPECT_EQ(calls_of(*d.g.function()), Names{"f"});
}

TEST(ApplyWrappers, AGlobalWrapperIsReadByEveryConsumerButTheWrappersAndOnesWithTheirOwn) {
    Diamond d;
    d.f.in();
    d.f.in(d.g);
    std::map<std::string, FunctionPtr> funcs = apply_wrappers(d.outputs());
    EXPECT_EQ(names_of(funcs), (Names{"f", "f_in", "f_in_g", "g", "h", "out"}));
    EXPECT_EQ(calls_of(*funcs.at("g")), Names{"f_in_g"});
    EXPECT_EQ(calls_of(*funcs.at("h")), Names{"f_in"});
    EXPECT_EQ(calls_of(*funcs.at("f_in")), Names{"f"});
    EXPECT_EQ(calls_of(*funcs.at("f_in_g")), Names{"f"});
}

TEST(ApplyWrappers, AWrapperOfAWrapperForTheSameConsumerIsFollowed) {
    Diamond d;
    Func inner = d.f.in(d.g);
    Func outer = inner.in(d.g);
    EXPECT_EQ(outer.name(), "f_in_g_in_g");
    std::map<std::string, FunctionPtr> funcs = apply_wrappers(d.outputs());
    EXPECT_EQ(calls_of(*funcs.at("g")), Names{"f_in_g_in_g"});
    EXPECT_EQ(calls_of(*funcs.at("f_in_g_in_g")), Names{"f_in_g"});
    EXPECT_EQ(calls_of(*funcs.at("f_in_g")), Names{"f"});
}

TEST(ApplyWrappers, AWrapperNoConsumerOfThePipelineReadsIsLeftOut) {
    Diamond d;
    d.f.in(d.h);
    std::map<std::string, FunctionPtr> funcs = apply_wrappers({d.g.function()});
    EXPECT_EQ(names_of(funcs), (Names{"f", "g"}));
}

TEST(ApplyWrappers, TheUpdatesOfAConsumerReadTheWrapperToo) {
    ImageParam B(Float(32), 2, "B");
    Func C("C");
    Var j("j"), i("i");
    RDom k(0, 16, "k");
    C(j, i) = B(j, i);
    C(j, i) += B(j, k) * 2.0f;
    B.in(C);
    std::map<std::string, FunctionPtr> funcs = apply_wrappers({C.function()});
    EXPECT_EQ(names_of(funcs), (Names{"B_in_C", "C"}));
    EXPECT_EQ(calls_of(*funcs.at("C")), (Names{"B_in_C", "C"})); // the update reads C itself
    EXPECT_EQ(calls_of(*funcs.at("B_in_C")), Names{"B"});
}

/// The wrapper's call to the image does not own it (the image owns the wrapper); the copy that
/// lowering uses owns it, so nothing lowered points at an image it does not keep alive.
class ImageOwnership : public IRVisitor {
public:
    long use_count = -1;

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->call_type == Call::Image) use_count = op->param.use_count();
    }
};

TEST(ApplyWrappers, TheLoweredWrapperOwnsTheImageItReads) {
    ImageParam B(Float(32), 1, "B");
    Func C("C");
    Var x("x");
    C(x) = B(x) + 1.0f;
    Func Bp = B.in();
    ImageOwnership user, lowered;
    user.include(Bp.value());
    EXPECT_EQ(user.use_count, 0);
    std::map<std::string, FunctionPtr> funcs = apply_wrappers({C.function()});
    lowered.include(funcs.at("B_in")->init.values[0]);
    EXPECT_GT(lowered.use_count, 0);
}

/// Per producer in the lowered code, the buffers its loops load from; and every allocation.
class LoweredReads : public IRVisitor {
public:
    std::map<std::string, std::set<std::string>> reads;
    std::set<std::string> allocations;

private:
    std::vector<std::string> producing;
    using IRVisitor::visit;
    void visit(const ProducerConsumer *op) override {
        if (op->is_producer) producing.push_back(op->name);
        IRVisitor::visit(op);
        if (op->is_producer) producing.pop_back();
    }
    void visit(const Load *op) override {
        IRVisitor::visit(op);
        if (!producing.empty()) reads[producing.back()].insert(op->name);
    }
    void visit(const Allocate *op) override {
        allocations.insert(op->name);
        IRVisitor::visit(op);
    }
};

TEST(ApplyWrappers, InTheLoweredLoopNestOnlyTheConsumerReadsTheWrapper) {
    Diamond d;
    Var x("x");
    d.f.compute_root();
    d.g.compute_root();
    d.h.compute_root();
    d.f.in(d.g).compute_root().vectorize(x, 4);
    LoweredFunc lowered = lower({d.out}, "diamond");
    LoweredReads r;
    r.include(lowered.body);
    EXPECT_EQ(r.reads["g"], Names{"f_in_g"});
    EXPECT_EQ(r.reads["h"], Names{"f"});
    EXPECT_EQ(r.reads["f_in_g"], Names{"f"});
    EXPECT_TRUE(r.allocations.count("f_in_g"));
    EXPECT_TRUE(r.allocations.count("f"));
}

TEST(ApplyWrappers, LoweringTwiceGivesTheSameCodeAndLeavesTheUsersFuncsAlone) {
    Diamond d;
    Var x("x"), y("y");
    d.g.compute_root();
    Func w = d.f.in(d.g);
    w.compute_at(d.g, y).vectorize(x, 4);
    Expr g_before = d.g.value();
    std::string first = lower_to_text({d.out}, "diamond");
    std::string second = lower_to_text({d.out}, "diamond");
    EXPECT_EQ(first, second);
    EXPECT_NE(first.find("produce f_in_g"), std::string::npos);
    EXPECT_TRUE(d.g.value().same_as(g_before));
    EXPECT_EQ(d.f.function()->wrappers.size(), 1u);
    EXPECT_EQ(w.directives().size(), 4u); // in, compute_at, split, vectorize
}

} // namespace
} // namespace kiln
