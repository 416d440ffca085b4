/* Calls the shape-dispatched kernel scale_by_shape(gain, in, out) at its two shapes and at a
 * third, through both entry points: each must run its own variant ("45x7", "16x16", "generic")
 * and compute in * gain + 1. Built with SHAPE_KERNEL_HEADER and SHAPE_KERNEL, it calls that
 * kernel instead (a multi-target one: the argument, when given, is the target variant to force,
 * which must then be the one that ran). Prints "shape kernel: ok" on success, "shape kernel:
 * skipped" when the forced variant needs CPU features this CPU lacks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#ifndef SHAPE_KERNEL_HEADER
#define SHAPE_KERNEL_HEADER "kiln_test_shapes.h"
#define SHAPE_KERNEL scale_by_shape
#endif
#include SHAPE_KERNEL_HEADER

#define PASTE_(a, b) a##b
#define PASTE(a, b) PASTE_(a, b)

static int run(int w, int h, const char *expected, int through_argv) {
    float *in = malloc(sizeof(float) * w * h), *out = malloc(sizeof(float) * w * h);
    kiln_dimension_t din[2], dout[2];
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    for (i = 0; i < w * h; i++)
        in[i] = (float)(i % 11) * 0.25f;
    float_buffer_2d(&bin, din, in, w, h);
    float_buffer_2d(&bout, dout, out, w, h);
    if (through_argv) {
        float gain = 2.0f;
        kiln_buffer_t *pin = &bin, *pout = &bout;
        void *args[3];
        args[0] = &gain;
        args[1] = &pin;
        args[2] = &pout;
        code = PASTE(SHAPE_KERNEL, _argv)(args);
    } else {
        code = SHAPE_KERNEL(2.0f, &bin, &bout);
    }
    for (i = 0; code == 0 && i < w * h; i++)
        wrong += out[i] != in[i] * 2.0f + 1.0f;
    printf("%dx%d: ran %s, code %d, %d wrong\n", w, h, kiln_last_shape_variant(), code, wrong);
    if (code != 0) printf("error: %s\n", kiln_last_error_message());
    free(in);
    free(out);
    return code != 0 || wrong != 0 || strcmp(kiln_last_shape_variant(), expected) != 0;
}

int main(int argc, char **argv) {
    int failures;
    if (argc > 1) {
        kiln_force_target(argv[1]);
        if (run(16, 16, "16x16", 0) && strstr(kiln_last_error_message(), "which this CPU lacks")) {
            printf("shape kernel: skipped: %s\n", kiln_last_error_message());
            return 0;
        }
    }
    failures = run(45, 7, "45x7", 0) + run(16, 16, "16x16", 0) + run(20, 3, "generic", 0);
    /* The _argv entry point dispatches the same way. */
    failures += run(16, 16, "16x16", 1) + run(20, 3, "generic", 1);
    if (argc > 1) {
        printf("target variant: %s\n", kiln_last_target_variant());
        failures += strcmp(kiln_last_target_variant(), argv[1]) != 0;
    }
    if (failures) {
        printf("shape kernel: %d failures\n", failures);
        return 1;
    }
    printf("shape kernel: ok\n");
    return 0;
}
