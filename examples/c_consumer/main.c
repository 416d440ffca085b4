/* A plain C99 program calling kernels that kiln compiled ahead of time (see generators.cpp and
 * CMakeLists.txt): it checks them against C loops and checks that a wrong buffer is an error
 * code with a message, not a crash. Prints "c_consumer: ok" and returns 0 on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "c_consumer_brighten.h"
#include "c_consumer_matmul.h"
#ifdef C_CONSUMER_HAVE_OPERATOR_KERNEL
#include "c_consumer_op_matmul.h"
#endif

/* A 2-D float32 buffer descriptor over data, dense, dim 0 (x, the column) innermost. */
static kiln_buffer_t make_buffer(float *data, kiln_dimension_t dim[2], int width, int height) {
    kiln_buffer_t b = {0};
    dim[0].min = 0;
    dim[0].extent = width;
    dim[0].stride = 1;
    dim[0].flags = 0;
    dim[1].min = 0;
    dim[1].extent = height;
    dim[1].stride = width;
    dim[1].flags = 0;
    b.host = (uint8_t *)data;
    b.type.code = kiln_type_float;
    b.type.bits = 32;
    b.type.lanes = 1;
    b.dimensions = 2;
    b.dim = dim;
    return b;
}

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "c_consumer: FAILED: %s\n", what);
        failures++;
    }
}

static void test_matmul(void) {
    /* Any M, N and K: none needs to be a multiple of the tile or the vector width. */
    enum { M = 37, N = 45, K = 29 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *c = malloc(sizeof(float) * M * N);
    kiln_dimension_t da[2], db[2], dc[2];
    kiln_buffer_t A, B, C;
    int i, j, k, code;
    double max_err = 0;
    for (i = 0; i < M * K; i++)
        a[i] = (float)((i * 7 % 13) - 6) / 8.0f;
    for (i = 0; i < K * N; i++)
        b[i] = (float)((i * 5 % 11) - 5) / 4.0f;
    A = make_buffer(a, da, K, M);
    B = make_buffer(b, db, N, K);
    C = make_buffer(c, dc, N, M);
    code = matmul(&A, &B, &C);
    expect(code == 0, "matmul returns 0");
    if (code != 0) fprintf(stderr, "  %s\n", kiln_last_error_message());
    for (i = 0; i < M; i++) {
        for (j = 0; j < N; j++) {
            double want = 0;
            for (k = 0; k < K; k++)
                want += (double)a[i * K + k] * b[k * N + j];
            if (fabs(c[i * N + j] - want) > max_err) max_err = fabs(c[i * N + j] - want);
        }
    }
    expect(max_err < 1e-3, "matmul matches the C loop");

    /* The kernel computes the region C covers, so fewer rows of C are legal; fewer rows of A than
     * C needs is an error code with a message. */
    C = make_buffer(c, dc, N, M - 1);
    A = make_buffer(a, da, K, M);
    code = matmul(&A, &B, &C);
    expect(code == 0, "matmul into a smaller output is legal");
    A = make_buffer(a, da, K, M - 2);
    C = make_buffer(c, dc, N, M);
    code = matmul(&A, &B, &C);
    expect(code != 0, "matmul with too few rows of A is an error");
    expect(kiln_last_error_message()[0] != '\0', "the error has a message");
    printf("matmul with a short A: %s: %s\n", kiln_error_code_name(code),
           kiln_last_error_message());
    free(a);
    free(b);
    free(c);
}

#ifdef C_CONSUMER_HAVE_OPERATOR_KERNEL
/* The built-in matmul operator, compiled for 64 x 64 x 64 by kiln's operator generator. */
static void test_operator_matmul(void) {
    enum { S = 64 };
    static float a[S * S], b[S * S], c[S * S];
    kiln_dimension_t da[2], db[2], dc[2];
    kiln_buffer_t A, B, C;
    int i, j, k, code;
    double max_err = 0;
    for (i = 0; i < S * S; i++) {
        a[i] = (float)((i * 3 % 7) - 3) / 2.0f;
        b[i] = (float)((i * 5 % 9) - 4) / 4.0f;
    }
    A = make_buffer(a, da, S, S);
    B = make_buffer(b, db, S, S);
    C = make_buffer(c, dc, S, S);
    code = mm(&A, &B, &C);
    expect(code == 0, "the operator matmul returns 0");
    if (code != 0) fprintf(stderr, "  %s\n", kiln_last_error_message());
    for (i = 0; i < S; i++) {
        for (j = 0; j < S; j++) {
            double want = 0;
            for (k = 0; k < S; k++)
                want += (double)a[i * S + k] * b[k * S + j];
            if (fabs(c[i * S + j] - want) > max_err) max_err = fabs(c[i * S + j] - want);
        }
    }
    expect(max_err < 1e-3, "the operator matmul matches the C loop");
}
#endif

static void test_brighten(void) {
    enum { W = 50, H = 7 };
    float in[W * H], out[W * H];
    kiln_dimension_t din[2], dout[2];
    kiln_buffer_t bin, bout;
    int i, code, ok = 1;
    for (i = 0; i < W * H; i++)
        in[i] = (float)i * 0.5f;
    bin = make_buffer(in, din, W, H);
    bout = make_buffer(out, dout, W, H);
    code = brighten(&bin, 2.0f, 3, &bout);
    expect(code == 0, "brighten returns 0");
    for (i = 0; i < W * H; i++)
        ok &= out[i] == in[i] * 2.0f + 3.0f;
    expect(ok, "brighten matches the C loop");
    expect(brighten(NULL, 1.0f, 0, &bout) == kiln_error_buffer_argument_null,
           "a null buffer is kiln_error_buffer_argument_null");
}

int main(void) {
    test_matmul();
    test_brighten();
#ifdef C_CONSUMER_HAVE_OPERATOR_KERNEL
    test_operator_matmul();
#endif
    if (failures) return 1;
    printf("c_consumer: ok\n");
    return 0;
}
