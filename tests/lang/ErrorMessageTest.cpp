// Every user error of the front end, with its full message: errors are part of the product, so
// each test pins the text (the Func, the variable and the value, and how to fix it), not only the
// exception type. Messages start lowercase and end without a period.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/Function.h"
#include "lang/IR.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"

namespace kiln {
namespace {

/// The message of the E that f throws; a failure if it throws nothing or something else.
template <typename E, typename F>
std::string message_of(F &&f) {
    try {
        f();
    } catch (const E &e) {
        std::string m = e.what();
        EXPECT_FALSE(m.empty());
        if (!m.empty()) {
            EXPECT_FALSE(std::isupper(static_cast<unsigned char>(m[0])))
                << "message starts with a capital: " << m;
            EXPECT_NE(m.back(), '.') << "message ends with a period: " << m;
        }
        return m;
    } catch (const std::exception &e) {
        ADD_FAILURE() << "threw the wrong kind of error: " << e.what();
        return "";
    }
    ADD_FAILURE() << "threw nothing";
    return "";
}

template <typename F>
std::string compile_error(F &&f) {
    return message_of<CompileError>(std::forward<F>(f));
}

template <typename F>
std::string runtime_error_of(F &&f) {
    return message_of<RuntimeError>(std::forward<F>(f));
}

// Calls.

TEST(ErrorMessage, CallWithWrongArityNamesFuncAndBothArgumentLists) {
    Var x("x"), y("y");
    Func f("f"), g("g");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] { g(x) = f(x); }),
              "call f(x) gives 1 argument, but Func 'f' has 2 dimensions, as in f(x, y)");
}

TEST(ErrorMessage, CallToUndefinedFuncNamesFuncAndSite) {
    Var x("x");
    Func f("f"), g("g");
    EXPECT_EQ(compile_error([&] { g(x) = f(x + 1) * 2; }),
              "call f((x + 1)) to Func 'f' before it is defined; define 'f' first (a Func can "
              "call itself only in an update, after its pure definition)");
}

TEST(ErrorMessage, NonIntegerFuncArgumentNamesSiteValueAndType) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = x;
    EXPECT_EQ(compile_error([&] { g(x) = f(x * 0.5f); }),
              "argument 0 of f((float32(x) * 0.5f)) must be a scalar integer, got "
              "(float32(x) * 0.5f) of type float32; convert it with cast<int>(...), or "
              "cast<int>(floor(...)) to round down");
}

TEST(ErrorMessage, NonIntegerBufferArgumentNamesBufferSiteAndType) {
    Buffer<float> b({4}, "b");
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)b(x * 0.5f); }),
              "argument 0 of b((float32(x) * 0.5f)) (buffer 'b') must be a scalar integer, got "
              "(float32(x) * 0.5f) of type float32; convert it with cast<int>(...), or "
              "cast<int>(floor(...)) to round down");
}

TEST(ErrorMessage, NonIntegerImageParamArgumentNamesSiteAndType) {
    ImageParam in(UInt(8), 1, "in");
    EXPECT_EQ(compile_error([&] { (void)in(1.5f); }),
              "argument 0 of in(1.5f) must be a scalar integer, got 1.5f of type float32; "
              "convert it with cast<int>(...), or cast<int>(floor(...)) to round down");
}

TEST(ErrorMessage, BufferCallWithWrongArityNamesBufferAndDimensions) {
    Buffer<int> b({4, 4}, "b");
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)b(x); }),
              "call b(x) gives 1 argument, but buffer 'b' has 2 dimensions");
}

TEST(ErrorMessage, ImageParamCallWithWrongArityNamesParamAndDimensions) {
    ImageParam in(Float(32), 3, "in");
    Var x("x"), y("y");
    EXPECT_EQ(compile_error([&] { (void)in(x, y); }),
              "call in(x, y) gives 2 arguments, but ImageParam 'in' has 3 dimensions");
}

TEST(ErrorMessage, MultiValuedFuncUsedAsOneValueSaysHowToSelect) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = Tuple{x, x * 2};
    EXPECT_EQ(compile_error([&] { g(x) = f(x) + 1; }),
              "call f(x) used as one value, but Func 'f' has 2 values; select one with f(x)[i]");
}

TEST(ErrorMessage, TupleIndexOutOfRangeNamesFuncAndIndex) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, x * 2};
    EXPECT_EQ(compile_error([&] { (void)f(x)[2]; }),
              "call f(x)[2]: Func 'f' has 2 values, so index 2 is out of range");
}

// Pure definitions.

TEST(ErrorMessage, FuncDefinedTwiceNamesFuncAndNewDefinition) {
    Var x("x");
    Func f("f");
    f(x) = x;
    EXPECT_EQ(compile_error([&] { f(x) = x * 2; }),
              "'f' is defined twice: f(x) = (x * 2) replaces its pure definition; use a new "
              "Func, or refer to 'f' on the right-hand side to update it");
}

TEST(ErrorMessage, FuncDefinedTwiceWithAnotherTypeIsStillReportedAsDefinedTwice) {
    Var x("x");
    Func f("f");
    f(x) = x;
    EXPECT_EQ(compile_error([&] { f(x) = 1.5f; }),
              "'f' is defined twice: f(x) = 1.5f replaces its pure definition; use a new Func, "
              "or refer to 'f' on the right-hand side to update it");
}

TEST(ErrorMessage, PureDefinitionWithNonVarArgumentSaysToDefineItPurelyFirst) {
    Var x("x");
    Func f("f");
    EXPECT_EQ(compile_error([&] { f(x + 1) = 0; }),
              "the first definition of 'f' must be pure: argument 0 of f((x + 1)) must be a Var, "
              "got (x + 1); give it a pure definition first, e.g. f(x) = 0");
}

TEST(ErrorMessage, PureDefinitionWithRepeatedVarNamesIt) {
    Var x("x");
    Func f("f");
    EXPECT_EQ(compile_error([&] { f(x, x) = x; }),
              "pure definition of 'f': Var 'x' appears twice in f(x, x); each argument needs its "
              "own Var");
}

TEST(ErrorMessage, PureDefinitionUsingAFreeVarNamesItAndTheFix) {
    Var x("x"), y("y");
    Func f("f");
    EXPECT_EQ(compile_error([&] { f(x) = x + y; }),
              "definition of f(x): variable 'y' is not one of its arguments; add it as an "
              "argument of 'f' or make it a Param");
}

TEST(ErrorMessage, RecursivePureDefinitionSaysToDefineTheFuncFirst) {
    Var x("x");
    Func f("f");
    EXPECT_EQ(compile_error([&] { f(x) = f(x - 1) + 1; }),
              "call f((x - 1)) to Func 'f' before it is defined; define 'f' first (a Func can "
              "call itself only in an update, after its pure definition)");
}

TEST(ErrorMessage, CycleThroughTwoFuncsIsNamedByReachableFunctions) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = x;
    g(x) = f(x) + 1;
    f(x) = f(x) + g(x); // an update of f that calls g, which calls f
    EXPECT_EQ(compile_error([&] { reachable_functions({f.function()}); }),
              "recursive definition: f -> g -> f; Funcs may not call each other in a cycle (a "
              "Func may call only itself, in an update definition); compute the shared values in "
              "a separate Func");
    f.function()->updates.clear(); // the cycle would otherwise own itself (a leak under ASan)
}

TEST(ErrorMessage, CycleIsAlsoReportedWhenPrintingTheFunc) {
    Var x("x");
    Func f("f"), g("g");
    f(x) = x;
    g(x) = f(x) + 1;
    f(x) = f(x) + g(x);
    EXPECT_EQ(
        compile_error([&] { (void)f.to_string(); }).rfind("recursive definition: f -> g -> f; ", 0),
        0u);
    f.function()->updates.clear(); // break the cycle, so that nothing leaks
}

TEST(ErrorMessage, TwoFuncsWithTheSameNameAreRejected) {
    Var x("x");
    Func a("same"), b("same");
    a(x) = x;
    b(x) = a(x) + 1; // a call to another Func named 'same' is not a self-call
    EXPECT_EQ(compile_error([&] { reachable_functions({b.function()}); }),
              "two different Funcs are named 'same' in one pipeline; give each Func a unique "
              "name");
}

// Update definitions.

TEST(ErrorMessage, UpdateWithFloatValueIntoIntFuncNamesFuncValueAndTypes) {
    Var x("x");
    Func f("f");
    f(x) = 0;
    EXPECT_EQ(compile_error([&] { f(x) = f(x) + 0.5f; }),
              "update f(x): the value (float32(f(x)) + 0.5f) has type float32, but 'f' has type "
              "int32; cast it, e.g. cast<int32_t>(...)");
}

TEST(ErrorMessage, CompoundUpdateWithFloatValueIntoIntFuncIsNotSilentlyTruncated) {
    Var x("x");
    Func f("f");
    f(x) = 0;
    EXPECT_EQ(compile_error([&] { f(x) += 0.5f; }),
              "update f(x) += 0.5f: the value has type float32, but 'f' has type int32; cast it, "
              "e.g. f(x) += cast<int32_t>(0.5f)");
    EXPECT_EQ(f.num_updates(), 0);
}

TEST(ErrorMessage, UpdateOfTupleFuncWithWrongTypeNamesTheValueIndex) {
    Var x("x");
    Func f("f");
    f(x) = Tuple{x, 0.0f};
    Expr scale = cast<double>(x);
    EXPECT_EQ(compile_error([&] {
                  f(x) = Tuple{f(x)[0] + 1, f(x)[1] * scale};
              }),
              "update f(x): value 1 (float64(f(x)[1]) * float64(x)) has type float64, but 'f' has "
              "type float32; cast it, e.g. cast<float>(...)");
}

TEST(ErrorMessage, UpdateWithWrongNumberOfValuesNamesBothCounts) {
    Var x("x");
    Func f("f");
    f(x) = x;
    EXPECT_EQ(compile_error([&] {
                  f(x) = Tuple{f(x), f(x)};
              }),
              "update f(x) gives 2 values, but 'f' has 1");
}

TEST(ErrorMessage, UpdateWithWrongArityNamesFuncAndPureArguments) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = 0;
    RDom r(0, 4, "r");
    EXPECT_EQ(compile_error([&] { f(r) = 1; }),
              "update f(r.x) gives 1 argument, but 'f' has 2 dimensions, as in f(x, y)");
}

TEST(ErrorMessage, UpdateWithMisplacedPureVarNamesFuncVarAndPosition) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] { f(y, x) = f(y, x) * 2; }),
              "update f(y, x): pure variable 'y' is argument 0, but the pure definition f(x, y) "
              "has it as argument 1; pure variables keep their positions in updates");
}

TEST(ErrorMessage, UpdateWithUnknownVarOnTheLeftNamesItAndThePureVars) {
    Var x("x"), z("z");
    Func f("f");
    f(x) = x;
    EXPECT_EQ(compile_error([&] { f(z) = f(z) + 1; }),
              "update f(z): variable 'z' is not a pure variable of f(x) nor an RVar; use the pure "
              "Vars of 'f' or an RDom");
}

TEST(ErrorMessage, UpdateWithPureVarInsideALeftArgumentSaysToUseAnRVar) {
    Var x("x");
    Func f("f");
    f(x) = x;
    EXPECT_EQ(compile_error([&] { f(x + 1) = f(x) + 1; }),
              "update f((x + 1)): pure variable 'x' appears inside an argument; on the left a pure "
              "variable may only be a whole argument in its own position, so use an RVar to "
              "update shifted sites");
}

TEST(ErrorMessage, UpdateUsingPureVarAbsentFromTheLeftNamesVarAndWhereToPutIt) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = 0;
    RDom r(0, 4, "r");
    EXPECT_EQ(compile_error([&] { f(r, y) = f(r, y) + x; }),
              "update f(r.x, y) = (f(r.x, y) + x): pure variable 'x' is used on the right-hand "
              "side but is not an argument on the left; put it on the left as argument 0 as in "
              "f(x, y), or use an RVar");
}

TEST(ErrorMessage, UpdateUsingUnknownVarOnTheRightNamesIt) {
    Var x("x"), z("z");
    Func f("f");
    f(x) = 0;
    RDom r(0, 4, "r");
    EXPECT_EQ(compile_error([&] { f(r) = f(r) + z; }),
              "update f(r.x) = (f(r.x) + z): variable 'z' is neither a pure variable of f(x) nor "
              "an RVar; make it an RDom, a Param or an argument of 'f'");
}

TEST(ErrorMessage, FailedCompoundUpdateOfUndefinedFuncLeavesItUndefined) {
    Var x("x");
    Func f("f"), g("g");
    RDom r(0, 3, "r"), s(0, 3, "s");
    g(x) = x;
    EXPECT_EQ(compile_error([&] { f(x) += g(r + s); }).substr(0, 18), "update f(x) uses R");
    EXPECT_FALSE(f.defined());
}

// RVars and RDoms.

TEST(ErrorMessage, RVarInPureDefinitionNamesRVarRDomAndDefinition) {
    Var x("x");
    Func f("f");
    RDom r(0, 10, "r");
    EXPECT_EQ(compile_error([&] { f(x) = x + r; }),
              "pure definition f(x) = (x + r.x) uses RVar 'r.x' of RDom 'r'; RVars belong in "
              "update definitions (or inside sum(), maximum(), ...)");
}

TEST(ErrorMessage, UpdateUsingRVarsOfTwoRDomsNamesBoth) {
    Var x("x");
    Func f("f");
    f(x) = 0;
    RDom r(0, 3, "r"), s(0, 5, "s");
    EXPECT_EQ(compile_error([&] { f(x) = f(x) + r + s; }),
              "update f(x) uses RVar 'r.x' of RDom 'r' and RVar 's.x' of RDom 's'; one update may "
              "use only one RDom, so combine them into one multi-dimensional RDom");
}

TEST(ErrorMessage, UnboundRVarInAnExpressionNamesIt) {
    RVar k("k");
    EXPECT_EQ(compile_error([&] { Expr e = Expr(k) + 1; }),
              "unbound RVar 'k' used in an expression; only RVars of an RDom can appear in "
              "definitions, e.g. RDom r(0, n); ... r.x");
}

TEST(ErrorMessage, MissingDimensionOfAnRDomSaysWhichRVarsExist) {
    RDom r(0, 10, "r");
    EXPECT_EQ(compile_error([&] { Expr e = r.y; }),
              "use of an RVar that names no dimension (such as r.y of a one-dimensional RDom); "
              "use only as many of r.x, r.y, r.z, r.w as the RDom has dimensions");
}

TEST(ErrorMessage, RDomWithNegativeExtentNamesRDomDimensionAndValue) {
    EXPECT_EQ(compile_error([&] {
                  RDom r({{0, 4}, {2, -3}}, "r");
              }),
              "extent of RDom 'r' dimension 1 must be >= 0, got -3");
}

TEST(ErrorMessage, RDomWithFloatBoundNamesRDomAndType) {
    EXPECT_EQ(compile_error([&] { RDom r(0.5f, 4, "r"); }),
              "min of RDom 'r' dimension 0 must be a scalar integer, got 0.5f of type float32");
}

TEST(ErrorMessage, MultiDimensionalRDomUsedAsOneVariableSaysToNameADimension) {
    RDom r({{0, 4}, {0, 4}}, "r");
    EXPECT_EQ(compile_error([&] { Expr e = r; }),
              "multi-dimensional RDom 'r' used as one variable: it has 2 dimensions; use r.x, "
              "r.y, ... to name one of them");
}

TEST(ErrorMessage, RDomIndexOutOfRangeNamesRDomAndIndex) {
    RDom r({{0, 4}, {0, 4}}, "r");
    EXPECT_EQ(compile_error([&] { (void)r[2]; }),
              "index 2 is out of range for RDom 'r', which has 2 dimensions");
}

TEST(ErrorMessage, UndefinedRDomSaysHowToDefineIt) {
    RDom r;
    EXPECT_EQ(compile_error([&] { Expr e = r; }),
              "use of an undefined RDom; give it a domain, e.g. RDom r(0, n)");
}

// Expressions.

TEST(ErrorMessage, IntegerLiteralThatDoesNotFitNamesConstantTypeAndExpression) {
    Var x("x");
    Expr u = cast<uint8_t>(x);
    EXPECT_EQ(compile_error([&] { (void)(u + 300); }),
              "the constant 300 does not fit in uint8, the type of uint8(x), in uint8(x) + 300; "
              "cast uint8(x) to a wider type first, e.g. cast<int>(uint8(x))");
}

TEST(ErrorMessage, IntegerLiteralOnTheLeftIsQuotedOnTheLeft) {
    Var x("x");
    Expr s = cast<int8_t>(x);
    EXPECT_EQ(compile_error([&] { (void)(-200 * s); }),
              "the constant -200 does not fit in int8, the type of int8(x), in -200 * int8(x); "
              "cast int8(x) to a wider type first, e.g. cast<int>(int8(x))");
}

TEST(ErrorMessage, LiteralThatDoesNotFitInMinIsQuotedAsACall) {
    Var x("x");
    Expr u = cast<uint16_t>(x);
    EXPECT_EQ(compile_error([&] { (void)min(u, -1); }),
              "the constant -1 does not fit in uint16, the type of uint16(x), in "
              "min(uint16(x), -1); cast uint16(x) to a wider type first, e.g. "
              "cast<int>(uint16(x))");
}

TEST(ErrorMessage, ClampBoundThatDoesNotFitIsNotWrapped) {
    Var x("x");
    Expr u = cast<uint8_t>(x);
    EXPECT_EQ(compile_error([&] { (void)clamp(u, 0, 300); }),
              "clamp(uint8(x), 0, 300): the bound 300 does not fit in uint8, the type of "
              "uint8(x); cast uint8(x) to a wider type first, e.g. cast<int>(uint8(x))");
}

TEST(ErrorMessage, SelectWithNonBoolConditionNamesConditionTypeAndFix) {
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)select(x, 1, 2); }),
              "select: condition x has type int32, expected bool; compare it with zero first, "
              "e.g. select(x != 0, ...)");
}

TEST(ErrorMessage, SelectWithMismatchedLanesNamesBothCounts) {
    Var x("x");
    Expr c = Broadcast::make(Expr(x) > 0, 4);
    Expr v = Ramp::make(Expr(x), 1, 8);
    EXPECT_EQ(compile_error([&] { (void)select(c, v, v); }),
              "select: condition x4((x > 0)) has 4 lanes, but the values ramp(x, 1, 8) and "
              "ramp(x, 1, 8) have 8");
}

TEST(ErrorMessage, LogicalOperatorOnIntegerSaysToCompareFirst) {
    Var x("x"), y("y");
    EXPECT_EQ(compile_error([&] { (void)(x && y > 0); }),
              "operator && needs a bool operand, got x of type int32; compare it with zero first");
}

TEST(ErrorMessage, VectorsOfDifferentLanesCannotBeCombined) {
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)(Ramp::make(Expr(x), 1, 4) + Ramp::make(Expr(x), 1, 8)); }),
              "cannot combine vectors of 4 and 8 lanes in one expression");
}

TEST(ErrorMessage, OperatorOnUndefinedExpressionSaysSo) {
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)(Expr() + x); }),
              "operator + applied to an undefined expression");
}

// Buffers and parameters.

TEST(ErrorMessage, ImageParamSetWithBufferOfWrongDimensionalityNamesBoth) {
    ImageParam in(Float(32), 2, "in");
    Buffer<float> b({4, 4, 3}, "rgb");
    EXPECT_EQ(compile_error([&] { in.set(b); }),
              "cannot bind buffer 'rgb' with 3 dimensions to ImageParam 'in', which has 2; bind "
              "a buffer with 2 dimensions");
}

TEST(ErrorMessage, ImageParamSetWithBufferOfWrongTypeNamesBothTypes) {
    ImageParam in(UInt(8), 1, "in");
    Buffer<float> b({4}, "b");
    EXPECT_EQ(compile_error([&] { in.set(b); }),
              "cannot bind buffer 'b' of float32 to ImageParam 'in' of uint8; bind a buffer of "
              "uint8");
}

TEST(ErrorMessage, ImageParamShapeOfMissingDimensionNamesIt) {
    ImageParam in(UInt(8), 2, "in");
    EXPECT_EQ(compile_error([&] { (void)in.extent(2); }),
              "dimension 2 of ImageParam 'in' does not exist; it has 2 dimensions");
}

TEST(ErrorMessage, BufferAccessOutsideItsBoundsIsARuntimeErrorNamingBufferAndCoordinate) {
    Buffer<int> b({4, 5}, "b");
    EXPECT_EQ(runtime_error_of([&] { b(2, 7) = 1; }),
              "buffer 'b': access (2, 7) is out of bounds: dimension 1 covers [0, 4], got 7");
}

TEST(ErrorMessage, BufferAccessBelowAShiftedMinNamesTheShiftedRange) {
    Buffer<int> b({4}, "b");
    b.set_min({10});
    EXPECT_EQ(runtime_error_of([&] { (void)b(9); }),
              "buffer 'b': access (9) is out of bounds: dimension 0 covers [10, 13], got 9");
}

TEST(ErrorMessage, BufferAccessWithWrongNumberOfCoordinatesIsARuntimeError) {
    Buffer<int> b({4, 5}, "b");
    EXPECT_EQ(runtime_error_of([&] { (void)b(1); }),
              "buffer 'b': access (1) gives 1 coordinate, but the buffer has 2 dimensions");
}

TEST(ErrorMessage, TypedViewOfBufferOfAnotherTypeNamesBothTypes) {
    Buffer<float> b({4}, "b");
    EXPECT_EQ(compile_error([&] { Buffer<int> i(b); }), "buffer 'b' holds float32, not int32");
}

// Reductions, compute() and boundary conditions.

TEST(ErrorMessage, ReducerWithoutRVarSaysThereIsNothingToReduce) {
    Var x("x");
    EXPECT_EQ(compile_error([&] { (void)sum(x * 2); }),
              "sum((x * 2)): the argument uses no RVar, so there is nothing to reduce over; use an "
              "RDom inside it");
}

TEST(ErrorMessage, ReducerOverTwoRDomsNamesBoth) {
    RDom r(0, 3, "r"), s(0, 3, "s");
    EXPECT_EQ(compile_error([&] { (void)maximum(r + s); }),
              "maximum: the argument uses RVars of two RDoms, 'r' and 's'; combine them into one "
              "RDom");
}

TEST(ErrorMessage, ComputeWithShapeOfOtherRankNamesBoth) {
    EXPECT_EQ(compile_error([&] {
                  compute(
                      {4, 4}, [](Var i) { return i; }, "c");
              }),
              "compute 'c': the body takes 1 Var, but the shape has 2 dimensions");
}

TEST(ErrorMessage, BoundaryConditionWithWrongNumberOfBoundsNamesFuncAndCounts) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] {
                  repeat_edge(f, {{0, 4}});
              }),
              "repeat_edge: Func 'f' has 2 dimensions, but bounds for 1 dimension were given");
}

// GPU schedules (checked when called; the loops are checked when the pipeline is lowered).

TEST(ErrorMessage, GpuBlocksNamingALoopTwiceSaysToNameEachOnce) {
    Var x("x"), y("y");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] { f.gpu_blocks(x, x); }),
              "gpu_blocks of 'f': 'x' is named twice; name each loop once");
    EXPECT_TRUE(f.directives().empty());
}

TEST(ErrorMessage, GpuThreadsOfAnUpdateNamingALoopTwiceNamesTheStage) {
    Var x("x"), y("y");
    Func f("f");
    RDom r(0, 4, "r");
    f(x, y) = x + y;
    f(x, y) += r;
    EXPECT_EQ(compile_error([&] { f.update(0).gpu_threads(x, y, x); }),
              "gpu_threads of 'f.update(0)': 'x' is named twice; name each loop once");
}

TEST(ErrorMessage, GpuBlocksOfAnUndefinedFuncSaysThereIsNothingToSchedule) {
    Func f("f");
    EXPECT_EQ(compile_error([&] { f.gpu_blocks(Var("x")); }),
              "gpu_blocks: Func 'f' has no definition to schedule yet");
}

TEST(ErrorMessage, GpuTileWithANonPositiveFactorNamesTheVarAndRecordsNothing) {
    Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] { f.gpu_tile(x, y, xo, yo, xi, yi, 16, 0); }),
              "gpu_tile: factor for 'y' of 'f' must be a positive constant, got 0");
    EXPECT_EQ(compile_error([&] { f.gpu_tile(x, xo, xi, -8); }),
              "gpu_tile: factor for 'x' of 'f' must be a positive constant, got -8");
    EXPECT_TRUE(f.directives().empty());
}

TEST(ErrorMessage, GpuTileOfThreeLoopsWithANonPositiveFactorNamesTheVar) {
    Var x("x"), y("y"), z("z");
    Func f("f");
    f(x, y, z) = x + y + z;
    EXPECT_EQ(compile_error([&] {
                  f.gpu_tile(x, y, z, Var("xo"), Var("yo"), Var("zo"), Var("xi"), Var("yi"),
                             Var("zi"), 8, 8, 0);
              }),
              "gpu_tile: factor for 'z' of 'f' must be a positive constant, got 0");
}

TEST(ErrorMessage, GpuTileNamingALoopTwiceRecordsNothing) {
    Var x("x"), y("y"), xo("xo"), xi("xi");
    Func f("f");
    f(x, y) = x + y;
    EXPECT_EQ(compile_error([&] { f.gpu_tile(x, y, xo, xo, xi, Var("yi"), 8, 8); }),
              "gpu_tile of 'f': 'xo' is named twice; name each loop once");
    EXPECT_EQ(compile_error([&] { f.gpu_tile(x, x, xo, Var("yo"), xi, Var("yi"), 8, 8); }),
              "gpu_tile of 'f': 'x' is named twice; name each loop once");
    EXPECT_TRUE(f.directives().empty());
}

} // namespace
} // namespace kiln
