#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

constexpr kiln_type_t float32 = {kiln_type_float, 32, 1};
constexpr kiln_type_t uint8 = {kiln_type_uint, 8, 1};

// A dense float buffer of 256 x 100 elements over real memory.
struct Image {
    std::vector<float> data = std::vector<float>(size_t(256) * 100);
    kiln_dimension_t dims[2] = {{0, 256, 1, 0}, {0, 100, 256, 0}};
    kiln_buffer_t buffer{};
    Image() {
        buffer.host = reinterpret_cast<uint8_t *>(data.data());
        buffer.type = float32;
        buffer.dimensions = 2;
        buffer.dim = dims;
    }
};

} // namespace

TEST(Buffer, SizeOfADenseBufferIsElementsTimesElementSize) {
    Image image;
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), 256u * 100u * 4u);
}

TEST(Buffer, SizeSpansPaddedRowsUpToTheLastElement) {
    Image image;
    image.dims[0].extent = 10;
    image.dims[1] = {0, 3, 16, 0};
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), (2u * 16u + 10u) * 4u);
}

TEST(Buffer, SizeCountsNegativeStridesBelowTheHostPointer) {
    Image image;
    image.dims[0] = {0, 4, -1, 0};
    image.dims[1] = {0, 3, 8, 0};
    // Offsets reach from -3 to +16 elements.
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), 20u * 4u);
}

TEST(Buffer, SizeOfABufferWithAnEmptyDimensionIsZero) {
    Image image;
    image.dims[1].extent = 0;
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), 0u);
    EXPECT_EQ(kiln_buffer_size_in_bytes(nullptr), 0u);
}

TEST(Buffer, SizeCountsVectorLanesAndOneBytePerBool) {
    Image image;
    image.buffer.type = {kiln_type_float, 32, 4};
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), 256u * 100u * 16u);
    image.buffer.type = {kiln_type_bool, 1, 1};
    EXPECT_EQ(kiln_buffer_size_in_bytes(&image.buffer), 256u * 100u);
}

TEST(Buffer, CheckAcceptsAMatchingBuffer) {
    Image image;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", float32, 2), kiln_success);
}

TEST(Buffer, CheckRejectsANullBuffer) {
    EXPECT_EQ(kiln_buffer_check(nullptr, "in", float32, 2), kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' is null");
}

TEST(Buffer, CheckRejectsANullHostPointer) {
    Image image;
    image.buffer.host = nullptr;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", float32, 2), kiln_error_buffer_argument_null);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' has no host memory (host is null)");
}

TEST(Buffer, CheckRejectsAWrongTypeNamingBothTypes) {
    Image image;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", uint8, 2), kiln_error_bad_type);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'in' has type float32 but the pipeline expects uint8");
}

TEST(Buffer, CheckSpellsVectorBoolAndUnknownTypes) {
    Image image;
    image.buffer.type = {kiln_type_int, 16, 8};
    kiln_buffer_check(&image.buffer, "out", {kiln_type_bool, 1, 1}, 2);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'out' has type int16x8 but the pipeline expects bool");
    image.buffer.type = {9, 32, 1};
    kiln_buffer_check(&image.buffer, "out", float32, 2);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'out' has type <type code 9, 32 bits, 1 lanes> but the pipeline "
                 "expects float32");
}

TEST(Buffer, CheckRejectsAWrongNumberOfDimensions) {
    Image image;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", float32, 3), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'in' has 2 dimensions but the pipeline expects 3");
}

TEST(Buffer, CheckRejectsANullDimArray) {
    Image image;
    image.buffer.dim = nullptr;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", float32, 2), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' has 2 dimensions but a null dim array");
}

TEST(Buffer, CheckRejectsANegativeExtent) {
    Image image;
    image.dims[1].extent = -3;
    EXPECT_EQ(kiln_buffer_check(&image.buffer, "in", float32, 2), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' dimension 1 has negative extent -3");
}

TEST(Buffer, CheckNamesAnUnnamedBufferAsSuch) {
    kiln_buffer_check(nullptr, nullptr, float32, 2);
    EXPECT_STREQ(kiln_last_error_message(), "buffer '<unnamed>' is null");
}

TEST(Buffer, RegionInsideTheBufferPasses) {
    Image image;
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 0, 0, 256), kiln_success);
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 1, 10, 20), kiln_success);
}

TEST(Buffer, RegionBeyondTheBufferNamesBothInclusiveRanges) {
    Image image;
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 0, -1, 258),
              kiln_error_access_out_of_bounds);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'in' dimension 0: the schedule needs [-1, 256] but the buffer covers "
                 "[0, 255]");
}

TEST(Buffer, RegionIsMeasuredFromTheBufferMin) {
    Image image;
    image.dims[1].min = 50; // covers [50, 149]
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 1, 50, 100), kiln_success);
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 1, 51, 100),
              kiln_error_access_out_of_bounds);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'in' dimension 1: the schedule needs [51, 150] but the buffer covers "
                 "[50, 149]");
}

TEST(Buffer, AnEmptyRegionAlwaysFits) {
    Image image;
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 0, 1000, 0), kiln_success);
}

TEST(Buffer, RegionOfAnEmptyBufferSaysItIsEmpty) {
    Image image;
    image.dims[0].extent = 0;
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 0, 0, 8),
              kiln_error_access_out_of_bounds);
    EXPECT_STREQ(kiln_last_error_message(),
                 "buffer 'in' dimension 0: the schedule needs [0, 7] but the buffer is empty "
                 "(extent 0)");
}

TEST(Buffer, RegionOfAMissingDimensionIsBadDimensions) {
    Image image;
    EXPECT_EQ(kiln_buffer_check_region(&image.buffer, "in", 2, 0, 1), kiln_error_bad_dimensions);
    EXPECT_STREQ(kiln_last_error_message(), "buffer 'in' has no dimension 2 (it has 2 dimensions)");
}
