// kiln_select_shape_variant: the variant of a shape-dispatched kernel for an output buffer.
#include <gtest/gtest.h>

#include "runtime/kiln_runtime.h"

namespace {

const int64_t shapes[] = {64, 48, 40, 24};
const char *const names[] = {"64x48", "40x24", "generic"};

int choose(const kiln_buffer_t *b) {
    return kiln_select_shape_variant(b, 3, 2, shapes, names);
}

} // namespace

TEST(ShapeVariant, TheOutputsExtentsPickTheirVariantAndAnyOtherShapeTheGenericOne) {
    kiln_dimension_t dim[2] = {{0, 40, 1, 0}, {0, 24, 40, 0}};
    kiln_buffer_t b = {};
    b.dimensions = 2;
    b.dim = dim;
    EXPECT_EQ(choose(&b), 1);
    EXPECT_STREQ(kiln_last_shape_variant(), "40x24");
    dim[0].extent = 64;
    dim[1].extent = 48;
    EXPECT_EQ(choose(&b), 0);
    EXPECT_STREQ(kiln_last_shape_variant(), "64x48");
    dim[1].extent = 24; // 64x24: listed extents, but not together
    EXPECT_EQ(choose(&b), 2);
    EXPECT_STREQ(kiln_last_shape_variant(), "generic");
}

TEST(ShapeVariant, ANullOrMalformedOutputGoesToTheGenericVariantWhichReportsIt) {
    EXPECT_EQ(choose(nullptr), 2);
    kiln_dimension_t dim[1] = {{0, 64, 1, 0}};
    kiln_buffer_t b = {};
    b.dimensions = 1; // the kernel's output has 2 dimensions
    b.dim = dim;
    EXPECT_EQ(choose(&b), 2);
    b.dimensions = 2;
    b.dim = nullptr;
    EXPECT_EQ(choose(&b), 2);
}
