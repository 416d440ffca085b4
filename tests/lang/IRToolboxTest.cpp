// The shared IR helpers of lang/IRToolbox.h: map substitution, uses, names, scoped bindings.
#include "lang/IRToolbox.h"

#include <gtest/gtest.h>

#include "lang/IREquality.h"
#include "lang/IROperator.h"

namespace kiln {
namespace {

Expr var(const std::string &name) {
    return Variable::make(Int(32), name);
}

TEST(IRToolbox, SubstitutesEveryNameOfTheMapInOnePass) {
    Expr e = var("x") + var("y") * var("z");
    Expr r = substitute({{"x", Expr(1)}, {"y", var("x")}}, e);
    // The values are not substituted into each other: y becomes x, not 1.
    EXPECT_TRUE(equal(r, Expr(1) + var("x") * var("z")));
}

TEST(IRToolbox, SubstitutionRespectsShadowingByLetsAndLoops) {
    Expr e = Let::make("x", var("x") + 1, var("x") * 2);
    EXPECT_TRUE(equal(substitute({{"x", Expr(5)}}, e), Let::make("x", Expr(5) + 1, var("x") * 2)));
    Stmt s = For::make("x", var("x"), 4, ForType::Serial, Store::make("b", var("x"), 0));
    Stmt want = For::make("x", Expr(5), 4, ForType::Serial, Store::make("b", var("x"), 0));
    EXPECT_TRUE(equal(substitute({{"x", Expr(5)}}, s), want));
}

TEST(IRToolbox, SubstitutionReturnsTheSameNodeWhenNothingChanges) {
    Expr e = var("a") + var("b");
    EXPECT_TRUE(substitute({{"c", Expr(1)}}, e).same_as(e));
}

TEST(IRToolbox, UsesCountsEveryOccurrenceButNotBufferNames) {
    Expr e = Let::make("t", var("x"), var("t") + Load::make(Int(32), "buf", 0));
    EXPECT_TRUE(expr_uses_var(e, "x"));
    EXPECT_TRUE(expr_uses_var(e, "t")); // bound inside, still counted
    EXPECT_FALSE(expr_uses_var(e, "buf"));
    EXPECT_TRUE(expr_uses_vars(e, {"q", "x"}));
    Stmt s = For::make("i", 0, var("n"), ForType::Serial, Store::make("out", var("i"), 0));
    EXPECT_TRUE(stmt_uses_var(s, "n"));
    EXPECT_FALSE(stmt_uses_vars(s, {"out", "m"}));
}

TEST(IRToolbox, CollectsVariablesBindersAndBuffersApart) {
    Stmt s = LetStmt::make(
        "m", var("n"),
        Allocate::make("tmp", Int(32), MemoryType::Stack, {4}, Expr(),
                       For::make("i", 0, var("m"), ForType::Serial,
                                 Store::make("out", Load::make(Int(32), "tmp", var("i")), 0))));
    IRNames names = collect_names(s);
    EXPECT_EQ(names.variables, (std::set<std::string>{"i", "m", "n"}));
    EXPECT_EQ(names.free_variables, (std::set<std::string>{"n"}));
    EXPECT_EQ(names.binders, (std::map<std::string, int>{{"i", 1}, {"m", 1}}));
    EXPECT_EQ(names.loads, (std::set<std::string>{"tmp"}));
    EXPECT_EQ(names.stores, (std::set<std::string>{"out"}));
    EXPECT_EQ(names.allocations, (std::set<std::string>{"tmp"}));
    EXPECT_EQ(names.buffers(), (std::set<std::string>{"out", "tmp"}));
    EXPECT_EQ(names.all(), (std::set<std::string>{"i", "m", "n", "out", "tmp"}));
}

TEST(IRToolbox, FreeVariablesRespectShadowingAndCountBinders) {
    // x is used free in the first let's value, then bound twice.
    Stmt s = LetStmt::make(
        "x", var("x") + 1,
        Block::make(LetStmt::make("x", 2, Evaluate::make(var("x"))), Evaluate::make(var("y"))));
    IRNames names = collect_names(s);
    EXPECT_EQ(names.free_variables, (std::set<std::string>{"x", "y"}));
    EXPECT_EQ(names.binders.at("x"), 2);
    EXPECT_EQ(collect_names(Let::make("t", 1, var("t"))).free_variables.size(), 0u);
}

TEST(IRToolbox, ScopedBindingRestoresOrHidesTheOuterBinding) {
    std::map<std::string, int> table{{"a", 1}};
    {
        ScopedBinding<int> inner(table, "a", 2);
        EXPECT_EQ(table.at("a"), 2);
        {
            ScopedBinding<int> hidden(table, "a", std::nullopt);
            EXPECT_FALSE(table.count("a"));
        }
        EXPECT_EQ(table.at("a"), 2);
        ScopedBinding<int> fresh(table, "b", 3);
        EXPECT_EQ(table.at("b"), 3);
    }
    EXPECT_EQ(table, (std::map<std::string, int>{{"a", 1}}));
}

TEST(IRToolbox, LetStackSubstitutesInnermostFirst) {
    LetStack lets;
    lets.push("a", var("n") * 2);
    lets.push("b", var("a") + 1);
    EXPECT_TRUE(equal(lets.apply(var("b")), var("n") * 2 + 1));
    lets.pop();
    EXPECT_TRUE(equal(lets.apply(var("b")), var("b")));
}

// Replaces each loop extent by its value with the enclosing lets seen through.
class ExtentsThroughLets : public LetScopedMutator {
protected:
    using LetScopedMutator::visit;
    Stmt visit(const For *op) override {
        return For::make(op->name, op->min, lets.apply(op->extent), op->for_type, mutate(op->body));
    }
};

TEST(IRToolbox, LetScopedMutatorKeepsTheEnclosingLets) {
    Stmt loop = For::make("i", 0, var("e"), ForType::Serial, Evaluate::make(0));
    Stmt s = LetStmt::make("e", var("n") + 1, Block::make(loop, loop));
    Stmt want = LetStmt::make(
        "e", var("n") + 1,
        Block::make(For::make("i", 0, var("n") + 1, ForType::Serial, Evaluate::make(0)),
                    For::make("i", 0, var("n") + 1, ForType::Serial, Evaluate::make(0))));
    EXPECT_TRUE(equal(ExtentsThroughLets().mutate(s), want));
    // Outside the let, the stack is empty again.
    EXPECT_TRUE(equal(ExtentsThroughLets().mutate(loop), loop));
}

} // namespace
} // namespace kiln
