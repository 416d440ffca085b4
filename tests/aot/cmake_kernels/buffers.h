/* Two-dimensional float buffers over the caller's memory, for the C programs of this folder. */
#ifndef KILN_TEST_CMAKE_KERNELS_BUFFERS_H
#define KILN_TEST_CMAKE_KERNELS_BUFFERS_H

#include <string.h>

#include "kiln_runtime.h"

/* Makes b describe the w x h floats at data (x innermost, rows of w), with dim (two entries,
 * owned by the caller) as its dimensions. */
static void float_buffer_2d(kiln_buffer_t *b, kiln_dimension_t *dim, float *data, int w, int h) {
    memset(b, 0, sizeof(*b));
    memset(dim, 0, 2 * sizeof(*dim));
    dim[0].extent = w;
    dim[0].stride = 1;
    dim[1].extent = h;
    dim[1].stride = w;
    b->host = (uint8_t *)data;
    b->type.code = (uint8_t)kiln_type_float;
    b->type.bits = 32;
    b->type.lanes = 1;
    b->dimensions = 2;
    b->dim = dim;
}

#endif
