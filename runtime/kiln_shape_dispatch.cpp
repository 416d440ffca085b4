// Shape-dispatched kernels: the variant tuned for the output's extents, else the generic one.
#include "runtime/kiln_runtime.h"

namespace {

thread_local const char *last_shape_variant = "";

} // namespace

extern "C" {

int kiln_select_shape_variant(const kiln_buffer_t *output, int count, int dimensions,
                              const int64_t *extents, const char *const *names) {
    int chosen = count - 1;
    if (output && output->dim && output->dimensions == dimensions) {
        for (int i = 0; i < count - 1 && chosen == count - 1; i++) {
            bool same = true;
            for (int d = 0; d < dimensions && same; d++)
                same = output->dim[d].extent == extents[i * dimensions + d];
            if (same) chosen = i;
        }
    }
    last_shape_variant = names[chosen];
    return chosen;
}

const char *kiln_last_shape_variant(void) {
    return last_shape_variant;
}

} // extern "C"
