/* Calls the shape-dispatched kernel scale_by_shape(gain, in, out) at its two shapes and at a
 * third, through both entry points: each must run its own variant ("45x7", "16x16", "generic")
 * and compute in * gain + 1.
 * Prints "shape kernel: ok" on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_test_shapes.h"

static int run(int w, int h, const char *expected, int through_argv) {
    float *in = malloc(sizeof(float) * w * h), *out = malloc(sizeof(float) * w * h);
    kiln_dimension_t din[2] = {{0, 0, 1, 0}, {0, 0, 0, 0}}, dout[2];
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    din[0].extent = w;
    din[1].extent = h;
    din[1].stride = w;
    memcpy(dout, din, sizeof(din));
    memset(&bin, 0, sizeof(bin));
    memset(&bout, 0, sizeof(bout));
    for (i = 0; i < w * h; i++)
        in[i] = (float)(i % 11) * 0.25f;
    bin.host = (uint8_t *)in;
    bout.host = (uint8_t *)out;
    bin.type.code = bout.type.code = (uint8_t)kiln_type_float;
    bin.type.bits = bout.type.bits = 32;
    bin.type.lanes = bout.type.lanes = 1;
    bin.dimensions = bout.dimensions = 2;
    bin.dim = din;
    bout.dim = dout;
    if (through_argv) {
        float gain = 2.0f;
        kiln_buffer_t *pin = &bin, *pout = &bout;
        void *args[3];
        args[0] = &gain;
        args[1] = &pin;
        args[2] = &pout;
        code = scale_by_shape_argv(args);
    } else {
        code = scale_by_shape(2.0f, &bin, &bout);
    }
    for (i = 0; code == 0 && i < w * h; i++)
        wrong += out[i] != in[i] * 2.0f + 1.0f;
    printf("%dx%d: ran %s, code %d, %d wrong\n", w, h, kiln_last_shape_variant(), code, wrong);
    free(in);
    free(out);
    return code != 0 || wrong != 0 || strcmp(kiln_last_shape_variant(), expected) != 0;
}

int main(void) {
    int failures = run(45, 7, "45x7", 0) + run(16, 16, "16x16", 0) + run(20, 3, "generic", 0);
    /* The _argv entry point dispatches the same way. */
    failures += run(16, 16, "16x16", 1) + run(20, 3, "generic", 1);
    if (failures) {
        printf("shape kernel: %d failures\n", failures);
        return 1;
    }
    printf("shape kernel: ok\n");
    return 0;
}
