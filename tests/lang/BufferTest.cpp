// Buffer<T> of the front end: owning and wrapping memory, strides, mins, element access in up to
// eight dimensions, and its use as an input of an algorithm.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IR.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"

namespace kiln {
namespace {

TEST(Buffer, OwningBufferIs64ByteAlignedAndZeroFilled) {
    for (int n : {1, 3, 17, 1000}) {
        Buffer<float> b({n, 3});
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n;
        for (int64_t i = 0; i < b.number_of_elements(); i++)
            ASSERT_EQ(b.data()[i], 0.0f) << n;
    }
}

TEST(Buffer, OwningBufferHasDenseStridesWithDimensionZeroInnermost) {
    Buffer<int16_t> b(5, 4, 3);
    ASSERT_EQ(b.dimensions(), 3);
    EXPECT_EQ(b.dim(0).stride, 1);
    EXPECT_EQ(b.dim(1).stride, 5);
    EXPECT_EQ(b.dim(2).stride, 20);
    EXPECT_EQ(b.dim(2).extent, 3);
    EXPECT_EQ(b.dim(1).min, 0);
    EXPECT_EQ(b.type(), Int(16));
    EXPECT_EQ(b.number_of_elements(), 60);
}

TEST(Buffer, WidthHeightAndChannelsAreTheFirstThreeExtents) {
    Buffer<uint8_t> b(7, 5, 3);
    EXPECT_EQ(b.width(), 7);
    EXPECT_EQ(b.height(), 5);
    EXPECT_EQ(b.channels(), 3);
    Buffer<uint8_t> line(9);
    EXPECT_EQ(line.height(), 1);
    EXPECT_EQ(line.channels(), 1);
}

TEST(Buffer, ElementAccessWritesWhereTheStridesSay) {
    Buffer<int> b(4, 3);
    b(1, 2) = 42;
    EXPECT_EQ(b.data()[2 * 4 + 1], 42);
    EXPECT_EQ(b(1, 2), 42);
    EXPECT_EQ(b.address_of({1, 2}), reinterpret_cast<uint8_t *>(b.data() + 9));
}

TEST(Buffer, NamedBufferKeepsItsNameAndUnnamedOnesGetUniqueNames) {
    Buffer<float> a({2}, "weights");
    EXPECT_EQ(a.name(), "weights");
    Buffer<float> b(2), c(2);
    EXPECT_FALSE(b.name().empty());
    EXPECT_NE(b.name(), c.name());
}

TEST(Buffer, WrapsUserMemoryWithoutCopying) {
    std::vector<int> storage(6);
    std::iota(storage.begin(), storage.end(), 0);
    Buffer<int> b(storage.data(), {3, 2});
    EXPECT_EQ(b.data(), storage.data());
    EXPECT_EQ(b(2, 1), 5);
    b(0, 1) = 100;
    EXPECT_EQ(storage[3], 100);
}

TEST(Buffer, WrapsUserMemoryWithExplicitStrides) {
    // A 3x2 window, column-major, of a 10-wide row-major array, starting at row 1, column 2.
    std::vector<float> storage(40);
    std::iota(storage.begin(), storage.end(), 0.0f);
    std::vector<BufferDim> dims = {{0, 2, 10}, {0, 3, 1}};
    Buffer<float> b(BufferBase(Float(32), storage.data() + 12, dims, "window"));
    EXPECT_EQ(b(0, 0), 12.0f);
    EXPECT_EQ(b(1, 0), 22.0f);
    EXPECT_EQ(b(0, 2), 14.0f);
    EXPECT_EQ(b(1, 2), 24.0f);
    EXPECT_EQ(b.number_of_elements(), 6);
}

TEST(Buffer, FillWritesOnlyTheElementsOfAStridedBuffer) {
    std::vector<int> storage(20, -1);
    // 3 columns of each of 4 rows of width 5: the last two columns of every row are padding.
    Buffer<int> b(BufferBase(Int(32), storage.data(), {{0, 3, 1}, {0, 4, 5}}));
    b.fill(7);
    for (int y = 0; y < 4; y++) {
        for (int x = 0; x < 5; x++)
            EXPECT_EQ(storage[y * 5 + x], x < 3 ? 7 : -1) << x << ", " << y;
    }
}

TEST(Buffer, ForEachOffsetVisitsElementsWithDimensionZeroFastest) {
    Buffer<int> b(BufferBase(Int(32), reinterpret_cast<int *>(64), {{0, 2, 3}, {0, 2, 1}}));
    std::vector<int64_t> offsets;
    b.for_each_offset([&](int64_t o) { offsets.push_back(o); });
    EXPECT_EQ(offsets, (std::vector<int64_t>{0, 3, 1, 4}));
}

TEST(Buffer, ForEachOffsetVisitsNothingInAnEmptyBuffer) {
    Buffer<int> b(3, 0);
    int visits = 0;
    b.for_each_offset([&](int64_t) { visits++; });
    EXPECT_EQ(visits, 0);
    EXPECT_EQ(b.number_of_elements(), 0);
}

TEST(Buffer, SetMinShiftsCoordinatesButNotTheData) {
    Buffer<int> b(4, 3);
    b(0, 0) = 1;
    b(3, 2) = 2;
    b.set_min({10, -5});
    EXPECT_EQ(b.dim(0).min, 10);
    EXPECT_EQ(b.dim(1).min, -5);
    EXPECT_EQ(b(10, -5), 1);
    EXPECT_EQ(b(13, -3), 2);
    EXPECT_THROW((void)b(0, 0), RuntimeError);
}

TEST(Buffer, ElementAccessUsesTheMinOfEachDimension) {
    Buffer<uint8_t> b(3, 3);
    b.set_min({-1, 1});
    for (int y = 1; y < 4; y++) {
        for (int x = -1; x < 2; x++)
            b(x, y) = uint8_t((x + 1) + 3 * (y - 1));
    }
    for (int i = 0; i < 9; i++)
        EXPECT_EQ(b.data()[i], i);
}

TEST(Buffer, SupportsFiveDimensions) {
    Buffer<int> b(2, 3, 2, 2, 3);
    ASSERT_EQ(b.dimensions(), 5);
    EXPECT_EQ(b.dim(4).stride, 24);
    b(1, 2, 1, 0, 2) = 9;
    EXPECT_EQ(b.data()[1 + 2 * 2 + 1 * 6 + 0 * 12 + 2 * 24], 9);
    EXPECT_EQ(b(1, 2, 1, 0, 2), 9);
}

TEST(Buffer, SupportsEightDimensionsButNotNine) {
    Buffer<uint8_t> b(std::vector<int>(8, 2));
    EXPECT_EQ(b.dimensions(), 8);
    b(1, 1, 1, 1, 1, 1, 1, 1) = 3;
    EXPECT_EQ(b.data()[255], 3);
    EXPECT_THROW(Buffer<uint8_t>(std::vector<int>(9, 2)), CompileError);
}

TEST(Buffer, ZeroDimensionalBufferHoldsOneElement) {
    Buffer<double> b(std::vector<int>{});
    EXPECT_EQ(b.dimensions(), 0);
    EXPECT_EQ(b.number_of_elements(), 1);
    b() = 2.5;
    EXPECT_EQ(b.data()[0], 2.5);
}

TEST(Buffer, CopiesShareTheSameMemoryAndShape) {
    Buffer<int> a(4);
    Buffer<int> b = a;
    b(2) = 5;
    EXPECT_EQ(a(2), 5);
    b.set_min({1});
    EXPECT_EQ(a.dim(0).min, 1);
}

TEST(Buffer, MemoryOutlivesTheFirstHandle) {
    Buffer<int> kept;
    {
        Buffer<int> b(3);
        b(1) = 11;
        kept = b;
    }
    EXPECT_EQ(kept(1), 11);
}

TEST(Buffer, UntypedBufferHoldsAnyType) {
    Buffer<> b(Float(64), {3, 2}, "any");
    EXPECT_EQ(b.type(), Float(64));
    EXPECT_EQ(b.dimensions(), 2);
    Buffer<double> typed(b);
    typed(2, 1) = 1.5;
    EXPECT_EQ(reinterpret_cast<double *>(b.raw_data())[5], 1.5);
}

TEST(Buffer, BoolBufferTakesOneBytePerElement) {
    Buffer<bool> b(5);
    b(4) = true;
    EXPECT_EQ(b.raw_data()[4], 1);
    EXPECT_EQ(b.type().bytes(), 1);
}

TEST(Buffer, CallWithExprCoordinatesIsAnImageCallOfInt32Arguments) {
    Buffer<float> b({4, 4}, "img");
    Var x("x");
    Expr e = b(x, cast<uint8_t>(x));
    const Call *c = e.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->call_type, Call::Image);
    EXPECT_EQ(c->buffer, b.get_contents());
    EXPECT_EQ(c->type, Float(32));
    ASSERT_EQ(c->args.size(), 2u);
    EXPECT_EQ(c->args[1].type(), Int(32));
    EXPECT_EQ(to_string(e), "img(x, int32(uint8(x)))");
}

TEST(Buffer, CallMixesIntegersAndVars) {
    Buffer<int> b({4, 4}, "b");
    Var y("y");
    EXPECT_EQ(to_string(b(0, y)), "b(0, y)");
}

TEST(Buffer, NegativeExtentIsRejected) {
    try {
        Buffer<int> b({3, -1}, "b");
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "buffer 'b' dimension 1: extent must be >= 0, got -1");
    }
}

TEST(Buffer, MissingDimensionIsNamed) {
    Buffer<int> b({3}, "b");
    try {
        (void)b.dim(1);
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "dimension 1 of buffer 'b' does not exist; it has 1 dimension");
    }
}

TEST(Buffer, SetMinWithWrongCountIsRejected) {
    Buffer<int> b({3, 3}, "b");
    try {
        b.set_min({1});
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "set_min of buffer 'b' got 1 min, but the buffer has 2 dimensions");
    }
}

TEST(Buffer, WrappingANullPointerIsRejected) {
    try {
        Buffer<int> b(static_cast<int *>(nullptr), {3}, "b");
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "buffer 'b': cannot wrap a null pointer");
    }
}

TEST(Buffer, UseOfAnUndefinedBufferIsAnError) {
    Buffer<int> b;
    EXPECT_FALSE(b.defined());
    try {
        (void)b.dimensions();
        FAIL() << "no error";
    } catch (const CompileError &e) {
        EXPECT_STREQ(e.what(), "use of an undefined Buffer");
    }
}

} // namespace
} // namespace kiln
