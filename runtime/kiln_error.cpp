// Errors: each thread keeps its last message in a fixed buffer, so recording an error never
// allocates and can be done from any thread, including inside parallel tasks.
#include "runtime/kiln_runtime.h"

#include <cstdarg>
#include <cstdio>

namespace {

thread_local char last_message[1024] = "";

} // namespace

extern "C" {

int kiln_error(int code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(last_message, sizeof(last_message), fmt, args);
    va_end(args);
    return code;
}

const char *kiln_last_error_message(void) {
    return last_message;
}

void kiln_clear_error(void) {
    last_message[0] = '\0';
}

const char *kiln_error_code_name(int code) {
    // Indexed by -code: the codes run from 0 down to kiln_error_device_memory without gaps.
    static const char *const names[] = {
        "kiln_success",
        "kiln_error_generic",
        "kiln_error_out_of_memory",
        "kiln_error_buffer_argument_null",
        "kiln_error_bad_type",
        "kiln_error_bad_dimensions",
        "kiln_error_access_out_of_bounds",
        "kiln_error_bad_stride",
        "kiln_error_param_out_of_range",
        "kiln_error_device_unavailable",
        "kiln_error_assertion_failed",
        "kiln_error_internal",
        "kiln_error_no_device",
        "kiln_error_device_compile",
        "kiln_error_device_run",
        "kiln_error_device_memory",
    };
    static_assert(sizeof(names) / sizeof(names[0]) == 1 - kiln_error_device_memory,
                  "every error code needs a name");
    if (code > 0 || code < kiln_error_device_memory) return "unknown error code";
    return names[-code];
}

} // extern "C"
