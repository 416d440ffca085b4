/* Calls the tuned, shape-dispatched kernels of the user_ops example from plain C99 and checks
 * each answer against plain C loops: bias_gelu(in, bias, out) and depthwise5x5(in, w, out), each
 * at its two tuned shapes and at one other shape (the generic variant). Prints each call's
 * variant and "user_ops: ok" on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "user_ops_bias_gelu.h"
#include "user_ops_depthwise5x5.h"

/* A dense float32 buffer over host memory, dimension 0 innermost. */
static void make_buffer(kiln_buffer_t *b, kiln_dimension_t *dim, float *host, int dims,
                        const int *extents) {
    int d, stride = 1;
    memset(b, 0, sizeof(*b));
    for (d = 0; d < dims; d++) {
        dim[d].min = 0;
        dim[d].extent = extents[d];
        dim[d].stride = stride;
        dim[d].flags = 0;
        stride *= extents[d];
    }
    b->host = (uint8_t *)host;
    b->type.code = (uint8_t)kiln_type_float;
    b->type.bits = 32;
    b->type.lanes = 1;
    b->dimensions = dims;
    b->dim = dim;
}

/* Pseudo-random values in [-2, 2). */
static void fill(float *p, int n, unsigned seed) {
    int i;
    for (i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 16384.0f - 2.0f;
    }
}

static int close_enough(float got, float want) {
    return fabsf(got - want) <= 1e-4f + 1e-4f * fabsf(want);
}

static int check_bias_gelu(int channels, int rows, const char *expected) {
    int shape_in[2] = {channels, rows}, shape_bias[1] = {channels};
    float *in = malloc(sizeof(float) * channels * rows), *bias = malloc(sizeof(float) * channels);
    float *out = malloc(sizeof(float) * channels * rows);
    kiln_dimension_t din[2], dbias[1], dout[2];
    kiln_buffer_t bin, bbias, bout;
    int c, n, code, wrong = 0;
    fill(in, channels * rows, 1u);
    fill(bias, channels, 2u);
    make_buffer(&bin, din, in, 2, shape_in);
    make_buffer(&bbias, dbias, bias, 1, shape_bias);
    make_buffer(&bout, dout, out, 2, shape_in);
    code = bias_gelu(&bin, &bbias, &bout);
    for (n = 0; code == 0 && n < rows; n++) {
        for (c = 0; c < channels; c++) {
            float v = in[n * channels + c] + bias[c];
            float want = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
            wrong += !close_enough(out[n * channels + c], want);
        }
    }
    printf("bias_gelu %dx%d: ran %s (expected %s), code %d, %d wrong\n", channels, rows,
           kiln_last_shape_variant(), expected, code, wrong);
    free(in);
    free(bias);
    free(out);
    return code != 0 || wrong != 0 || strcmp(kiln_last_shape_variant(), expected) != 0;
}

static int check_depthwise(int channels, int width, int height, const char *expected) {
    int shape_in[3] = {channels, width + 4, height + 4}, shape_w[3] = {channels, 5, 5};
    int shape_out[3] = {channels, width, height};
    int in_count = channels * (width + 4) * (height + 4), out_count = channels * width * height;
    float *in = malloc(sizeof(float) * in_count), *w = malloc(sizeof(float) * channels * 25);
    float *out = malloc(sizeof(float) * out_count);
    kiln_dimension_t din[3], dw[3], dout[3];
    kiln_buffer_t bin, bw, bout;
    int c, x, y, i, j, code, wrong = 0;
    fill(in, in_count, 3u);
    fill(w, channels * 25, 4u);
    make_buffer(&bin, din, in, 3, shape_in);
    make_buffer(&bw, dw, w, 3, shape_w);
    make_buffer(&bout, dout, out, 3, shape_out);
    code = depthwise5x5(&bin, &bw, &bout);
    for (y = 0; code == 0 && y < height; y++) {
        for (x = 0; x < width; x++) {
            for (c = 0; c < channels; c++) {
                float want = 0.0f;
                for (j = 0; j < 5; j++)
                    for (i = 0; i < 5; i++)
                        want += in[((y + j) * (width + 4) + (x + i)) * channels + c] *
                                w[(j * 5 + i) * channels + c];
                wrong += !close_enough(out[(y * width + x) * channels + c], want);
            }
        }
    }
    printf("depthwise5x5 %dx%dx%d: ran %s (expected %s), code %d, %d wrong\n", channels, width,
           height, kiln_last_shape_variant(), expected, code, wrong);
    free(in);
    free(w);
    free(out);
    return code != 0 || wrong != 0 || strcmp(kiln_last_shape_variant(), expected) != 0;
}

int main(void) {
    int failures = 0;
    /* The tuned shapes (SHAPES in CMakeLists.txt) and one other, which runs the generic variant
     * (the generator's own schedule). */
    failures += check_bias_gelu(64, 32, "64x32");
    failures += check_bias_gelu(32, 8, "32x8");
    failures += check_bias_gelu(24, 5, "generic");
    failures += check_depthwise(16, 16, 16, "16x16x16");
    failures += check_depthwise(8, 32, 8, "8x32x8");
    failures += check_depthwise(12, 9, 7, "generic");
    if (failures) {
        printf("user_ops: %d failures\n", failures);
        return 1;
    }
    printf("user_ops: ok\n");
    return 0;
}
