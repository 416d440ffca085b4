/* Calls the multi-target kernel scale_by_target(gain, in, out) with the CPU's choice of
 * variant, then with each variant forced by index; a variant this CPU cannot run must be refused
 * with a message naming the missing feature. Prints "multitarget kernel: ok" on success. */
#include <stdio.h>
#include <string.h>

#include "buffers.h"
#include "kiln_test_multitarget.h"

enum { W = 45, H = 7 };

static int run(const char *forced, const char *expected, float gain) {
    static float in[W * H], out[W * H];
    kiln_dimension_t din[2], dout[2];
    kiln_buffer_t bin, bout;
    int i, code, wrong = 0;
    for (i = 0; i < W * H; i++) {
        in[i] = (float)(i % 17) * 0.25f;
        out[i] = -1000.0f;
    }
    float_buffer_2d(&bin, din, in, W, H);
    float_buffer_2d(&bout, dout, out, W, H);
    kiln_force_target(forced);
    code = scale_by_target(gain, &bin, &bout);
    if (code != 0) {
        const char *message = kiln_last_error_message();
        printf("variant %s: refused: %s\n", forced ? forced : "auto", message);
        /* Only a variant this CPU lacks the features of may be refused. */
        return forced && strstr(message, "which this CPU lacks") ? 0 : 1;
    }
    for (i = 0; i < W * H; i++)
        wrong += out[i] != in[i] * gain + 1.0f;
    printf("variant %s: ran %s, %d wrong\n", forced ? forced : "auto", kiln_last_target_variant(),
           wrong);
    if (expected && strcmp(expected, kiln_last_target_variant()) != 0) return 1;
    return wrong != 0;
}

int main(void) {
    int failures = run(NULL, NULL, 2.0f);
    failures += run("0", "x86-64-v4", 3.0f);
    failures += run("1", "x86-64-v3", 0.5f);
    failures += run("2", NULL, -1.0f); /* host: this machine's CPU name */
    kiln_force_target(NULL);
    if (failures) {
        printf("multitarget kernel: %d failures\n", failures);
        return 1;
    }
    printf("multitarget kernel: ok\n");
    return 0;
}
